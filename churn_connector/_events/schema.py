"""The pandera schema of a raw events table (docs/reference/tables.md), usable on its own.

    schema = cc.events_schema(now=pd.Timestamp.now(tz="UTC"))
    schema.validate(df, lazy=True)   # raises pandera's SchemaErrors listing every bad cell

``cc.validate_events`` runs the same schema and turns pandera's failure cases into a
``ValidationReport`` with a message and a fix for each.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._core import Decimals, EpochUnit, ExtraColumns
from .._json import InexactValue, ValueRules, object_value
from .._options import EventOptions, utc_now
from .._validate import (
    EXPLAIN_KEY,
    OWNERS_KEY,
    PARSES_KEY,
    TIMESTAMPS_KEY,
    SchemaBuilder,
    elementwise,
    fullmatch,
    is_struct,
    message,
    not_blank,
    pa,
    strings_ok,
    struct_lacks,
    unknown_column,
)

EVENT_TYPE_PATTERN = r"[a-z0-9]+(?:_[a-z0-9]+)*"
"""What an ``event_type`` must match as a whole (``re.fullmatch``): lower-case snake_case."""
_FLAT_PROPERTIES = r"^properties\..+$"
_FLAT_CONTEXT = r"^context\..+$"
_RESERVED_COLUMN = "context.$message_id"


def events_schema(
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    epoch_unit: EpochUnit | None = None,
    decimals: Decimals = "error",
) -> pa.DataFrameSchema:
    """The pandera schema of a raw events table (the docs' input tables).

    ``now`` anchors the accepted time window (default: the current UTC time).
    ``extra_columns="ignore"`` lets unknown columns through (they are never sent);
    ``epoch_unit`` and ``decimals`` work as for ``validate_events``.
    """
    return build_schema(
        EventOptions(
            now=now,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            epoch_unit=epoch_unit,
            decimals=decimals,
        )
    )


def build_schema(options: EventOptions) -> pa.DataFrameSchema:
    """The events schema for validated options."""
    tz = options.rules
    now = options.now if options.now is not None else utc_now()  # None: when built
    checks = SchemaBuilder(tz, now, options.epoch_unit)
    message_id_checks = [
        checks.add(
            "message_id_type",
            strings_ok,
            message("message_id must be a string, got {value!r}"),
        ),
        checks.add(
            "message_id_not_blank",
            not_blank,
            message("message_id must not be empty: fill it, or drop the column to use hashed ids"),
        ),
    ]
    reserved_context = checks.add(
        "context_reserved_key",
        lambda s: (
            struct_lacks(s, "$message_id")
            if is_struct(s)
            else elementwise(s, lambda v: "$message_id" not in _object_or_empty(v, tz))
        ),
        message("context must not carry '$message_id': put it in a message_id column instead"),
    )
    context = checks.object_column("context", hand_over=True)
    context.checks.append(reserved_context)
    columns: dict[str, pa.Column] = {
        "external_user_id": checks.user_id(),
        "event_type": pa.Column(
            nullable=False,
            checks=[
                checks.add(
                    "event_type_type",
                    strings_ok,
                    message("event_type must be a string, got {value!r}"),
                ),
                checks.add(
                    "event_type_pattern",
                    lambda s: fullmatch(s, EVENT_TYPE_PATTERN),
                    lambda c, v: (
                        f"event_type {v!r} must be lowercase snake_case matching "
                        f"^{EVENT_TYPE_PATTERN}$ (whole value; no spaces, capitals or newlines)"
                    ),
                ),
            ],
        ),
        "occurred_at": pa.Column(nullable=False, checks=checks.timestamp_checks("occurred_at")),
        "properties": checks.object_column("properties", hand_over=True),
        "context": context,
        "message_id": pa.Column(nullable=False, required=False, checks=message_id_checks),
        _FLAT_PROPERTIES: checks.flat_column("property"),
        _FLAT_CONTEXT: checks.flat_column("context"),
    }
    checks.owners["context_reserved_column"] = "context.$message_id"
    checks.explain["column_in_schema"] = unknown_column("properties", columns)
    return pa.DataFrameSchema(
        columns,
        strict=options.extra_columns == "error",
        checks=[
            *checks.conflicts("properties", "context"),
            checks.add(
                "context_reserved_column",
                # by plain comparison: ``.str`` on a frame's columns fails (and so reported
                # this column) when none is a string, as for a file with no columns at all
                lambda df: pd.Series(_RESERVED_COLUMN not in set(df.columns), index=df.index),
                message("column 'context.$message_id' is reserved: name it message_id instead"),
            ),
        ],
        name="events",
        metadata={
            EXPLAIN_KEY: checks.explain,
            OWNERS_KEY: checks.owners,
            PARSES_KEY: checks.parses,
            TIMESTAMPS_KEY: checks.timestamps,
        },
    )


def _object_or_empty(value: Any, rules: ValueRules) -> dict[str, Any]:
    """The object a cell holds (dict or JSON string); {} when it holds none."""
    try:
        return object_value(value, "context", rules)
    except InexactValue:
        return {}
