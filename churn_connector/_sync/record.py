"""A sync's watermark as the ledger keeps it: a record of its own kind, ``syncs``, in every
backend (the ledger's API is kind-generic: ``known`` / ``record`` / ``forget``).

The record's key is the sync's name; its value (the ledger's "digest" field, text) is JSON
saying what the sync reads by and where it stands::

    {"v": 1, "by": "cursor", "cursor": "loaded_at", "type": "timestamp",
     "value": "2026-11-20T10:00:00.123456Z", "source": "the query 'SELECT …' on postgresql://…"}

``by``: ``cursor`` (a column: ``type`` and ``value``), ``versions`` (a Delta table's change
data feed: ``version``), ``snapshots`` (an Iceberg table's appends: ``snapshot_id``) or
``files`` (a folder: the files themselves are records of the kind ``sync_files``, keyed
``<sync name>\\x1f<file>``, valued ``<size>:<mtime in ns>``). Like every record, it is scoped
to one API and key: a sync to staging and one to production keep their own watermarks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from .._core import ConfigurationError, LedgerError
from .._ledger import Ledger, LedgerUnavailable, ScopedLedger
from .cursor import CURSOR_TYPES, CursorType, Value

__all__ = [
    "FILES_KIND",
    "SYNC_COLUMNS",
    "SYNC_KIND",
    "Watermark",
    "file_key",
    "read_watermark",
    "syncs_frame",
]

SYNC_KIND = "syncs"
FILES_KIND = "sync_files"
_SEP = "\x1f"
SYNC_COLUMNS = ["scope", "name", "by", "cursor", "watermark", "source", "recorded_at"]


def file_key(name: str, file: str) -> str:
    """A folder sync's record of one file it read through."""
    return f"{name}{_SEP}{file}"


@dataclass(frozen=True)
class Watermark:
    """Where a sync stands (see the module)."""

    name: str
    by: str  # "cursor", "versions", "snapshots", "files"
    source: str = ""
    cursor: str | None = None
    value: Value | None = None  # by cursor
    position: int | None = None  # a Delta version, an Iceberg snapshot id
    files: int | None = None  # by files: how many were recorded

    @property
    def shown(self) -> str:
        """Where it stands, in words."""
        if self.by == "cursor":
            return "none yet" if self.value is None else self.value.text
        if self.by == "versions":
            return f"version {self.position}"
        if self.by == "snapshots":
            return f"snapshot {self.position}"
        return f"{self.files or 0:,} files"

    def text(self) -> str:
        """The record's value (JSON)."""
        made: dict[str, Any] = {"v": 1, "by": self.by, "source": self.source}
        if self.cursor is not None:
            made["cursor"] = self.cursor
        if self.value is not None:
            made["type"], made["value"] = self.value.type, self.value.text
        if self.position is not None:
            made["version" if self.by == "versions" else "snapshot_id"] = self.position
        if self.files is not None:
            made["files"] = self.files
        return json.dumps(made, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, name: str, text: str) -> Watermark:
        try:
            made = json.loads(text)
            by = str(made["by"])
            value = None
            if made.get("type") is not None:
                kind = made["type"]
                if kind not in CURSOR_TYPES:
                    raise ValueError(kind)
                value = Value.parse(kind, str(made["value"]))
            position = made.get("version", made.get("snapshot_id"))
            return cls(
                name,
                by,
                source=str(made.get("source", "")),
                cursor=made.get("cursor"),
                value=value,
                position=None if position is None else int(position),
                files=made.get("files"),
            )
        except (ValueError, KeyError, TypeError, ConfigurationError):
            raise ConfigurationError(
                f"the ledger's record of sync {name!r} is not a watermark this version reads "
                f"({text[:80]!r}): reset it (churn-connector ledger syncs LEDGER --reset {name})"
            ) from None

    def moved(self, value: Value | None = None, **changes: Any) -> Watermark:
        return replace(self, value=value if value is not None else self.value, **changes)


def read_watermark(ledger: ScopedLedger, name: str) -> Watermark | None:
    """The sync's record, if any. A ledger that cannot be read stops the run: without its
    watermark a sync would read (and look up) everything again."""
    try:
        found = ledger.ledger.known(ledger.scope, SYNC_KIND, [name])
    except LedgerUnavailable as exc:
        raise LedgerError(
            f"ledger {ledger.ledger.location}: cannot read the watermark of sync {name!r} "
            f"({exc.message}); nothing was sent",
            path=ledger.ledger.location,
            retryable=exc.retryable,
        ) from None
    text = found.get(name)
    return None if text is None else Watermark.parse(name, text)


def known_files(ledger: ScopedLedger, name: str, files: Iterable[str]) -> dict[str, str]:
    """The files a folder sync read through before: file -> ``size:mtime``."""
    keys = {file_key(name, f): f for f in files}
    try:
        found = ledger.ledger.known(ledger.scope, FILES_KIND, list(keys))
    except LedgerUnavailable as exc:
        raise LedgerError(
            f"ledger {ledger.ledger.location}: cannot read the files of sync {name!r} "
            f"({exc.message}); nothing was sent",
            path=ledger.ledger.location,
            retryable=exc.retryable,
        ) from None
    return {keys[k]: v for k, v in found.items()}


def _records(ledger: Ledger, kind: str) -> Iterator[tuple[str, str, str, Any]]:
    """(scope, key, value, acknowledged_at) of every record of ``kind``."""
    for batch in ledger.batches():
        frame = batch.to_pandas()
        frame = frame[frame["kind"] == kind]
        yield from zip(
            frame["scope"], frame["key"], frame["digest"], frame["acknowledged_at"], strict=True
        )


def syncs_frame(ledger: Ledger) -> pd.DataFrame:
    """Every sync the ledger holds: scope, name, by, cursor, watermark, source, recorded_at."""
    rows = []
    for scope, key, value, at in _records(ledger, SYNC_KIND):
        try:
            mark = Watermark.parse(key, value)
            rows.append((scope, key, mark.by, mark.cursor or "", mark.shown, mark.source, at))
        except ConfigurationError:
            rows.append((scope, key, "?", "", value[:40], "", at))
    frame = pd.DataFrame(rows, columns=SYNC_COLUMNS)
    return frame.sort_values(["scope", "name"], ignore_index=True)


def file_keys(ledger: Ledger, scope: str, name: str) -> list[str]:
    """The keys of a folder sync's file records (to forget them with its watermark)."""
    prefix = name + _SEP
    return [
        key
        for where, key, _, _ in _records(ledger, FILES_KIND)
        if where == scope and key.startswith(prefix)
    ]


def type_of(text: str) -> CursorType:
    """The cursor type a value written by a person is (``ledger syncs --set`` of a sync
    that has no record yet)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return "integer"
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        return "date"
    try:
        moment = pd.Timestamp(text)
    except (ValueError, TypeError):
        raise ConfigurationError(
            f"{text!r} is no cursor value: an integer, a date (2026-11-20) or a timestamp "
            "(2026-11-20T00:00:00Z)"
        ) from None
    return "timestamp" if moment.tzinfo is not None else "local_timestamp"
