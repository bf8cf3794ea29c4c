"""The operators' guards, without running a DAG."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pytest
from airflow.sdk import DAG, Context
from airflow.sdk.exceptions import AirflowFailException

from churn_connector.airflow import ChurnSendKilled, IdentifyOperator, SendEventsOperator
from churn_connector.airflow.operators import DEFAULT_RESULTS_DIR


def test_a_table_in_dag_code_is_refused() -> None:
    with DAG("guards", schedule=None), pytest.raises(TypeError, match="upstream task's output"):
        SendEventsOperator(task_id="t", source=cast(Any, pd.DataFrame({"a": [1]})))


def test_paths_and_lists_of_paths_are_template_fields(tmp_path: Path) -> None:
    with DAG("guards", schedule=None):
        one = SendEventsOperator(task_id="one", source=tmp_path / "events.parquet")
        parts = IdentifyOperator(task_id="parts", source=["a.parquet", "b.parquet"])
    assert one.source == tmp_path / "events.parquet" and parts.source == ["a.parquet", "b.parquet"]
    assert "source" in SendEventsOperator.template_fields
    assert "results_dir" in SendEventsOperator.template_fields
    assert one.results_dir == DEFAULT_RESULTS_DIR


def test_a_template_that_renders_a_table_fails_before_it_is_stored() -> None:
    with DAG("guards", schedule=None, render_template_as_native_obj=True) as dag:
        op = SendEventsOperator(task_id="t", source="{{ frame }}", results_dir=None)
    context = cast(Context, {"frame": pd.DataFrame({"email": ["a@example.com"]})})
    with pytest.raises(AirflowFailException, match="source rendered to a DataFrame"):
        op.render_template_fields(context, dag.get_template_env())
    assert op.source is None  # nothing of the frame is left to store


def test_send_options_are_the_sends_declared_keywords_read_from_rendered_text() -> None:
    rendered = {
        "dry_run": "false",  # a template renders text: read as the keyword's type
        "batch_size": "100",
        "rename": '{"USER": "external_user_id"}',
        "namespace": " shop ",  # a str keyword keeps its text as written
        "null": "\\N",  # str or a list of str: kept as written too
    }
    with DAG("guards", schedule=None):
        events = SendEventsOperator(task_id="e", source="x.csv", send_options=rendered)
        typo = SendEventsOperator(task_id="t", source="x.csv", send_options={"namespce": "x"})
        other = IdentifyOperator(task_id="i", source="x.csv", send_options={"namespace": "x"})
        bad = SendEventsOperator(task_id="b", source="x.csv", send_options={"dry_run": "maybe"})
    assert events._send_options() == {
        "dry_run": False,
        "batch_size": 100,
        "rename": {"USER": "external_user_id"},
        "namespace": " shop ",
        "null": "\\N",
    }
    with pytest.raises(AirflowFailException, match=r"unknown send_options \['namespce'\]"):
        typo._send_options()
    with pytest.raises(AirflowFailException, match=r"identities: unknown send_options"):
        other._send_options()
    with pytest.raises(AirflowFailException, match="'dry_run': cannot read 'maybe'"):
        bad._send_options()


def test_on_kill_stops_only_a_send_in_progress_in_its_thread() -> None:
    with DAG("guards", schedule=None):
        op = SendEventsOperator(task_id="t", source="x.parquet")
    op.on_kill()  # not sending (e.g. after an execution timeout): nothing happens
    op._sending, op._main_thread = True, -1
    op.on_kill()  # another thread's send: not ours to interrupt here
    op._main_thread = threading.get_ident()
    with pytest.raises(ChurnSendKilled):
        op.on_kill()
    assert not op._sending


def test_the_results_base_is_the_argument_the_environment_or_airflow_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with DAG("guards", schedule=None):
        op = SendEventsOperator(task_id="t", source="x.parquet")
        given = SendEventsOperator(task_id="g", source="x.parquet", results_base="/r")
    monkeypatch.setenv("AIRFLOW_HOME", "/home/af")
    monkeypatch.delenv("CHURN_RESULTS_BASE", raising=False)
    assert op.results_base == "/home/af/churn_results"
    monkeypatch.setenv("CHURN_RESULTS_BASE", "/shared/churn")
    assert (op.results_base, given.results_base) == ("/shared/churn", "/r")


def test_the_run_history_and_alerts_are_send_options() -> None:
    rendered = {
        "history": "postgresql://churn@db.internal/ops",
        "alert_webhook": "https://hooks.example.com/services/T0",
        "alert_invalid": "0.5%",
    }
    with DAG("operate", schedule=None):
        events = SendEventsOperator(task_id="e", source="x.csv", send_options=rendered)
        users = IdentifyOperator(task_id="i", source="x.csv", send_options=rendered)
    assert events._send_options() == rendered
    assert users._send_options() == rendered
