"""The ledger: an opt-in local SQLite record of what the API acknowledged.

With a ledger, a re-run skips events whose message id was already acknowledged, and
identify sends only users whose body changed since their last acknowledgement. Only keys
and digests are stored (message ids, user ids, hashes of bodies), never the data itself.
Records are scoped to one API (base URL and a hash of the key): a ledger used against
another API or application skips nothing there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeAlias

from ._core.config import Secret
from ._core.exceptions import ConfigurationError, LedgerError
from ._core.types import Kind, RowState
from ._stream import WireBatch
from ._validate.report import FailureLog

log = logging.getLogger("churn_connector")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS acknowledged (
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    digest TEXT NOT NULL,
    acknowledged_at TEXT NOT NULL,
    PRIMARY KEY (scope, kind, key)
)
"""
_BATCH = 500  # SQLite's bound-parameter limit is 999 on old builds


def digest(body: bytes) -> str:
    """The digest recorded for a request body (SHA-256, 128 bits in hex)."""
    return hashlib.sha256(body).hexdigest()[:32]


def scope_of(base_url: str, api_key: Secret) -> str:
    """Which API and application a record belongs to (the key only as a hash)."""
    return f"{base_url}#{api_key.fingerprint()}"


class Ledger:
    """What the API acknowledged, by scope, kind (``events``/``identities``) and key.

    ``read_only`` opens an existing file without changing it (dry runs).
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        try:
            # sender threads record acknowledgements; every access holds the lock
            uri = f"file:{self.path}?mode={'ro' if read_only else 'rwc'}"
            self._db = sqlite3.connect(
                uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30
            )
            if not read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                # a crash may lose the last records: that costs a re-send, which the API
                # de-duplicates, not a loss; a full fsync per request would cost 3x
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(_SCHEMA)
            else:
                self._db.execute("SELECT 1 FROM acknowledged LIMIT 1")
        except sqlite3.Error as exc:
            raise ConfigurationError(f"ledger {self.path}: {exc}") from None

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def close(self) -> None:
        """Close the SQLite file (a ledger given by path is closed after each run)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def known(self, scope: str, kind: str, keys: Sequence[str]) -> dict[str, str]:
        """The recorded digest of each of ``keys`` that was acknowledged before."""
        found: dict[str, str] = {}
        with self._lock:
            for lo in range(0, len(keys), _BATCH):
                part = list(keys[lo : lo + _BATCH])
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    "SELECT key, digest FROM acknowledged "  # noqa: S608 (placeholders only)
                    f"WHERE scope = ? AND kind = ? AND key IN ({marks})",
                    [scope, kind, *part],
                )
                found.update(rows.fetchall())
        return found

    def record(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        """Record acknowledged (key, digest) pairs; a later acknowledgement replaces one."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        rows = [(scope, kind, key, dig, now) for key, dig in entries]
        self._write("INSERT OR REPLACE INTO acknowledged VALUES (?, ?, ?, ?, ?)", rows)

    def forget(self, scope: str, kind: str, keys: Iterable[str]) -> None:
        """Drop records before their keys are sent again: if that send's outcome is
        unknown (stored, response lost), an old record must not make a later run skip."""
        rows = [(scope, kind, key) for key in keys]
        self._write("DELETE FROM acknowledged WHERE scope = ? AND kind = ? AND key = ?", rows)

    def _write(self, sql: str, rows: Sequence[tuple[str, ...]]) -> None:
        """One transaction for all ``rows`` (one per acknowledged request, not per row)."""
        if self.read_only or not rows:
            return
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def count(self, kind: str) -> int:
        """How many keys of ``kind`` (``"events"``/``"identities"``) are recorded, all scopes."""
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM acknowledged WHERE kind = ?", [kind]
            ).fetchone()
        return int(n)


class ScopedLedger:
    """A ledger seen from one API.

    A failed read sends what was perhaps delivered (the API de-duplicates); a failed write
    stops the run with ``LedgerError``, because a ledger that silently stops recording
    would make the next run re-send everything it was meant to skip.
    """

    def __init__(self, ledger: Ledger, scope: str, *, writable: bool = True) -> None:
        self.ledger = ledger
        self.scope = scope
        self.writable = writable  # False for dry runs: consult, never change

    def known(self, kind: str, keys: Sequence[str]) -> dict[str, str]:
        try:
            return self.ledger.known(self.scope, kind, keys)
        except sqlite3.Error as exc:
            # sending what was perhaps delivered costs requests, never data (the API dedups)
            log.warning("ledger read failed (%s); these rows are sent", exc)
            return {}

    def record(self, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        self._safely(self.ledger.record, kind, list(entries))

    def forget(self, kind: str, keys: Iterable[str]) -> None:
        self._safely(self.ledger.forget, kind, list(keys))

    def _safely(self, write: object, kind: str, items: list[object]) -> None:
        if not self.writable:
            return
        try:
            write(self.scope, kind, items)  # type: ignore[operator]
        except sqlite3.Error as exc:
            raise LedgerError(
                f"ledger {self.ledger.path}: cannot record what the API acknowledged ({exc}); "
                "the run was stopped. Fix the file (or pass another path) and re-run: what "
                "was delivered is stored once",
                path=str(self.ledger.path),
                retryable=_may_heal(exc),
            ) from None


# SQLite's primary result codes of a write that a later run may find possible: the file
# locked by another process, the disk full or failing for now (not: read-only, corrupt)
_PASSING = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR}
)


def _may_heal(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _PASSING


LedgerArg: TypeAlias = "str | os.PathLike[str] | Ledger | None"
"""A ledger file path or an open Ledger; None for no ledger."""


def open_ledger(
    ledger: LedgerArg, scope: str, *, dry_run: bool
) -> tuple[ScopedLedger | None, Ledger | None]:
    """The scoped ledger for a run, and the Ledger the run opened itself (to close)."""
    if ledger is None:
        return None, None
    if isinstance(ledger, Ledger):
        return ScopedLedger(ledger, scope, writable=not dry_run), None
    if dry_run and not Path(ledger).exists():
        return None, None  # nothing recorded yet, and a dry run creates nothing
    opened = Ledger(ledger, read_only=dry_run)
    return ScopedLedger(opened, scope, writable=not dry_run), opened


_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


class LedgerStage:
    """The stage between wire and chunking: skip what was acknowledged, record what is now.

    Events: an id acknowledged with the same content is ``skipped``; with other content it is
    a ``message_id_conflict`` (the API keeps the first). Identities: a user whose body is
    unchanged since its last acknowledgement is ``skipped``; a changed one is sent, and its
    old record dropped first, so an unknown outcome never makes a later run skip.
    """

    def __init__(self, ledger: ScopedLedger, kind: Kind, failures: FailureLog) -> None:
        self.ledger = ledger
        self.kind = kind
        self.failures = failures
        self._pending: dict[int, tuple[str, str]] = {}  # position -> entry, once acknowledged
        self._lock = threading.Lock()

    def apply(self, batches: Iterable[WireBatch]) -> Iterator[WireBatch]:
        for batch in batches:
            yield self.filter(batch)

    def filter(self, batch: WireBatch) -> WireBatch:
        """The entries of ``batch`` still to be sent."""
        if not len(batch):
            return batch
        keys = list(batch.keys)  # one pass: message ids are formatted as they are read
        known = self.ledger.known(self.kind, keys)
        if batch.content is not None:
            digests = [f"{k & _MASK64:016x}" for k in batch.content.tolist()]
        else:
            digests = [digest(b) for b in batch.bodies]
        book = self.failures.book
        keep: list[int] = []
        resent: list[str] = []
        for i, (pos, key, dig) in enumerate(zip(batch.positions, keys, digests, strict=True)):
            previous = known.get(key)
            if previous == dig and pos not in batch.always_send:
                book.set([pos], RowState.SKIPPED)
                book.add_error(pos, _SKIP_NOTE[self.kind])
                continue
            if previous is not None and self.kind == "events" and previous != dig:
                message = (
                    f"message id {key!r} was acknowledged before with different content "
                    "(ledger): the API keeps the first; give this event its own id"
                )
                self.failures.fail(pos, "message_id", "message_id_conflict", key, message)
                continue
            if previous is not None:
                resent.append(key)
            with self._lock:
                self._pending[pos] = (key, dig)
            keep.append(i)
        # until the new body is acknowledged, the API's state is unknown for these keys
        self.ledger.forget(self.kind, resent)
        return batch.select(keep)

    def acknowledged(self, positions: Sequence[int]) -> None:
        """Record the entries of an acknowledged request."""
        with self._lock:
            entries = [self._pending.pop(p) for p in positions]
        self.ledger.record(self.kind, entries)


_SKIP_NOTE = {
    "events": "already delivered (ledger)",
    "identities": "unchanged since its last acknowledgement (ledger)",
}
