"""How reports and results look in Jupyter: compact HTML and matplotlib charts."""

from __future__ import annotations

from .display import Groups, report_html, result_html, undelivered_groups
from .palette import COLOURS, MARKS, ORDER, WORST_FIRST
from .plots import failures_chart, states_chart, timeline_chart

__all__ = [
    "COLOURS",
    "MARKS",
    "ORDER",
    "WORST_FIRST",
    "Groups",
    "failures_chart",
    "report_html",
    "result_html",
    "states_chart",
    "timeline_chart",
    "undelivered_groups",
]
