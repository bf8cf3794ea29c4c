"""A tracking plan on the Airflow operators, in real ``dag.test()`` runs over HTTP to the
sandbox: the gate's ``plan=`` (a templated path, read on the worker) fails on a row that
breaks it; the send's ``plan=`` (a plan in the DAG code) never sends such a row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector.airflow import SendEventsOperator, ValidateOperator
from tests.airflow.conftest import GOOD_KEY, run_dag, use_connection, xcom


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def conf(tmp_path: Path) -> dict[str, str]:
    """Four invoices, one with a negative amount (it breaks the plan, not the contract)."""
    at = (pd.Timestamp.now(tz="UTC") - pd.Timedelta(hours=1)).floor("s").isoformat()
    events = tmp_path / "events.csv"
    pd.DataFrame(
        {
            "external_user_id": [f"user_{i}" for i in range(4)],
            "event_type": ["invoice_paid"] * 4,
            "occurred_at": [at] * 4,
            "properties": [json.dumps({"amount": -40 if i == 0 else 40}) for i in range(4)],
        }
    ).to_csv(events, index=False)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "events": {
                    "invoice_paid": {"properties": {"amount": {"type": "number", "minimum": 0}}}
                }
            }
        )
    )
    return {"events": str(events), "plan": str(plan)}


def test_a_row_breaking_the_plan_fails_the_gate_and_nothing_is_sent(
    sandbox: cc.Sandbox, conf: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("CHURN_RESULTS_BASE", str(tmp_path / "results"))
    state, tasks, run_id = run_dag("churn_plan", conf)
    assert state == "failed"
    assert tasks["validate_events"] == ("failed", 1)  # the data must change, not the try
    assert tasks["send_events"][0] == "upstream_failed"
    summary = xcom("churn_plan", "validate_events", run_id, key="churn_summary")
    assert summary["counts"]["invalid"] == 1
    assert [c["check"] for c in summary["checks"]] == ["plan.invoice_paid.amount.minimum"]
    assert len(sandbox.events()) == 0


def test_the_send_operators_plan_keeps_a_breaking_row_from_the_api(
    sandbox: cc.Sandbox, conf: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("CHURN_RESULTS_BASE", str(tmp_path / "results"))
    state, _, run_id = run_dag("churn_plan", {**conf, "max_invalid": "1"})
    assert state == "success"
    sent = xcom("churn_plan", "send_events", run_id)
    assert sent["counts"]["invalid"] == 1 and sent["counts"]["sent"] == 3
    stored = sandbox.events()
    assert len(stored) == 3
    assert sorted(stored["external_user_id"]) == ["user_1", "user_2", "user_3"]


def test_a_plan_in_dag_code_is_checked_when_the_dag_is_parsed_and_kept_as_its_mapping() -> None:
    with pytest.raises(cc.PlanError, match="'oneOf'"):
        SendEventsOperator(task_id="s", source="x.csv", plan={"events": {"e": {"oneOf": []}}})
    op = ValidateOperator(task_id="v", source="x.csv", plan=cc.TrackingPlan(events={"e": {}}))
    assert op.plan is None and op.plan_document == {"events": {"e": {}}, "unknown_events": "allow"}
    json.dumps(op.plan_document)  # what Airflow can serialise with the DAG


def test_the_plan_is_given_once() -> None:
    with pytest.raises(TypeError, match="once"):
        SendEventsOperator(
            task_id="s", source="x.csv", plan="p.yaml", send_options={"plan": "q.yaml"}
        )
    with pytest.raises(TypeError, match="once"):
        ValidateOperator(
            task_id="v", source="x.csv", plan="p.yaml", validate_options={"plan": "q.yaml"}
        )


def test_the_gate_fails_a_stale_export_by_its_named_freshness_gate(
    sandbox: cc.Sandbox, conf: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("CHURN_RESULTS_BASE", str(tmp_path / "results"))
    # the newest valid event is an hour old: within 2h, not within 30m
    state, _, run_id = run_dag("churn_plan", {**conf, "max_invalid": "1", "max_lag": "30m"})
    assert state == "failed"
    summary = xcom("churn_plan", "validate_events", run_id, key="churn_summary")
    [gate] = summary["verdict"]["gates"]
    assert (gate["gate"], gate["status"]) == ("max_lag", "fail")
    assert len(sandbox.events()) == 0
