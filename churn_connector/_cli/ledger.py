"""``churn-connector ledger``: look after a ledger, wherever it lives.

``stats`` (records per scope and kind, the last acknowledgement), ``forget`` (retention:
drop a scope's records, of one kind, acknowledged before a date; a scope the ledger does not
hold is refused, naming those it does), ``export`` (every record
to Parquet) and ``compact`` (the retention default, and object storage's segments merged
into one; safe while others write). The location is a SQLite path or a ledger URL; a
password in it is refused (shell history and process lists keep arguments): PGPASSWORD or
~/.pgpass give it.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .._core import ConfigurationError, ExitCode, text_table
from .._ledger import EVENT_RETENTION_DAYS, EXPORT_SCHEMA, Ledger, command_line_location

_LOCATION_HELP = (
    "a SQLite file or a ledger URL: postgresql://user@host/db, s3://bucket/prefix/, gs://, "
    "az://, file://"
)


def _when(text: str) -> date | datetime:
    """``--before``: a date (midnight UTC) or an ISO 8601 time (UTC when it names no zone)."""
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is no date: give YYYY-MM-DD or an ISO 8601 time") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _reading(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    read.__name__ = parse.__name__
    return read


def add_ledger_parser(
    sub: Any, add_verbosity: Callable[[argparse.ArgumentParser, Any], None]
) -> None:
    """The ``ledger`` command and its subcommands, on the main parser's ``sub``."""
    ledger = sub.add_parser(
        "ledger",
        help="look after a ledger: stats, forget, export, compact",
        description="Look after a ledger (a SQLite file, a PostgreSQL table, segment files "
        "under an object-storage prefix): what it holds, retention, an export, compaction.",
    )
    add_verbosity(ledger, argparse.SUPPRESS)
    commands = ledger.add_subparsers(
        dest="ledger_command", required=True, parser_class=type(ledger), metavar="COMMAND"
    )
    location = _reading(command_line_location)

    stats = commands.add_parser(
        "stats", help="records per scope (API and key hash) and kind, and the last acknowledgement"
    )
    stats.add_argument("location", metavar="LEDGER", type=location, help=_LOCATION_HELP)

    forget = commands.add_parser(
        "forget",
        help="drop records (retention): a scope's, of one kind, acknowledged before a date",
    )
    forget.add_argument("location", metavar="LEDGER", type=location, help=_LOCATION_HELP)
    forget.add_argument(
        "--scope", required=True, help="whose records: the scope as `ledger stats` shows it"
    )
    forget.add_argument("--kind", choices=("events", "identities"), help="one kind only")
    forget.add_argument(
        "--before",
        type=_reading(_when),
        metavar="DATE",
        help="only records acknowledged before this date or time (UTC unless it says)",
    )

    export = commands.add_parser("export", help="write every record to a Parquet file")
    export.add_argument("location", metavar="LEDGER", type=location, help=_LOCATION_HELP)
    export.add_argument("file", metavar="FILE.parquet", type=Path, help="where to write")

    compact = commands.add_parser(
        "compact",
        help="apply the retention default and merge object storage's segments (safe while "
        "others write)",
    )
    compact.add_argument("location", metavar="LEDGER", type=location, help=_LOCATION_HELP)
    compact.add_argument(
        "--keep-events-days",
        type=int,
        default=EVENT_RETENTION_DAYS,
        metavar="N",
        help="drop event records acknowledged more than N days ago (at least 31: the API "
        "takes events up to 30 days old)",
    )
    for command in (stats, forget, export, compact):
        add_verbosity(command, argparse.SUPPRESS)


def _known_scope(ledger: Ledger, scope: str) -> None:
    """A scope the ledger holds records of; else a ConfigurationError naming those it holds.

    A retention job whose scope is mistyped (or spelled otherwise than ``ledger stats``
    shows it) would forget nothing, every night, with exit 0."""
    scopes = sorted(set(ledger.stats()["scope"].astype(str)))
    if scope in scopes:
        return
    if not scopes:
        raise ConfigurationError(
            f"ledger forget: {ledger.describe()} holds no records, so no scope {scope!r}"
        )
    shown = ", ".join(repr(s) for s in scopes[:_SHOWN_SCOPES])
    more = f" and {len(scopes) - _SHOWN_SCOPES:,} more" if len(scopes) > _SHOWN_SCOPES else ""
    raise ConfigurationError(
        f"ledger forget: {ledger.describe()} holds no records of scope {scope!r}; its "
        f"scopes are {shown}{more} (as `ledger stats` shows them): pass one of those to --scope"
    )


_SHOWN_SCOPES = 10


def run(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """Run ``churn-connector ledger COMMAND``; ``say`` prints unless ``-q``."""
    command = args.ledger_command
    if command == "export" and args.file.suffix.lower() != ".parquet":
        raise ConfigurationError(
            f"ledger export writes Parquet: name a .parquet file, not {args.file}"
        )
    read_only = command in ("stats", "export")
    with Ledger(args.location, read_only=read_only) as ledger:
        if command == "stats":
            say(ledger.describe())
            frame = ledger.stats()
            if frame.empty:
                say("no records")
            else:
                width = shutil.get_terminal_size().columns - 1
                say(text_table(frame.astype({"last_acknowledged": str}), width, wrap="scope"))
        elif command == "forget":
            _known_scope(ledger, args.scope)
            dropped = ledger.drop(args.scope, kind=args.kind, before=args.before)
            say(f"forgot {dropped:,} records of {args.scope}")
        elif command == "export":
            written = 0
            args.file.parent.mkdir(parents=True, exist_ok=True)
            with pq.ParquetWriter(args.file, EXPORT_SCHEMA) as out:
                for batch in ledger.batches():
                    out.write_batch(batch)
                    written += batch.num_rows
            say(f"{written:,} records written to {args.file}")
        else:
            say(ledger.compact(keep_events_days=args.keep_events_days))
    return ExitCode.OK
