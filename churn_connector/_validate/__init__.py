"""Validation: pandera imported once, the check registry, schema building blocks, column
rules, the ValidationReport, and the quarantine of invalid rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_names
from .checks import CHECKS
from .columns import (
    elementwise,
    flat_columns,
    fullmatch,
    id_type_ok,
    ids_to_wire,
    is_int_dtype,
    is_struct,
    is_text_dtype,
    merged_objects,
    not_blank,
    strings_ok,
    struct_lacks,
)
from .document import FIRST_FAILURES, check_counts, column_counts, dumps, report_document
from .failure_log import FailureLog, failures_frame, run_schema
from .gate import (
    GateOptions,
    GateVerdict,
    Threshold,
    ThresholdArg,
    check_of_kind,
    counted_rows,
    judge,
    warns,
)
from .pandera import pa
from .plan import PlanSource, TrackingPlan, as_plan
from .plan_check import PlanFindings, plan_failures
from .plan_infer import MAX_ENUM, infer_plan
from .report import ValidationReport, csv_safe, write_rows
from .schema import (
    EXPLAIN_KEY,
    OWNERS_KEY,
    PARSES_KEY,
    TIMESTAMPS_KEY,
    Explain,
    SchemaBuilder,
    explanations,
    message,
    timestamp_cache,
    unknown_column,
)

if TYPE_CHECKING:
    from .ci import GITHUB_CAP, github_lines, junit_xml

__all__ = [
    "CHECKS",
    "EXPLAIN_KEY",
    "FIRST_FAILURES",
    "GITHUB_CAP",
    "MAX_ENUM",
    "OWNERS_KEY",
    "PARSES_KEY",
    "TIMESTAMPS_KEY",
    "Explain",
    "FailureLog",
    "GateOptions",
    "GateVerdict",
    "PlanFindings",
    "PlanSource",
    "SchemaBuilder",
    "Threshold",
    "ThresholdArg",
    "TrackingPlan",
    "ValidationReport",
    "as_plan",
    "check_counts",
    "check_of_kind",
    "column_counts",
    "counted_rows",
    "csv_safe",
    "dumps",
    "elementwise",
    "explanations",
    "failures_frame",
    "flat_columns",
    "fullmatch",
    "github_lines",
    "id_type_ok",
    "ids_to_wire",
    "infer_plan",
    "is_int_dtype",
    "is_struct",
    "is_text_dtype",
    "judge",
    "junit_xml",
    "merged_objects",
    "message",
    "not_blank",
    "pa",
    "plan_failures",
    "report_document",
    "run_schema",
    "strings_ok",
    "struct_lacks",
    "timestamp_cache",
    "unknown_column",
    "warns",
    "write_rows",
]

# ci: loaded on first use (see _core.lazy); type checkers read the imports above
if not TYPE_CHECKING:
    __getattr__ = lazy_names(
        __name__, {"GITHUB_CAP": ".ci", "github_lines": ".ci", "junit_xml": ".ci"}
    )
