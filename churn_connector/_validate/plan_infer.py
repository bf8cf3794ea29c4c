"""A tracking plan drafted from an export's valid rows (``churn-connector plan infer``), so a
team starts from its data rather than a blank page.

Per event type (identities: one schema of ``traits``), each property's JSON types, as the
plan's checks see the values (a flat column's null omitted, JSON text's ``null`` kept);
``enum`` for a text property with at most ``max_enum`` distinct values; ``required`` for the
properties present and never null in every row of that event type; nested objects and
arrays' items likewise. Ranges (``minimum``, ``maxLength``, ...) and patterns are left to the
user: a sample's extremes are no rule. The export's own valid rows always pass the draft.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from .._core import Kind
from .._json import ValueRules
from .plan import TrackingPlan
from .plan_check import objects_of

__all__ = ["MAX_ENUM", "infer_plan"]

MAX_ENUM = 20
"""Text properties with at most this many distinct values get an ``enum``."""


def infer_plan(
    valid: pd.DataFrame, kind: Kind, rules: ValueRules, *, max_enum: int = MAX_ENUM
) -> TrackingPlan:
    """The draft plan of ``valid`` (rows that meet the contract) of ``kind``."""
    column = "traits" if kind == "identities" else "properties"
    objects = objects_of(valid, column, rules) if len(valid) else []
    if kind == "identities":
        return TrackingPlan(identities=_object_schema(objects, max_enum))
    types = valid["event_type"].astype(str).tolist() if len(valid) else []
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event_type, found in zip(types, objects, strict=True):
        by_type.setdefault(event_type, []).append(found)
    return TrackingPlan(
        events={name: _object_schema(by_type[name], max_enum) for name in sorted(by_type)}
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"  # what the wire writes as text (a timestamp, a decimal's text)


_ORDER = ("boolean", "integer", "number", "string", "array", "object", "null")


def _schema(values: list[Any], max_enum: int) -> dict[str, Any]:
    """The schema of the values one property takes (present ones, null among them)."""
    types = {_json_type(v) for v in values}
    if {"integer", "number"} <= types:
        types.discard("integer")  # JSON Schema's number holds its integers
    schema: dict[str, Any] = {}
    named = [t for t in _ORDER if t in types]
    schema["type"] = named[0] if len(named) == 1 else named
    strings = [v for v in values if isinstance(v, str)]
    if types <= {"string", "null"} and strings:
        distinct = sorted(set(strings))
        if len(distinct) <= max_enum:
            schema["enum"] = [*distinct, *([None] if "null" in types else [])]
    if "object" in types:
        nested = _object_schema([v for v in values if isinstance(v, dict)], max_enum)
        schema.update({k: v for k, v in nested.items() if k != "type"})
    if "array" in types:
        items = [item for v in values if isinstance(v, list | tuple) for item in v]
        if items:
            schema["items"] = _schema(items, max_enum)
    return schema


def _object_schema(objects: Iterable[dict[str, Any]], max_enum: int) -> dict[str, Any]:
    """An object's schema: each key's, and ``required`` for those always there, never null."""
    rows = list(objects)
    values: dict[str, list[Any]] = {}
    for found in rows:
        for key, value in found.items():
            values.setdefault(key, []).append(value)
    schema: dict[str, Any] = {"type": "object"}
    required = [
        key for key in sorted(values) if len(values[key]) == len(rows) and None not in values[key]
    ]
    if required:
        schema["required"] = required
    if values:
        schema["properties"] = {key: _schema(values[key], max_enum) for key in sorted(values)}
    return schema
