"""Tracking plans: every keyword of the supported JSON Schema subset on both sides of its
boundary, refused keywords named when the plan is loaded, unknown_events three ways, nested
objects and arrays, plans in JSON and YAML files, and the plan's failures in the report."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._validate.plan_rules import Found, Rules


def _failing(schema: dict[str, Any], values: list[Any]) -> dict[int, set[str]]:
    """Which of ``values`` break ``schema``: index -> the keywords they break."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    found: list[Found] = []
    Rules(schema).check(arr, np.arange(len(values)), found)
    out: dict[int, set[str]] = {}
    for f in found:
        for row in f.rows.tolist():
            out.setdefault(row, set()).add(f.keyword)
    return out


# (schema, values that pass, values that fail): each keyword at its boundary
CASES: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    "type string": ({"type": "string"}, ["", "x"], [1, None, True, [], {}]),
    "type integer": ({"type": "integer"}, [0, -3, 2.0, 10**30], [1.5, "1", True, None]),
    "type number": ({"type": "number"}, [0, 1.5, -2], ["1", True, None]),
    "type boolean": ({"type": "boolean"}, [True, False], [0, 1, "true", None]),
    "type null": ({"type": "null"}, [None], [0, "", False]),
    "type array": ({"type": "array"}, [[], [1]], [{}, "[]"]),
    "type object": ({"type": "object"}, [{}, {"a": 1}], [[], "{}"]),
    "type list": ({"type": ["string", "null"]}, ["a", None], [1, False]),
    "enum": ({"enum": ["usd", "eur", 1, None]}, ["usd", 1, 1.0, None], ["usd ", "USD", True, 2]),
    "enum nested": ({"enum": [[1, 2], {"a": True}]}, [[1, 2], {"a": True}], [[2, 1], {"a": 1}]),
    "const": ({"const": 0}, [0, 0.0], [False, "0", 1]),
    "minimum": ({"minimum": 0}, [0, 0.0, 5, "-1", True], [-1, -0.001]),
    "maximum": ({"maximum": 10}, [10, 9.99], [10.001, 11]),
    "exclusiveMinimum": ({"exclusiveMinimum": 0}, [0.001, 1], [0, -1]),
    "exclusiveMaximum": ({"exclusiveMaximum": 10}, [9.999], [10, 11]),
    "big integers exactly": ({"maximum": 2**53}, [2**53], [2**53 + 1]),
    "minLength": ({"minLength": 2}, ["ab", "é€", 5], ["a", ""]),
    "maxLength": ({"maxLength": 3}, ["abc", ""], ["abcd"]),
    "pattern": ({"pattern": "^[a-z]{3}$"}, ["usd", 7], ["usd ", "US", "usdx"]),
    "pattern unanchored": ({"pattern": "[0-9]"}, ["a1b"], ["abc"]),
    "format email": ({"format": "email"}, ["a@b.co", 3], ["a@b", "a b@c.de", "@b.co"]),
    "format date-time": (
        {"format": "date-time"},
        ["2026-11-20T09:30:00Z", "2024-02-29T23:59:60.5+01:00", 1],
        ["2026-11-20", "2026-02-30T00:00:00Z", "2026-11-20T24:00:00Z", "2026-11-20T09:30:00"],
    ),
    "minItems": ({"minItems": 1}, [[1], "x"], [[]]),
    "maxItems": ({"maxItems": 2}, [[1, 2]], [[1, 2, 3]]),
    "items": ({"items": {"type": "integer"}}, [[], [1, 2]], [[1, "2"], [None]]),
    "required": ({"required": ["a"]}, [{"a": None}, "not an object"], [{}, {"b": 1}]),
    "properties": (
        {"properties": {"a": {"type": "string"}}},
        [{}, {"a": "x"}, {"b": 1}],
        [{"a": 1}],
    ),
    "additionalProperties false": (
        {"properties": {"a": {}}, "additionalProperties": False},
        [{}, {"a": 1}],
        [{"b": 1}, {"a": 1, "c": 2}],
    ),
    "additionalProperties schema": (
        {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
        [{"a": "x", "b": 1}],
        [{"b": "x"}],
    ),
    "nested": (
        {
            "properties": {
                "lines": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["sku"],
                        "properties": {"price": {"type": "number", "minimum": 0}},
                    },
                }
            }
        },
        [{"lines": [{"sku": "a", "price": 1}]}, {"lines": []}],
        [{"lines": [{"sku": "a", "price": -1}]}, {"lines": [{"price": 1}]}],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_keyword_passes_and_fails_on_its_boundary(name: str) -> None:
    schema, good, bad = CASES[name]
    failing = _failing(schema, [*good, *bad])
    assert sorted(failing) == list(range(len(good), len(good) + len(bad)))


@pytest.mark.parametrize(
    "keyword",
    [
        "$ref",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "patternProperties",
        "multipleOf",
        "uniqueItems",
        "contains",
        "prefixItems",
        "dependentRequired",
        "minProperties",
    ],
)
def test_a_keyword_outside_the_subset_is_refused_by_name(keyword: str) -> None:
    schema = {"properties": {"amount": {"type": "number", keyword: 1}}}
    with pytest.raises(cc.PlanError) as caught:
        cc.TrackingPlan({"invoice_paid": schema})
    assert caught.value.keyword == keyword
    assert caught.value.where == "events.invoice_paid.properties.amount"
    assert repr(keyword) in str(caught.value)
    assert isinstance(caught.value, cc.ConfigurationError)


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"format": "uri"}, "format"),
        ({"type": "decimal"}, "type"),
        ({"minimum": True}, "minimum"),
        ({"minLength": -1}, "minLength"),
        ({"pattern": "("}, "pattern"),
        ({"items": [{"type": "string"}]}, "items"),
        ({"required": "amount"}, "required"),
        ({"enum": []}, "enum"),
    ],
)
def test_a_keyword_with_an_unusable_value_is_refused(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(cc.PlanError) as caught:
        cc.TrackingPlan({"signup": schema})
    assert caught.value.keyword == keyword


def test_annotations_are_accepted_and_assert_nothing() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "t",
        "description": "d",
        "examples": [1],
        "default": 0,
        "type": "object",
    }
    assert _failing(schema, [{}]) == {}


def test_a_plan_file_that_is_no_plan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"event": {}}))
    with pytest.raises(cc.PlanError, match="unknown key 'event'") as caught:
        cc.TrackingPlan.load(path)
    assert caught.value.path == str(path)
    with pytest.raises(cc.PlanError, match="unknown_events must be one of"):
        cc.TrackingPlan(unknown_events="ignore")  # type: ignore[arg-type]


def test_yaml_and_json_files_load_the_same_plan(tmp_path: Path) -> None:
    plan = {"events": {"signup": {"required": ["plan"]}}, "unknown_events": "warn"}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "plan.yaml").write_text(
        "events:\n  signup:\n    required: [plan]\nunknown_events: warn\n"
    )
    loaded = cc.TrackingPlan.load(tmp_path / "plan.yaml")
    assert loaded == cc.TrackingPlan.load(tmp_path / "plan.json")
    assert loaded.unknown_events == "warn"
    assert pickle.loads(pickle.dumps(loaded)) == loaded


def _events(now: pd.Timestamp, rows: list[tuple[str, dict[str, Any]]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(len(rows))],
            "event_type": [t for t, _ in rows],
            "occurred_at": [now - pd.Timedelta(seconds=i) for i in range(len(rows))],
            "properties": [json.dumps(p) for _, p in rows],
        }
    )


INVOICE = {
    "invoice_paid": {
        "type": "object",
        "required": ["amount", "currency", "plan"],
        "properties": {
            "amount": {"type": "number", "minimum": 0},
            "currency": {"type": "string", "pattern": "^[a-z]{3}$"},
        },
    }
}


def test_a_row_that_breaks_the_plan_is_invalid_with_row_column_rule_and_fix(
    now: pd.Timestamp,
) -> None:
    df = _events(
        now,
        [
            ("invoice_paid", {"amount": -40, "currency": "usd ", "plan": "pro"}),
            ("invoice_paid", {"amount": 40, "currency": "usd", "plan": "pro"}),
        ],
    )
    report = cc.validate_events(df, plan=cc.TrackingPlan(INVOICE))
    assert report.n_invalid == 1
    assert list(report.valid["properties"]) == [df["properties"][1]]
    failures = report.failures.set_index("check")
    minimum = failures.loc["plan.invoice_paid.amount.minimum"]
    assert minimum["row"] == 0
    assert minimum["column"] == "properties.amount"
    assert minimum["value"] == "-40"
    assert "plan: minimum 0" in minimum["message"]
    assert "fix the value, or the rule in the tracking plan" in minimum["message"]
    assert "plan.invoice_paid.currency.pattern" in failures.index
    assert "plan.invoice_paid.amount.minimum" in report.summary()


def test_flat_property_columns_are_checked_as_the_object_they_make(now: pd.Timestamp) -> None:
    df = _events(now, [("invoice_paid", {"currency": "usd", "plan": "pro"})] * 2)
    df["properties.amount"] = [5, -5]
    report = cc.validate_events(df, plan=cc.TrackingPlan(INVOICE))
    assert report.failures["check"].tolist() == ["plan.invoice_paid.amount.minimum"]
    assert report.failures["row"].tolist() == [1]


@pytest.mark.parametrize(
    ("unknown_events", "invalid", "noted"),
    [("allow", 0, False), ("warn", 0, True), ("refuse", 1, False)],
)
def test_unknown_events_are_allowed_noted_or_refused(
    now: pd.Timestamp, unknown_events: Any, invalid: int, *, noted: bool
) -> None:
    df = _events(
        now, [("invoice_paid", {"amount": 1, "currency": "usd", "plan": "p"}), ("page_viewed", {})]
    )
    plan = cc.TrackingPlan(INVOICE, unknown_events=unknown_events)
    report = cc.validate_events(df, plan=plan)
    assert report.n_invalid == invalid
    notes = [n for n in report.notes if n["kind"] == "plan_unknown_events"]
    assert bool(notes) is noted
    if noted:
        assert notes[0]["count"] == 1 and "'page_viewed' (1)" in notes[0]["message"]
    if invalid:
        assert report.failures["check"].tolist() == ["plan.unknown_event"]


def test_a_plans_traits_schema_checks_identities() -> None:
    df = pd.DataFrame(
        {"external_user_id": ["u1", "u2"], "traits": ['{"plan": "pro"}', '{"plan": "gold"}']}
    )
    plan = cc.TrackingPlan(identities={"properties": {"plan": {"enum": ["pro", "free"]}}})
    report = cc.validate_identities(df, plan=plan)
    assert report.failures["check"].tolist() == ["plan.traits.plan.enum"]
    assert report.failures["column"].tolist() == ["traits.plan"]


def test_a_row_invalid_by_the_contract_is_not_checked_against_the_plan(
    now: pd.Timestamp,
) -> None:
    df = _events(now, [("invoice_paid", {"amount": -1})])
    df["event_type"] = ["Invoice Paid"]
    report = cc.validate_events(df, plan=cc.TrackingPlan({"Invoice Paid": {"required": ["x"]}}))
    assert report.failures["check"].tolist() == ["event_type_pattern"]


def test_the_plan_is_a_path_too_and_a_bad_plan_fails_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"events": {"signup": {"oneOf": []}}}))
    with pytest.raises(cc.PlanError, match="'oneOf' is not in the supported subset"):
        cc.validate_events(tmp_path / "missing.csv", plan=str(path))


def test_warn_on_takes_a_plan_rule_a_family_or_a_pattern(now: pd.Timestamp) -> None:
    df = _events(now, [("invoice_paid", {"amount": -1, "currency": "usd", "plan": "p"})])
    report = cc.validate_events(df, plan=cc.TrackingPlan(INVOICE))
    for warn_on in (["plan.invoice_paid.amount.minimum"], ["plan.minimum"], ["plan.*"]):
        verdict = report.gate(warn_on=warn_on)
        assert (verdict.status, verdict.warned) == ("warn", 1), warn_on
    assert report.gate(warn_on=["plan.maximum"]).status == "fail"
    with pytest.raises(cc.ConfigurationError, match="no check's name"):
        report.gate(warn_on=["plan.invoice_paid.amount.minimun"])


def test_junit_has_a_failing_case_for_each_plan_rule_that_found_rows(now: pd.Timestamp) -> None:
    from churn_connector._validate.ci import junit_xml  # noqa: PLC0415

    df = _events(now, [("invoice_paid", {"amount": -1, "currency": "usd", "plan": "p"})])
    report = cc.validate_events(df, plan=cc.TrackingPlan(INVOICE))
    xml = junit_xml(report, report.gate())
    assert 'name="plan.invoice_paid.amount.minimum"' in xml
    assert 'type="plan.invoice_paid.amount.minimum"' in xml
    assert "plan.invoice_paid.currency.pattern" not in xml
