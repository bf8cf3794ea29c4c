"""``churn-connector plan infer EXPORT``: draft a tracking plan from an export.

It validates the export against the contract (the reading flags of ``validate`` apply) and
drafts, from the rows that meet it, a plan those rows pass (``_validate/plan_infer.py``):
types, ``enum`` for text with few values, ``required`` for what is always there. Printed as
YAML (``--format json``: JSON) for the user to read, tighten (ranges, patterns) and keep.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from .._core import ConfigurationError
from .._events import validate_events
from .._identities import validate_identities
from .._options import EventOptions, IdentityOptions
from .._validate import MAX_ENUM, TrackingPlan, infer_plan
from .flags import add_data_arguments, data_options, input_argument

__all__ = ["add_plan_parser", "run_plan"]


def add_plan_parser(
    sub: Any, add_verbosity: Callable[[argparse.ArgumentParser, Any], None]
) -> None:
    """The ``plan`` command and its subcommand ``infer``."""
    plan = sub.add_parser("plan", help="tracking plans: draft one from an export (plan infer)")
    add_verbosity(plan, argparse.SUPPRESS)
    inner = plan.add_subparsers(dest="plan_command", required=True)
    infer = inner.add_parser(
        "infer",
        help="draft a tracking plan from an export's valid rows, printed as YAML",
        description="Draft a tracking plan from the rows of EXPORT that meet the contract: "
        "each event type's properties with their types, an enum for text with few values, "
        "required for what is always there and never null. Ranges are left to you.",
    )
    add_verbosity(infer, argparse.SUPPRESS)
    infer.add_argument(
        "file", metavar="EXPORT", type=input_argument, help="the export, as validate reads it"
    )
    infer.add_argument(
        "--kind",
        choices=["events", "identities"],
        default="events",
        help="what the export holds (default events; identities: a schema of traits)",
    )
    infer.add_argument(
        "--max-enum",
        type=int,
        default=MAX_ENUM,
        metavar="N",
        help=f"text properties with at most N distinct values get an enum (default {MAX_ENUM}; "
        "0: none)",
    )
    infer.add_argument(
        "--output",
        choices=["yaml", "json"],
        default="yaml",
        help="print the plan as YAML (the default; needs PyYAML) or JSON",
    )
    add_data_arguments(infer, skip=("plan",), positional=False)
    infer.set_defaults(plan=None)  # drafting one: no plan to check against


def run_plan(args: argparse.Namespace) -> int:
    """``plan infer``: print the draft; 0, or 3 when the export cannot be read."""
    if args.max_enum < 0:
        raise ConfigurationError(f"--max-enum must be at least 0, not {args.max_enum}")
    given = data_options(args)
    validate = validate_events if args.kind == "events" else validate_identities
    report = validate(args.file, **given)
    table = (EventOptions if args.kind == "events" else IdentityOptions).given(given)
    plan = infer_plan(report.valid, args.kind, table.rules, max_enum=args.max_enum)
    print(_text(plan, args, report.n_rows, report.n_valid), end="")
    return 0


def _text(plan: TrackingPlan, args: argparse.Namespace, rows: int, valid: int) -> str:
    found = plan.to_dict()
    if args.kind == "identities":
        found.pop("events", None)
    if args.output == "json":
        return json.dumps(found, indent=2, ensure_ascii=False) + "\n"
    try:
        import yaml  # noqa: PLC0415  (an optional extra)
    except ImportError:
        raise ConfigurationError(
            'printing YAML needs PyYAML: pip install "churn-connector[yaml]", or give --output json'
        ) from None
    today = dt.datetime.now(dt.UTC).date().isoformat()
    head = (
        f"# A tracking plan drafted by churn-connector plan infer on {today}\n"
        f"# from {args.file} ({valid:,} valid of {rows:,} rows). Review it: add the ranges\n"
        "# (minimum, maximum, maxLength, pattern) and tighten what the data cannot say.\n"
    )
    body: str = yaml.safe_dump(found, sort_keys=False, allow_unicode=True, width=100)
    return head + body
