"""What a tracking plan costs: the CPU of validating an export with a plan against without.

The plan is the issue's measure (20 event types of ~5 rules each: ``required``, a text
``enum``, a ``maxLength``, an integer ``minimum``, ``unknown_events: refuse``), on the
bench's own exports (``exports.py``: Parquet with a ``properties`` struct, CSV with JSON
text ``properties``), 1M rows by default (``--plan-rows``). Each figure is the median of
``--repeats`` runs of ``cc.validate_events`` in this process, its process CPU time
(``time.process_time``: every thread, pyarrow's readers among them), the two alternating
so the machine's load falls on both alike. The row's value is the ratio with / without; the
budget is 1.3x (a ratio above it is listed under PROBLEMS).
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path
from typing import Any

import exports
from harness import Report, Row

import churn_connector as cc

__all__ = ["BUDGET", "bench_plan", "plan_section"]

BUDGET = 1.3  # the limit: at most 1.3x the CPU of validating without a plan
EVENT_TYPES = 20


def bench_plan() -> cc.TrackingPlan:
    """20 event types (the export's six among them), 7 rules each."""
    names = exports.EVENT_TYPES + [
        f"extra_event_{i}" for i in range(EVENT_TYPES - len(exports.EVENT_TYPES))
    ]
    schema = {
        "type": "object",
        "required": ["plan", "screen"],
        "properties": {
            "plan": {"type": "string", "enum": exports.PLANS},
            "screen": {"type": "string", "maxLength": 8},
            "session_s": {"type": "integer", "minimum": 0},
        },
    }
    return cc.TrackingPlan(dict.fromkeys(names, schema), unknown_events="refuse")


def _cpu(path: Path, plan: cc.TrackingPlan | None) -> tuple[float, int]:
    gc.collect()
    started = time.process_time()
    report = cc.validate_events(path, plan=plan)
    seconds = time.process_time() - started
    invalid = report.n_invalid
    del report
    return seconds, invalid


def plan_section(args: Any, report: Report) -> None:
    """With and without a plan, on Parquet and CSV: the CPU ratio (see the module)."""
    plan = bench_plan()
    rows = args.plan_rows
    for kind in ("parquet", "csv"):
        path = exports.export(args.cache, rows, kind)
        without: list[float] = []
        with_plan: list[float] = []
        for _ in range(args.repeats):
            seconds, invalid = _cpu(path, None)
            without.append(seconds)
            planned, invalid_planned = _cpu(path, plan)
            with_plan.append(planned)
            if invalid or invalid_planned:
                report.problem(
                    f"plan {kind}: {invalid} invalid rows without the plan and "
                    f"{invalid_planned} with it; every row of the export meets both"
                )
        base, cost = statistics.median(without), statistics.median(with_plan)
        ratio = cost / base
        row = report.add(
            Row(
                "plan",
                f"validate {rows:,} rows, {kind}: CPU with a {EVENT_TYPES}-type plan / without",
                ratio,
                "x",
                note=f"{cost:.2f} s vs {base:.2f} s CPU, median of {len(without)}; budget "
                f"{BUDGET}x",
                details={"rows": rows, "with_plan_s": with_plan, "without_s": without},
            )
        )
        if ratio > BUDGET:
            report.problem(f"{row.name}: {ratio:.2f}x, above the {BUDGET}x budget")
