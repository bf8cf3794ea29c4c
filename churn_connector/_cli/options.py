"""The data flags of ``validate`` and ``send``: what the input is and how it is read and
validated, and the keywords of the Python calls they stand for (one spelling each)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._core.exceptions import ConfigurationError
from .._read.names import NAME_STYLES
from .._read.text import TEXT_FIELDS, add_text_arguments


def pair(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--rename``, ``--dtype``) as a pair."""
    source, sep, target = text.partition("=")
    if not sep or not source or not target:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return source, target


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    """The input and its reading and validation, as ``validate`` and ``send`` take them."""
    p.add_argument("kind", choices=["events", "identities"])
    p.add_argument(
        "file",
        type=Path,
        help="a .parquet, .csv, .tsv, .ndjson or .avro file (text optionally .gz/.zst), "
        "a folder of part files (or a Redshift manifest), or a glob (quote it)",
    )
    p.add_argument(
        "--rename",
        type=pair,
        action="append",
        metavar="SRC=DEST",
        help="read source column SRC as DEST (repeatable), e.g. --rename EVENT_TYPE=event_type",
    )
    p.add_argument(
        "--rename-style",
        choices=NAME_STYLES,
        help="name the other columns in this style: lower (EVENT_TYPE -> event_type) or snake "
        "(Event Type, eventType -> event_type); the key after properties./traits. is kept",
    )
    p.add_argument(
        "--event-type-style",
        choices=NAME_STYLES,
        help="events: rewrite event types in this style (snake: Order Completed -> "
        "order_completed); the summary notes each rewrite",
    )
    p.add_argument(
        "--dtype",
        type=pair,
        action="append",
        metavar="COL=TYPE",
        help="CSV/TSV: read column COL as TYPE (int64, float64, bool, json, str); "
        "without it CSV cells stay text (repeatable)",
    )
    p.add_argument("--encoding", default="utf-8", help="CSV/TSV text encoding (default utf-8)")
    add_text_arguments(p)
    p.add_argument("--slice-rows", type=int, metavar="N", help="read and validate N rows at a time")
    p.add_argument(
        "--decimals",
        choices=["error", "float", "str"],
        default="error",
        help="DECIMAL/NUMERIC values: refuse them (default), send floats when exact, "
        "or send their digits as text",
    )
    p.add_argument(
        "--epoch-unit",
        choices=["s", "ms", "us", "ns"],
        help="events: occurred_at holds epoch numbers of this unit",
    )
    p.add_argument("--naive-timezone", metavar="TZ", help="zone of timestamps without an offset")
    p.add_argument(
        "--extra-columns",
        choices=["error", "ignore"],
        default="error",
        help="unknown columns: report them (default) or ignore them",
    )
    p.add_argument("--namespace", help="salt for hashed event message ids")
    p.add_argument(
        "--id-format",
        choices=["v1", "v2"],
        help="events: the message-id format (default v2); v1 makes the ids and events of "
        "0.1, to finish a backfill begun with it",
    )
    p.add_argument("--phone-region", metavar="CC", help="identities: region of national numbers")
    p.add_argument(
        "--duplicates",
        choices=["error", "keep_last", "in_order"],
        default="error",
        help="identities: what to do with several rows for one user",
    )
    p.add_argument(
        "--blank-consent",
        choices=["error", "omit_channel", "opted_in"],
        help="identities: a blank <channel>_opted_in cell beside an address makes the row "
        "invalid (error, the default), leaves that channel out (omit_channel), or sends it "
        "opted in (opted_in)",
    )
    p.add_argument(
        "--require-consent",
        action="store_true",
        help="identities: refuse rows with an address but no <channel>_opted_in column, "
        "and channels items without opted_in (otherwise opted in, the contract's default)",
    )


def data_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of the Python calls that the data flags stand for."""
    options: dict[str, Any] = {
        "naive_timezone": args.naive_timezone,
        "extra_columns": args.extra_columns,
        "rename": dict(args.rename or ()),
        "dtypes": dict(args.dtype or ()),
        "encoding": args.encoding,
        "decimals": args.decimals,
        "rename_style": args.rename_style,
        **{name: getattr(args, name) for name in TEXT_FIELDS},
    }
    if args.slice_rows is not None:
        options["slice_rows"] = args.slice_rows
    if args.kind == "events":
        options["namespace"] = args.namespace
        options["epoch_unit"] = args.epoch_unit
        options["event_type_style"] = args.event_type_style
        if args.id_format is not None:
            options["id_format"] = args.id_format
    elif (
        args.epoch_unit is not None
        or args.event_type_style is not None
        or args.id_format is not None
    ):
        raise ConfigurationError(
            "--epoch-unit, --event-type-style and --id-format apply to events only"
        )
    else:
        options["phone_region"] = args.phone_region
        options["duplicates"] = args.duplicates
        options["blank_consent"] = args.blank_consent or "error"
        options["require_consent"] = args.require_consent
    if args.kind == "events" and (args.blank_consent is not None or args.require_consent):
        raise ConfigurationError("--blank-consent and --require-consent apply to identities only")
    return options
