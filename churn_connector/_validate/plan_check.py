"""A tracking plan applied to the rows of one slice that meet the contract: each event type's
rows checked together against its compiled schema, each failure a record like the
contract's (row, column, check, value, message), its check named for the rule it breaks
(``plan.invoice_paid.amount.minimum``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._core import Kind, shown
from .._json import ValueRules
from .checks import UNKNOWN_EVENT
from .columns import merged_objects
from .failure_log import failure_record
from .plan import TrackingPlan
from .plan_rules import MISSING, Found, Rules

__all__ = ["PlanFindings", "plan_failures", "rule_name"]


@dataclass
class PlanFindings:
    """What the plan found in one slice: failure ``records`` (positions in the book),
    ``invalid`` (positions within the slice) and, with ``unknown_events="warn"``, the rows
    of each event type the plan lacks (sent)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    invalid: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    unknown: Counter[str] = field(default_factory=Counter)


def rule_name(scope: str, path: str, keyword: str) -> str:
    """The check's name: ``plan.<event type or traits>.<path>.<keyword>``."""
    return f"plan.{scope}.{path}.{keyword}" if path else f"plan.{scope}.{keyword}"


def plan_failures(
    plan: TrackingPlan,
    kind: Kind,
    frame: pd.DataFrame,
    rows: np.ndarray,
    rules: ValueRules,
    start: int,
    labels: pd.Index,
) -> PlanFindings:
    """Check ``rows`` (positions within ``frame``, a slice starting at ``start`` in the
    book) against ``plan``."""
    out = PlanFindings()
    if not len(rows):
        return out
    found: dict[tuple[int, str], dict[str, Any]] = {}
    if kind == "identities":
        traits = plan.traits_rules
        if traits is not None:
            _check(traits, frame, rows, "traits", "traits", rules, start, labels, found)
    else:
        types = frame["event_type"].to_numpy(dtype=object)[rows]
        codes, uniques = pd.factorize(types)
        for k, event_type in enumerate(uniques):
            mine = rows[codes == k]
            compiled = plan.rules_for(str(event_type))
            if compiled is not None:
                _check(
                    compiled,
                    frame,
                    mine,
                    str(event_type),
                    "properties",
                    rules,
                    start,
                    labels,
                    found,
                )
            elif plan.unknown_events == "warn":
                out.unknown[str(event_type)] += len(mine)
            elif plan.unknown_events == "refuse":
                message = (
                    f"event type {event_type!r} is not in the tracking plan, which refuses "
                    "unknown events (plan: unknown_events refuse): add it to the plan, or fix "
                    "the event type"
                )
                for p in mine.tolist():
                    found[p, UNKNOWN_EVENT] = failure_record(
                        labels[p], start + p, "event_type", UNKNOWN_EVENT, event_type, message
                    )
    if found:
        out.records = sorted(found.values(), key=lambda r: r["position"])
        out.invalid = np.unique(np.fromiter((p for p, _ in found), np.int64, len(found)))
    return out


def _check(
    compiled: Rules,
    frame: pd.DataFrame,
    rows: np.ndarray,
    scope: str,
    column: str,
    rules: ValueRules,
    start: int,
    labels: pd.Index,
    found: dict[tuple[int, str], dict[str, Any]],
) -> None:
    """Check the ``column`` objects (merged with their flat columns) of ``rows``."""
    objects = np.empty(len(rows), dtype=object)
    objects[:] = merged_objects(frame.iloc[rows], column, rules)
    failures: list[Found] = []
    compiled.check(objects, rows, failures)
    for f in failures:
        check = rule_name(scope, f.path, f.keyword)
        where = f"{column}.{f.path}" if f.path else column
        about = f"event type {scope}" if column == "properties" else "identities"
        for p, value in zip(f.rows.tolist(), f.values, strict=True):
            if (p, check) in found:
                continue  # one failure of a rule a row (an array's items may break it often)
            absent = value is MISSING
            said = f"{where} {f.why}" if absent else f"{where} {shown(value)} {f.why}"
            message = (
                f"{said} (plan: {f.rule}, {about}): fix the value, or the rule in the tracking plan"
            )
            found[p, check] = failure_record(
                labels[p], start + p, where, check, None if absent else value, message
            )
