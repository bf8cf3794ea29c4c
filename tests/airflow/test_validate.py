"""The gate as an Airflow task: ValidateOperator in a real ``dag.test()`` run, and the
send operators' receipts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._validate.document import schema
from tests.airflow.conftest import GOOD_KEY, Query, leaks, run_dag, use_connection, xcom


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def export(tmp_path: Path) -> str:
    """Ten events, two with a bad event type (invalid: they count against the gate)."""
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = pd.DataFrame(
        {
            "external_user_id": [f"user_{i}" for i in range(10)],
            "event_type": ["Bad Type" if i < 2 else "login" for i in range(10)],
            "occurred_at": [now - pd.Timedelta(minutes=i) for i in range(10)],
        }
    )
    path = tmp_path / "events.csv"
    events.to_csv(path, index=False)
    return str(path)


def test_a_gate_within_its_threshold_passes_and_the_send_runs(
    sandbox: cc.Sandbox, export: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("CHURN_RESULTS_BASE", str(tmp_path / "results"))
    state, tasks, run_id = run_dag("churn_gate", {"events": export, "max_invalid": "20%"})
    assert state == "success"
    assert tasks["validate_events"] == ("success", 1)
    summary = xcom("churn_gate", "validate_events", run_id)
    assert summary["verdict"]["status"] == "warn"
    assert summary["counts"] == {"rows": 10, "valid": 8, "invalid": 2, "duplicates": 0}
    assert summary["checks"][0]["check"] == "event_type_pattern"
    assert "Bad Type" not in json.dumps(summary)  # no row's values in Airflow's database
    report = json.loads(Path(summary["files"]["json"]).read_text())
    jsonschema.validate(report, schema(), cls=jsonschema.Draft202012Validator)
    assert Path(summary["files"]["junit"]).is_file()
    quarantine = pd.read_parquet(summary["files"]["quarantine"])
    assert list(quarantine["row"]) == [2, 3]  # the file's lines
    # the reports sit beside the send's result files, and the send left its receipt
    sent = xcom("churn_gate", "send_events", run_id)
    receipt = json.loads(Path(sent["files"]["receipts"]).read_text())
    assert Path(sent["files"]["receipts"]).parent == Path(sent["files"]["rows"]).parent
    assert receipt["counts"]["sent"] == 8 and receipt["exit_code"] == 1
    assert receipt["airflow"]["task_id"] == "send_events"
    assert len(sandbox.events()) == 8


def test_a_gate_above_its_threshold_fails_without_retrying_and_nothing_is_sent(
    sandbox: cc.Sandbox,
    export: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    query: Query,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("CHURN_RESULTS_BASE", str(tmp_path / "results"))
    state, tasks, run_id = run_dag("churn_gate", {"events": export, "max_invalid": "1"})
    assert state == "failed"
    assert tasks["validate_events"] == ("failed", 1)  # retries=2, yet one try
    assert tasks["send_events"][0] == "upstream_failed"
    summary = xcom("churn_gate", "validate_events", run_id, key="churn_summary")
    assert summary["verdict"]["status"] == "fail"
    assert summary["verdict"]["reasons"] == [
        "2 invalid rows (20% of 10 rows): the gate fails on more than 1"
    ]
    assert len(sandbox.events()) == 0
    everything = b"".join(
        str(row).encode() for row in query("SELECT value FROM xcom WHERE run_id = ?", run_id)
    )
    assert leaks(everything) == []
