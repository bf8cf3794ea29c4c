"""The plan's checks against the reference implementation: for generated schemas within the
supported subset and generated values, a value passes our compiled checks exactly when
``jsonschema`` (draft 2020-12) says it is valid."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from churn_connector._json import ValueRules
from churn_connector._validate.plan import TrackingPlan
from churn_connector._validate.plan_check import plan_failures
from churn_connector._validate.plan_rules import Found

KEYS = st.sampled_from(["a", "b", "c"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.integers(-(2**60), 2**60),
    st.floats(-6, 6, allow_nan=False).map(lambda f: round(f, 1)),
    st.text(alphabet="ab1 ", max_size=4),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
NUMBER = st.integers(-4, 4) | st.floats(-4, 4, allow_nan=False).map(lambda f: round(f, 1))
TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])


def _keywords(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True),
            "enum": st.lists(SCALARS, min_size=1, max_size=3),
            "const": SCALARS,
            "minimum": NUMBER,
            "maximum": NUMBER,
            "exclusiveMinimum": NUMBER,
            "exclusiveMaximum": NUMBER,
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "pattern": st.sampled_from(["a", "^a", "b$", "^[ab]+$", "[0-9]"]),
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 2),
            "required": st.lists(KEYS, max_size=2, unique=True),
            "properties": st.dictionaries(KEYS, inner, max_size=2),
            "additionalProperties": st.booleans() | inner,
            "items": inner,
        },
    )


SCHEMAS: st.SearchStrategy[dict[str, Any]] = st.recursive(st.just({}), _keywords, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(SCHEMAS, st.lists(VALUES, min_size=1, max_size=6))
def test_a_value_passes_exactly_when_jsonschema_says_it_is_valid(
    schema: dict[str, Any], values: list[Any]
) -> None:
    plan = TrackingPlan({"e": schema})
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    found: list[Found] = []
    rules = plan.rules_for("e")
    assert rules is not None
    rules.check(arr, np.arange(len(values)), found)
    failing = {int(r) for f in found for r in f.rows}
    reference = jsonschema.Draft202012Validator(schema)
    expected = {i for i, v in enumerate(values) if not reference.is_valid(v)}
    assert failing == expected


FLAT = st.dictionaries(
    KEYS,
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.integers(-(2**70), 2**70),  # beyond 64 bits too: the exact path must take those
        st.floats(-6, 6, allow_nan=False).map(lambda f: round(f, 1)),
        st.text(alphabet="ab1 {[", max_size=4),
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(SCHEMAS, st.lists(FLAT, min_size=1, max_size=8))
def test_json_text_rows_fail_exactly_when_jsonschema_rejects_their_properties(
    schema: dict[str, Any], objects: list[dict[str, Any]]
) -> None:
    # a CSV's JSON-text properties: flat ones are read column-wise by Arrow's JSON reader,
    # the rest object by object; either way the verdict is jsonschema's
    plan = TrackingPlan({"e": schema})
    frame = pd.DataFrame(
        {
            "event_type": ["e"] * len(objects),
            "properties": pd.array([json.dumps(o) for o in objects], dtype="string[pyarrow]"),
        }
    )
    found = plan_failures(
        plan, "events", frame, np.arange(len(objects)), ValueRules(), 0, frame.index
    )
    reference = jsonschema.Draft202012Validator(schema)
    expected = {i for i, o in enumerate(objects) if not reference.is_valid(o)}
    assert set(found.invalid.tolist()) == expected
