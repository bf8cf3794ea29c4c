"""SyncOptions: what makes a send incremental, declared once (keywords, flags, operators).

A sync reads only what is new: the rows past its watermark (``cursor``), the versions,
snapshots or files since its last run (``incremental``), or the rows of one range
(``since`` / ``until``, a backfill: no watermark is read or moved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._core import ConfigurationError, declare, named, registered
from .cursor import check_lookback, parse_bound

__all__ = ["SyncOptions"]


def _text(value: str) -> str:
    return value


@registered
@dataclass(frozen=True, kw_only=True)
class SyncOptions:
    """How a send reads only what is new (``docs/guides/incremental-syncs.md``)."""

    cursor: str | None = declare(
        None,
        doc="a column that grows as rows arrive (an integer, a timestamp or a date): with a "
        "`ledger`, only the rows past the sync's watermark are read, the filter pushed into "
        "the query or the table's scan ([Incremental syncs](../guides/incremental-syncs.md))",
        help="a column that grows as rows arrive (integer, timestamp or date): with --ledger, "
        "read only the rows past the sync's watermark",
        metavar="COLUMN",
        spark=False,  # a Spark job filters its frame itself (docs/guides/spark.md)
    )
    lookback: Any = declare(
        None,
        doc="re-read this much before the watermark, for rows that land late (`2h`, `1d`; a "
        "number for an integer cursor); the ledger skips what was delivered",
        help="re-read this much before the watermark, for late rows: a duration (2h, 1d) or, "
        "for an integer cursor, a number",
        metavar="DURATION",
        parse=_text,
        spark=False,
    )
    incremental: bool = declare(
        False,
        doc="with a `ledger`, read only what is new without a cursor column: a folder's "
        "part files not seen before (by name, size and modification time)",
        help="with --ledger, read only a folder's part files not seen before",
        spark=False,
    )
    sync_name: str | None = declare(
        None,
        doc="the name of the sync's watermark in the ledger (default: one made from the "
        "source and the cursor; a DataFrame needs one)",
        help="name of the sync's watermark in the ledger (default: made from the source and "
        "the cursor)",
        metavar="NAME",
        spark=False,
        shown_default="made from the source",
    )
    full_refresh: bool = declare(
        False,
        doc="read everything again and start the watermark over (the ledger still skips "
        "what was delivered)",
        help="read everything again and start the sync's watermark over (the ledger still "
        "skips what was delivered)",
        spark=False,
    )
    since: Any = declare(
        None,
        doc="with `cursor`: read only rows whose cursor is at least this (a backfill of a "
        "range: no watermark is read or moved)",
        help="with --cursor: read only rows from this cursor value (a backfill; no "
        "watermark is read or moved)",
        metavar="VALUE",
        parse=_text,
        spark=False,
    )
    until: Any = declare(
        None,
        doc="with `cursor`: read only rows whose cursor is below this (Airflow: the data "
        "interval's end)",
        help="with --cursor: read only rows below this cursor value",
        metavar="VALUE",
        parse=_text,
        spark=False,
    )

    def __post_init__(self) -> None:
        for name in ("incremental", "full_refresh"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{named(name)} must be True or False, not {getattr(self, name)!r}"
                )
        for name in ("cursor", "sync_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigurationError(f"{named(name)} must be a name, not {value!r}")
        check_lookback(self.lookback)
        since, until = parse_bound("since", self.since), parse_bound("until", self.until)
        if since is not None and until is not None:
            if since.type != until.type:
                raise ConfigurationError(
                    f"{named('since')} and {named('until')} must be values of one kind"
                )
            if since.code >= until.code:
                raise ConfigurationError(
                    f"{named('since')} {since.text} is not before {named('until')} {until.text}"
                )
        syncing = self.cursor is not None or self.incremental
        for name in ("lookback", "sync_name", "since", "until"):
            if getattr(self, name) is not None and not syncing:
                raise ConfigurationError(
                    f"{named(name)} is for an incremental sync: name its {named('cursor')}"
                )
        if self.full_refresh and not syncing:
            raise ConfigurationError(
                f"{named('full_refresh')} starts a sync over: name its {named('cursor')} (or "
                f"{named('incremental')})"
            )
        if (self.since is not None or self.until is not None) and self.cursor is None:
            raise ConfigurationError(
                f"{named('since')} and {named('until')} bound a {named('cursor')} column: name it"
            )
        if self.full_refresh and (self.since is not None or self.until is not None):
            raise ConfigurationError(
                f"{named('full_refresh')} and {named('since')}/{named('until')}: a backfill of a "
                "range moves no watermark, so there is nothing to start over"
            )

    @property
    def active(self) -> bool:
        """Whether the send is a sync at all."""
        return self.cursor is not None or self.incremental

    @property
    def ranged(self) -> bool:
        """A backfill of a range: no watermark is read or moved."""
        return self.since is not None or self.until is not None
