"""How reports and results look in Jupyter: compact HTML and matplotlib charts."""

from __future__ import annotations

from .display import (
    Groups,
    report_html,
    result_html,
    result_title,
    undelivered_groups,
)
from .interrupts import short_interrupts
from .palette import COLOURS, MARKS, ORDER, WORST_FIRST
from .plots import failures_chart, states_chart, timeline_chart
from .reasons import reason_lines

__all__ = [
    "COLOURS",
    "MARKS",
    "ORDER",
    "WORST_FIRST",
    "Groups",
    "failures_chart",
    "reason_lines",
    "report_html",
    "result_html",
    "result_title",
    "short_interrupts",
    "states_chart",
    "timeline_chart",
    "undelivered_groups",
]
