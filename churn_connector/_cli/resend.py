"""``churn-connector resend ROWS DATA``, and the receipts every send can leave.

``resend`` re-sends the rows a previous ``send --rows ROWS`` left ``failed`` (and
``rejected`` with ``--include-rejected``), from the same input, with the same message ids;
it refuses an input whose fingerprint is not the one the rows file records. ``--rows``
writes the whole input's rows file again, with the re-sent rows' new states, so a second
re-send can follow. Exit codes as ``send``'s.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from .._client import Client
from .._core import ClientConfig, Interrupted, Kind, RunStopped
from .._resend import merged_rows, plan_resend, send_plan
from .._results import (
    SendResult,
    append_line,
    check_receipts_path,
    check_result_path,
    now_utc,
    receipt_line,
    receipts_path,
    refuse_clashes,
    stored_header,
    write_frame,
    write_frames,
)
from .._results import stopped_receipt as receipt_of_stopped
from .flags import (
    add_data_arguments,
    add_send_arguments,
    client_options,
    data_options,
    input_argument,
    inputs_of,
    send_options,
)


def add_receipts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--receipts",
        type=Path,
        metavar="FILE|DIR",
        help="append the run's receipt (one JSON line: ids, counts, fingerprint; never data) "
        "to FILE, or to DIR/receipts.jsonl",
    )


def add_resend(sub: Any, verbosity: Any) -> argparse.ArgumentParser:
    """The ``resend`` subcommand's parser."""
    p: argparse.ArgumentParser = sub.add_parser(
        "resend", help="re-send the rows a previous send left failed, from the same input"
    )
    verbosity(p)
    p.add_argument("rows_file", type=Path, metavar="ROWS", help="the --rows file of that send")
    add_data_arguments(p, positional=False)
    p.add_argument(
        "file",
        type=input_argument,
        metavar="DATA",
        help="the same input (its fingerprint is checked; a Delta or Iceberg table is read at "
        "the version the first run read)",
    )
    p.add_argument(
        "--include-rejected",
        action="store_true",
        help="re-send the rows the API rejected too (after fixing the API's side)",
    )
    p.add_argument("--results", type=Path, help="write the per-request frame (.csv/.parquet)")
    p.add_argument(
        "--rows", type=Path, help="write the whole input's per-row frame, updated (.csv/.parquet)"
    )
    add_receipts(p)
    add_send_arguments(p)
    return p


def run_resend(args: argparse.Namespace) -> int:
    """Plan, send, write the files asked for; return the exit code."""
    started, quiet = now_utc(), args.quiet
    check_result_path(args.results)
    check_result_path(args.rows)
    check_receipts_path(args.receipts)
    refuse_clashes(inputs_of(args), [("--results", args.results), ("--rows", args.rows)])
    # the kind is the rows file's: the data flags are read as that kind's
    kind = _kind_of(args.rows_file)
    args.kind = kind
    options = {**send_options(args), **data_options(args)}
    plan = plan_resend(args.rows_file, args.file, include_rejected=args.include_rejected, **options)
    config = ClientConfig.create(api_key=None, dry_run=args.dry_run, **client_options(args))
    try:
        result = send_plan(
            plan, Client(config=config), progress=False if quiet else None, **options
        )
    except (RunStopped, Interrupted) as exc:
        if args.results is not None and exc.chunks is not None:
            write_frame(exc.chunks, args.results)
        stopped_receipt(args, "resend", kind, exc, started)
        raise
    if not quiet:
        print(f"re-sending {len(plan.positions):,} of {plan.total:,} rows")
        print(result.summary())
    if args.results is not None:
        write_frame(result.chunks, args.results)
    if args.rows is not None:
        write_frames([merged_rows(plan, result.rows)], args.rows)
    result_receipt(args, "resend", result)
    return result.exit_code


def _kind_of(path: Path) -> Kind:
    # the header alone: the rows are read once, by the plan (which also says what is wrong
    # with a file that is no rows file, or is the input given first)
    kind = (stored_header(path) or {}).get("kind")
    return "identities" if kind == "identities" else "events"


def result_receipt(args: argparse.Namespace, command: str, result: SendResult) -> None:
    """Append the receipt of a run that finished (``--receipts``)."""
    if getattr(args, "receipts", None) is None:
        return
    append_line(receipt_line(result.receipt(command=command)), receipts_path(args.receipts))


def stopped_receipt(
    args: argparse.Namespace,
    command: str,
    kind: str,
    exc: RunStopped | Interrupted,
    started: dt.datetime,
) -> None:
    """Append the receipt of a run that stopped part way (``--receipts``)."""
    if getattr(args, "receipts", None) is None:
        return
    made = receipt_of_stopped(command, kind, exc, started)
    append_line(receipt_line(made), receipts_path(args.receipts))
