"""``churn-connector ledger``: look after a ledger, wherever it lives.

``stats`` (records per scope and kind, the last acknowledgement), ``forget`` (retention:
drop a scope's records, of one kind, acknowledged before a date; a scope the ledger does not
hold is refused, naming those it does), ``export`` (every record
to Parquet) and ``compact`` (the retention default, and object storage's segments merged
into one; safe while others write). The location is a SQLite path or a ledger URL; a
password in it is refused (shell history and process lists keep arguments): PGPASSWORD or
~/.pgpass give it. ``syncs`` lists the incremental syncs' watermarks; ``--set NAME=VALUE``
moves one (a backfill from a point, or past rows never to be sent), ``--reset NAME`` drops
it (the next run reads everything; the ledger still skips what was delivered).
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
from .._sync import (
    FILES_KIND,
    SYNC_KIND,
    Value,
    Watermark,
    file_keys,
    syncs_frame,
    type_of,
)

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
    syncs = commands.add_parser(
        "syncs",
        help="the incremental syncs' watermarks; --set or --reset moves one",
        description="List the watermarks of the incremental syncs the ledger holds (--cursor, "
        "--incremental); --set NAME=VALUE moves one, --reset NAME drops it.",
    )
    syncs.add_argument("location", metavar="LEDGER", type=location, help=_LOCATION_HELP)
    moves = syncs.add_mutually_exclusive_group()
    moves.add_argument(
        "--set",
        metavar="NAME=VALUE",
        help="move sync NAME's watermark to VALUE (a cursor value: an integer, a date, a "
        "timestamp; a version or snapshot id for a table's sync): the next run reads the "
        "rows after it",
    )
    moves.add_argument(
        "--reset",
        metavar="NAME",
        help="drop sync NAME's watermark: the next run reads everything again (the ledger "
        "still skips what was delivered)",
    )
    syncs.add_argument(
        "--scope",
        help="the scope (as `ledger syncs` shows it) of a sync that several scopes hold, or "
        "of one --set creates",
    )
    for command in (stats, forget, export, compact, syncs):
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
    moving = command == "syncs" and (args.set is not None or args.reset is not None)
    read_only = command in ("stats", "export") or (command == "syncs" and not moving)
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
        elif command == "syncs":
            if moving:
                say(_move_sync(ledger, args.set, args.reset, args.scope))
            else:
                say(ledger.describe())
                frame = syncs_frame(ledger)
                if frame.empty:
                    say("no syncs")
                else:
                    width = shutil.get_terminal_size().columns - 1
                    shown = frame.astype({"recorded_at": str})
                    say(text_table(shown, width, wrap="source"))
        else:
            say(ledger.compact(keep_events_days=args.keep_events_days))
    return ExitCode.OK


def _move_sync(ledger: Ledger, setting: str | None, reset: str | None, scope: str | None) -> str:
    """``ledger syncs --set NAME=VALUE`` / ``--reset NAME``: what was done, in a line."""
    if setting is not None:
        name, equals, text = setting.partition("=")
        name, text = name.strip(), text.strip()
        if not equals or not name or not text:
            raise ConfigurationError(
                f"ledger syncs --set {setting!r}: give NAME=VALUE (the name as `ledger syncs` "
                "shows it, the watermark to move to)"
            )
    else:
        assert reset is not None
        name, text = reset.strip(), ""
    frame = syncs_frame(ledger)
    held = frame[frame["name"] == name]
    scopes = sorted(set(held["scope"].astype(str)))
    if scope is not None:
        if scope not in scopes and reset is not None:
            raise ConfigurationError(
                f"ledger syncs --reset: no sync {name!r} in scope {scope!r}"
                + (f" (it is in {', '.join(map(repr, scopes))})" if scopes else "")
            )
        scopes = [scope]
    elif not scopes:
        raise ConfigurationError(
            f"ledger syncs: {ledger.describe()} holds no sync {name!r} (`ledger syncs` lists "
            "them)" + ("; to create one, name its --scope" if setting is not None else "")
        )
    elif len(scopes) > 1:
        raise ConfigurationError(
            f"ledger syncs: sync {name!r} is held in {len(scopes)} scopes "
            f"({', '.join(map(repr, scopes))}): name one with --scope"
        )
    where = scopes[0]
    if reset is not None:
        ledger.forget(where, SYNC_KIND, [name])
        ledger.forget(where, FILES_KIND, file_keys(ledger, where, name))
        ledger.flush()
        return f"sync {name}: watermark dropped (the next run reads everything)"
    old_text = ledger.known(where, SYNC_KIND, [name]).get(name)
    old = Watermark.parse(name, old_text) if old_text is not None else None
    if old is not None and old.by == "files":
        raise ConfigurationError(
            f"ledger syncs --set: sync {name!r} reads a folder by its files: it has no "
            "watermark to set (--reset reads every file again)"
        )
    if old is not None and old.by in ("versions", "snapshots"):
        try:
            new = old.moved(position=int(text))
        except ValueError:
            raise ConfigurationError(
                f"ledger syncs --set: sync {name!r} reads by {old.by}: give a whole number, "
                f"not {text!r}"
            ) from None
    else:
        kind = old.value.type if old is not None and old.value is not None else type_of(text)
        value = Value.parse(kind, text)
        new = (
            old.moved(value)
            if old is not None
            else Watermark(name, "cursor", "set by hand", value=value)
        )
    ledger.record_now(where, SYNC_KIND, [(name, new.text())])
    before = old.shown if old is not None else "none"
    return f"sync {name}: watermark {before} -> {new.shown}"
