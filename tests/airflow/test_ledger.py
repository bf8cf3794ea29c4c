"""The operators' ledger in PostgreSQL: a URL in ``send_options`` (its password from the
worker's environment, never from the template) or an Airflow connection (``ledger_conn_id``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

import churn_connector as cc
from churn_connector.airflow import SendEventsOperator
from churn_connector.airflow.hook import ledger_from_connection
from tests.airflow.conftest import (
    GOOD_KEY,
    Query,
    leaks,
    run_dag,
    use_connection,
    use_ledger_connection,
    xcom,
)
from tests.ledger.servers import PG_PASSWORD, PostgresServer


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def events_file(tmp_path: Path) -> str:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    pd.DataFrame(
        {
            "external_user_id": [f"user_{i % 3}" for i in range(8)],
            "event_type": "login",
            "occurred_at": [now - pd.Timedelta(hours=1, minutes=i) for i in range(8)],
        }
    ).to_parquet(tmp_path / "events.parquet")
    return str(tmp_path / "events.parquet")


def test_a_postgres_ledger_url_in_send_options_skips_a_rerun(
    sandbox: cc.Sandbox,
    events_file: str,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)  # the worker's environment
    conf = {"events": events_file, "ledger": postgres.url(postgres.fresh_schema(), password=False)}
    first = run_dag("churn_ledger_url", conf)
    assert first[0] == "success"
    second = run_dag("churn_ledger_url", conf)
    assert second[0] == "success"
    summary = xcom("churn_ledger_url", "send_events", second[2])
    assert (summary["counts"]["skipped"], summary["requests"]) == (8, 0)


def test_a_password_in_a_rendered_ledger_url_fails_the_task_and_is_not_stored(
    sandbox: cc.Sandbox,
    events_file: str,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    query: Query,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    use_ledger_connection(monkeypatch, postgres, postgres.fresh_schema())
    state, tasks, run_id = run_dag("churn_ledger_password", {"events": events_file})
    assert (state, tasks["send_events"]) == ("failed", ("failed", 1))  # no retry: it must change
    assert len(sandbox.requests_log()) == 0
    rendered = query(
        "SELECT rendered_fields FROM rendered_task_instance_fields WHERE run_id = ?", run_id
    )
    for (fields,) in rendered:
        assert leaks(str(fields).encode(), [PG_PASSWORD]) == []


def test_the_ledger_is_given_once_and_never_with_a_literal_password() -> None:
    with DAG("guards", schedule=None):
        with pytest.raises(TypeError, match="give the ledger once"):
            SendEventsOperator(
                task_id="both", source="x", ledger_conn_id="c", send_options={"ledger": "l.db"}
            )
        with pytest.raises(AirflowFailException, match="ledger_conn_id") as info:
            SendEventsOperator(
                task_id="literal",
                source="x",
                send_options={"ledger": f"postgresql://churn:{PG_PASSWORD}@db/ledger"},
            )
    assert PG_PASSWORD not in str(info.value)


def test_a_ledger_connection_gives_host_database_login_and_libpq_options(
    monkeypatch: pytest.MonkeyPatch, postgres: PostgresServer
) -> None:
    conn = {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "port": postgres.port,
        "schema": "ledger",
        "login": "churn",  # in the database's public schema
        "password": PG_PASSWORD,
        "extra": {"sslmode": "disable", "cursor": "dictcursor"},  # the provider's own: unused
    }
    monkeypatch.setenv("AIRFLOW_CONN_PG_LEDGER", json.dumps(conn))
    with ledger_from_connection("pg_ledger") as ledger:
        assert (
            ledger.location
            == f"postgresql://churn@127.0.0.1:{postgres.port}/ledger?sslmode=disable"
        )
        ledger.record("scope", "events", [("k", "d")])  # connected with the password
        assert ledger.known("scope", "events", ["k"]) == {"k": "d"}
    monkeypatch.setenv("AIRFLOW_CONN_NOT_PG", json.dumps({"conn_type": "http", "host": "x"}))
    with pytest.raises(cc.ConfigurationError, match="takes a PostgreSQL one"):
        ledger_from_connection("not_pg")
