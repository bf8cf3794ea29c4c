"""Lineage and assets in real Airflow: OpenLineage's provider with its file transport, and a
DAG scheduled on the send's outlet asset, created by the scheduler's own code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from tests.airflow.conftest import (
    BAD_KEY,
    GOOD_KEY,
    OPENLINEAGE_FILE,
    Query,
    create_asset_triggered_runs,
    leaks,
    openlineage_events,
    run_dag,
    unpause,
    use_connection,
)

USERS = ["user_0", "user_1", "user_2"]
EMAILS = ["lineage-a@example.com", "lineage-b@example.com", "lineage-c@example.com"]


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = pd.DataFrame(
        {
            "external_user_id": [USERS[i % 3] for i in range(8)] + ["", ""],  # 2 invalid
            "event_type": ["login"] * 10,
            "occurred_at": [now - pd.Timedelta(minutes=i) for i in range(10)],
        }
    )
    users = pd.DataFrame({"external_user_id": USERS, "email": EMAILS})
    events.to_parquet(tmp_path / "events.parquet")
    users.to_parquet(tmp_path / "users.parquet")
    OPENLINEAGE_FILE.unlink(missing_ok=True)
    return {
        "events": str(tmp_path / "events.parquet"),
        "users": str(tmp_path / "users.parquet"),
        "ledger": "",
    }


def _task_event(task_id: str, event_type: str, dag_id: str = "churn_send") -> dict[str, Any]:
    found = [
        e
        for e in openlineage_events()
        if e["eventType"] == event_type and e["job"]["name"] == f"{dag_id}.{task_id}"
    ]
    assert len(found) == 1, [(e["eventType"], e["job"]["name"]) for e in openlineage_events()]
    return found[0]


def test_a_send_reports_its_input_output_and_counts_to_openlineage(
    sandbox: cc.Sandbox, inputs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    state, _, _ = run_dag("churn_send", inputs)
    assert state == "success"

    send = _task_event("send_events", "COMPLETE")
    [source] = send["inputs"]
    assert (source["namespace"], source["name"]) == ("file", inputs["events"])
    assert source["inputFacets"]["dataQualityMetrics"]["rowCount"] == 10
    [contract] = source["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert contract["assertion"] == "churn_api_contract"
    assert (contract["success"], contract["actual"], contract["severity"]) == (False, "2", "warn")
    [api] = send["outputs"]
    assert (api["namespace"], api["name"]) == (sandbox.base_url, "events")
    assert api["outputFacets"]["outputStatistics"]["rowCount"] == 8
    churn = send["run"]["facets"]["churn"]
    assert churn["counts"]["sent"] == 8 and churn["counts"]["invalid"] == 2
    assert (churn["rows"], churn["requests"], churn["dry_run"]) == (10, 2, False)  # 4 a request

    # an upstream task's DataFrame: the upstream task is the input
    identify = _task_event("identify", "COMPLETE")
    assert [(d["namespace"], d["name"]) for d in identify["inputs"]] == [
        ("airflow-xcom://churn_send", "load_users")
    ]
    assert [(d["namespace"], d["name"]) for d in identify["outputs"]] == [
        (sandbox.base_url, "identities")
    ]
    assert identify["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3

    emitted = OPENLINEAGE_FILE.read_bytes()
    assert leaks(emitted) == []
    assert not any(email.encode() in emitted for email in EMAILS)  # no row data


def test_a_failed_send_still_reports_where_it_read_and_what_it_counted(
    sandbox: cc.Sandbox, inputs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_connection(monkeypatch, sandbox.base_url, BAD_KEY)
    state, tis, _ = run_dag("churn_send", inputs)
    assert state == "failed" and tis["send_events"][0] == "failed"

    failed = _task_event("send_events", "FAIL")
    assert [(d["namespace"], d["name"]) for d in failed["inputs"]] == [("file", inputs["events"])]
    assert [(d["namespace"], d["name"]) for d in failed["outputs"]] == [
        (sandbox.base_url, "events")
    ]
    assert failed["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 0
    assert failed["run"]["facets"]["churn"]["counts"]["sent"] == 0
    assert leaks(OPENLINEAGE_FILE.read_bytes()) == []


def test_a_gate_that_fails_reports_its_input_with_the_rows_each_check_refused(
    sandbox: cc.Sandbox, inputs: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    state, tis, _ = run_dag("churn_gate", {"events": inputs["events"], "max_invalid": "1"})
    assert state == "failed" and tis["validate_events"][0] == "failed"

    failed = _task_event("validate_events", "FAIL", dag_id="churn_gate")
    assert failed["outputs"] == []  # a gate sends nothing
    [source] = failed["inputs"]
    assert (source["namespace"], source["name"]) == ("file", inputs["events"])
    assertions = source["inputFacets"]["dataQualityAssertions"]["assertions"]
    found = {a["assertion"]: (a["success"], a["actual"], a["severity"]) for a in assertions}
    assert found["churn_api_contract"] == (False, "2", "error")
    assert found["external_user_id_not_blank"] == (False, "2", "error")
    assert leaks(OPENLINEAGE_FILE.read_bytes()) == []


def test_a_dag_scheduled_on_the_outlet_asset_runs_after_a_delivery_with_its_counts(
    sandbox: cc.Sandbox, inputs: dict[str, str], monkeypatch: pytest.MonkeyPatch, query: Query
) -> None:
    from airflow.sdk import Asset  # noqa: PLC0415
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime  # noqa: PLC0415

    # the provider registers the scheme: Airflow checks churn:// URIs with our handler
    handlers = ProvidersManagerTaskRuntime().asset_uri_handlers  # type: ignore[no-untyped-call]
    assert "churn" in handlers
    with pytest.raises(ValueError, match="ends in one of"):
        Asset("churn://churn_default/orders")

    unpause("churn_on_events")
    before = query("SELECT count(*) FROM dag_run WHERE dag_id = 'churn_on_events'")[0][0]
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    assert run_dag("churn_send", inputs)[0] == "success"
    create_asset_triggered_runs()

    runs = query(
        "SELECT run_id, run_type FROM dag_run WHERE dag_id = 'churn_on_events' ORDER BY id"
    )
    assert len(runs) == before + 1 and runs[-1][1] == "asset_triggered"
    # the run consumed the asset's events since its last run: the newest is this delivery's
    (extra,) = query(
        "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
        "JOIN dagrun_asset_event d ON d.event_id = e.id JOIN dag_run r ON r.id = d.dag_run_id "
        "WHERE a.uri = 'churn://churn_default/events' AND r.run_id = ? ORDER BY e.id DESC",
        runs[-1][0],
    )[0]
    assert json.loads(extra) == {
        "kind": "events",
        "rows": 10,
        "counts": {
            "sent": 8,
            "invalid": 2,
            "rejected": 0,
            "failed": 0,
            "skipped": 0,
            "expired": 0,
            "held": 0,
        },
        "requests": 2,
        "dry_run": False,
    }


@pytest.mark.parametrize(
    ("source", "datasets"),
    [
        ("/exports/day/events.parquet", [("file", "/exports/day/events.parquet")]),
        ("s3://bucket/exports/day/", [("s3://bucket", "exports/day/")]),
        ("file:///exports/e.csv", [("file", "/exports/e.csv")]),
        (
            ["gs://b/a.parquet", "gs://b/c.parquet"],
            [("gs://b", "a.parquet"), ("gs://b", "c.parquet")],
        ),
    ],
)
def test_inputs_are_named_by_openlineage_conventions(
    source: object, datasets: list[tuple[str, str]]
) -> None:
    from churn_connector.airflow.lineage import input_datasets  # noqa: PLC0415

    assert input_datasets(source, None) == datasets


def test_the_output_namespace_is_the_base_url_without_credentials() -> None:
    from churn_connector.airflow.lineage import api_namespace  # noqa: PLC0415

    assert api_namespace("https://user:pw@api.example.com:8443/v2/") == (
        "https://api.example.com:8443/v2"
    )


def test_an_upstream_output_is_the_upstream_tasks_outlets_when_it_declares_them() -> None:
    from churn_connector.airflow.lineage import input_datasets  # noqa: PLC0415

    upstream = ("d", "extract", ["s3://lake/users/"])
    assert input_datasets(None, upstream) == [("s3://lake", "users/")]
    assert input_datasets(None, ("d", "extract", [])) == [("airflow-xcom://d", "extract")]


def test_a_gate_that_sends_nothing_reports_its_input_and_its_invalid_rows_only() -> None:
    from churn_connector.airflow.lineage import operator_lineage  # noqa: PLC0415

    summary = {"kind": "events", "counts": {"rows": 5, "valid": 4, "invalid": 1}}
    found = operator_lineage(
        inputs=[("file", "/e.csv")],
        output=None,
        summary=summary,
        checks={"occurred_at_parses": 1},
        severity="error",
    )
    assert found.outputs == [] and found.run_facets == {}
    facets = found.inputs[0].inputFacets
    assert facets is not None and facets["dataQualityMetrics"].rowCount == 5
    assertions = facets["dataQualityAssertions"].assertions
    assert [(a.assertion, a.success, a.actual) for a in assertions] == [
        ("churn_api_contract", False, "1"),
        ("occurred_at_parses", False, "1"),
    ]
