"""``churn-connector runs``: read a run history (``--history``): ``list`` one line a run,
the newest last; ``show RUN_ID`` one run's whole receipt as JSON."""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from typing import Any

import pandas as pd

from .._core import ConfigurationError, read_runs, text_table

__all__ = ["add_runs_parser", "run_runs"]

_HISTORY_HELP = (
    "the run history: FILE.jsonl (or its folder), sqlite:///FILE, duckdb:///FILE, "
    "postgresql://USER@HOST/DB (no password in it: PGPASSWORD or ~/.pgpass) or "
    "parquet:///FOLDER"
)


def add_runs_parser(
    sub: Any, add_verbosity: Callable[[argparse.ArgumentParser, Any], None]
) -> None:
    """The ``runs`` command and its subcommands ``list`` and ``show``."""
    runs = sub.add_parser(
        "runs",
        help="read a run history (send --history): list, show",
        description="Read the run history that send --history appends to: one row per run.",
    )
    add_verbosity(runs, argparse.SUPPRESS)
    inner = runs.add_subparsers(
        dest="runs_command", required=True, parser_class=type(runs), metavar="COMMAND"
    )
    listing = inner.add_parser("list", help="one line a run, the newest last")
    add_verbosity(listing, argparse.SUPPRESS)
    listing.add_argument("history", metavar="HISTORY", help=_HISTORY_HELP)
    listing.add_argument(
        "--last", type=int, default=20, metavar="N", help="the latest N runs (default 20)"
    )
    listing.add_argument("--json", action="store_true", help="the receipts, one JSON line each")
    show = inner.add_parser("show", help="one run's receipt, as JSON")
    add_verbosity(show, argparse.SUPPRESS)
    show.add_argument("history", metavar="HISTORY", help=_HISTORY_HELP)
    show.add_argument("run_id", metavar="RUN_ID", help="the run's id (runs list shows it)")


def run_runs(args: argparse.Namespace) -> int:
    runs = read_runs(args.history)
    if args.runs_command == "show":
        found = [r for r in runs if r.get("run_id") == args.run_id]
        if not found:
            latest = f"; the latest: {runs[-1].get('run_id')}" if runs else ""
            raise ConfigurationError(
                f"no run {args.run_id!r} in the history {args.history} "
                f"({len(runs)} runs{latest}): runs list shows their ids"
            )
        print(json.dumps(found[-1], indent=2))
        return 0
    if args.last < 1:
        raise ConfigurationError(f"--last must be at least 1, not {args.last}")
    runs = runs[-args.last :]
    if args.json:
        for run in runs:
            print(json.dumps(run, separators=(",", ":")))
        return 0
    if not runs:
        print(f"no run in the history {args.history} yet")
        return 0
    # the run's id is never cut: runs show takes it
    print(text_table(_frame(runs), max(shutil.get_terminal_size().columns - 1, 120)))
    return 0


def _frame(runs: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for run in runs:
        counts = run.get("counts") or {}
        rows.append(
            {
                "run_id": run.get("run_id"),
                "started_at": run.get("started_at"),
                "kind": run.get("kind"),
                "rows": run.get("rows"),
                "sent": counts.get("sent", 0),
                "invalid": counts.get("invalid", 0),
                "undelivered": counts.get("rejected", 0) + counts.get("failed", 0),
                "exit": run.get("exit_code"),
            }
        )
    return pd.DataFrame(rows)
