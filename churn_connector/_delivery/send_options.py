"""SendOptions: the knobs of one send, declared once and checked like the config.

``Client.send_events`` and ``Client.identify`` take them as keywords beside the table's
options; a bad value is a ``ConfigurationError`` naming the knob, never a silent default
(``max_concurrency=0`` is refused, not read as "the client's").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlsplit

from .._core import (
    MAX_BATCH_SIZE,
    ConfigurationError,
    declare,
    history_target,
    is_loopback,
    named,
    options_of,
    registered,
)
from .._ledger import Ledger, LedgerArg, command_line_location  # noqa: F401
from .._validate import Threshold, ThresholdArg

__all__ = ["SendOptions"]


def _threshold_text(text: str) -> str:
    """``--alert-invalid``'s text, checked as the command line reads it."""
    Threshold.parse(text, "alert_invalid")
    return text


def check_webhook(url: Any) -> None:
    """Refuse an ``alert_webhook`` that is not an https URL (http only to a loopback host,
    for local receivers): the message would cross the network in the clear."""
    if url is None:
        return
    if not isinstance(url, str):
        raise ConfigurationError(f"{named('alert_webhook')} must be a URL, not {url!r}")
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme == "https" and host:
        return
    if scheme == "http" and host and is_loopback(host):
        return
    raise ConfigurationError(
        f"{named('alert_webhook')} must be an https:// URL (http:// only to this machine), "
        f"not one to {scheme or 'no scheme'}://{host or '?'}"
    )


@registered
@dataclass(frozen=True, kw_only=True)
class SendOptions:
    """How one send runs: the keywords of ``Client.send_events`` / ``Client.identify`` that
    are not the table's."""

    dry_run: bool = declare(
        False,
        doc="build every request, send none; valid rows are counted as `would_send`. Needs "
        "no base URL and no key (with a `ledger` it does: its records are scoped to them)",
        help="build every request, send none",
    )
    ledger: LedgerArg = declare(
        None,
        doc="what was acknowledged, to skip it: a SQLite file, a `postgresql://` URL, an "
        "object-storage prefix (`s3://`, `gs://`, `az://`, `file://`) or a `cc.Ledger` "
        "([the ledger](../concepts/ledger.md))",
        help="SQLite file or ledger URL (postgresql://, s3://, ...) of acknowledged data: "
        "skip it on re-runs",
        metavar="LEDGER",
        parse=command_line_location,
    )
    new_ids: bool = declare(
        False,
        doc="send events that the `ledger` holds as delivered under another message id "
        "(same user, event type and `occurred_at`, or `id_columns` values), when their new "
        "ids are meant; without it they are `held` and the run exits 1 "
        "([the re-id guard](../concepts/ledger.md#the-re-id-guard))",
        help="send events the ledger holds as delivered under another message id (a column "
        "added, a rename, namespace or id format changed): their new ids are meant",
        kinds=("events",),
    )
    progress: bool | None = declare(
        None,
        doc="`True` / `False`: a bar counting rows, or none ([Work in a "
        "notebook](../guides/notebooks.md))",
        spark=False,  # a Spark task has no one watching: always off there
        shown_default="`None`: a bar where someone watches (a notebook, a terminal), log "
        "lines elsewhere",
        shown_flag="`-q` turns it off",
    )
    batch_size: int | None = declare(
        None,
        doc=f"events per request for this call (at most {MAX_BATCH_SIZE})",
        flag="--batch-size",  # the CLI sets the client's (ClientConfig.batch_size)
        kinds=("events",),
        shown_default="the client's",
        shown_flag="—",
    )
    max_concurrency: int | None = declare(
        None,
        doc="requests in flight for this call",
        help="requests in flight at most",
        flag="--concurrency",
        metavar="N",
        shown_default="the client's",
    )
    history: str | None = declare(
        None,
        doc="the run history: the run's receipt appended as one row to a `.jsonl` receipts "
        "file, a SQLite (`sqlite:///FILE`) or DuckDB (`duckdb:///FILE`) file, a PostgreSQL "
        "table (`postgresql://USER@HOST/DB`) or a Parquet folder (`parquet:///FOLDER`) "
        "([the run history](../guides/operating.md#the-run-history))",
        help="the run history: FILE.jsonl, sqlite:///FILE, duckdb:///FILE, "
        "postgresql://USER@HOST/DB (no password in it) or parquet:///FOLDER; send appends "
        "one row per run, validate --max-change compares with its runs",
        metavar="URI",
        spark=False,
    )
    alert_webhook: str | None = declare(
        None,
        doc="post one JSON message (Slack-compatible `text`, and the run's receipt: never "
        "the key or a row's values) to this https URL when the run ends with undelivered "
        "rows, or invalid rows above `alert_invalid`; tried 3 times, a failure only logged "
        "([alerts](../guides/operating.md#alerts))",
        help="post one JSON message (Slack-compatible text and the run's receipt) to URL when "
        "the run ends with undelivered rows, or invalid rows above --alert-invalid",
        metavar="URL",
        spark=False,
    )
    alert_invalid: ThresholdArg = declare(
        None,
        doc="the invalid rows an `alert_webhook` tolerates: a number (`10`) or a share "
        '(`"0.5%"`) of the rows read',
        help="alert only above N invalid rows, or above N%% of the rows (default: any invalid "
        "row alerts)",
        metavar="N[%]",
        parse=_threshold_text,
        shown_default="`None`: any invalid row alerts",
        spark=False,
    )

    def __post_init__(self) -> None:
        if self.history is not None:
            if isinstance(self.history, os.PathLike):
                object.__setattr__(self, "history", os.fspath(self.history))
            history_target(self.history)  # a bad one is refused before anything is sent
        check_webhook(self.alert_webhook)
        if self.alert_invalid is not None:
            try:
                Threshold.parse(self.alert_invalid, "alert_invalid")
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from None
        for name in ("dry_run", "new_ids"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, not {getattr(self, name)!r}"
                )
        if self.progress is not None and not isinstance(self.progress, bool):
            raise ConfigurationError(
                f"progress must be True, False or None (a bar where someone watches), "
                f"not {self.progress!r}"
            )
        for name in ("batch_size", "max_concurrency"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"{named(name)} must be a whole number of at least 1 (None: the client's), "
                    f"not {value!r}"
                )
        if self.batch_size is not None and self.batch_size > MAX_BATCH_SIZE:
            raise ConfigurationError(
                f"batch_size must be between 1 and {MAX_BATCH_SIZE} (the API's limit), "
                f"got {self.batch_size}"
            )

    @classmethod
    def given(cls, values: Mapping[str, Any]) -> Self:
        """The knobs named in ``values`` (other names are not looked at): for callers that
        have them by name, as text configuration gives them (Spark's options)."""
        return cls(**{o.name: values[o.name] for o in options_of(cls) if o.name in values})
