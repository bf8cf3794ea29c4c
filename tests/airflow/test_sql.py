"""``sql=`` / ``conn_id=`` / ``cursor=`` on the operators: a query read through the user's
own Airflow connection (PostgreSQL, its password only in the connection), its cursor bounded
by each DAG run's data interval when there is no ledger."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pendulum
import pytest

import churn_connector as cc
from churn_connector.airflow import SendEventsOperator
from tests.airflow.conftest import (
    GOOD_KEY,
    OPENLINEAGE_FILE,
    Query,
    leaks,
    openlineage_events,
    run_dag,
    use_connection,
    xcom,
)
from tests.ledger.servers import PG_PASSWORD, PG_USER, PostgresServer

DAG_ID = "churn_sql_interval"


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def base() -> pendulum.DateTime:
    """The first interval's start: a whole hour, hours in the past."""
    hour = pendulum.now("UTC").start_of("hour")
    return hour.subtract(hours=5)


@pytest.fixture
def table(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch, base: pendulum.DateTime
) -> str:
    """``<schema>.events``: a row every 10 minutes from 1 h before ``base`` to 3 h after,
    loaded_at = ts; the churn_source connection (type postgres) holds the password."""
    import psycopg  # noqa: PLC0415 - the tests' PostgreSQL client

    schema = postgres.fresh_schema()
    stamps = [base.subtract(hours=1).add(minutes=10 * i) for i in range(24)]
    with psycopg.connect(postgres.url(schema), autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {schema}.events (uid TEXT, ts TIMESTAMPTZ, loaded_at TIMESTAMPTZ)"
        )
        conn.cursor().executemany(
            f"INSERT INTO {schema}.events VALUES (%s, %s, %s)",
            [(f"user_{i}", s, s) for i, s in enumerate(stamps)],
        )
    connection = {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "port": postgres.port,
        "schema": "ledger",
        "login": PG_USER,
        "password": PG_PASSWORD,
    }
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_SOURCE", json.dumps(connection))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    return f"{schema}.events"


def _interval(query: Query, run_id: str) -> tuple[pd.Timestamp, pd.Timestamp]:
    ((start, end),) = query(
        "SELECT data_interval_start, data_interval_end FROM dag_run WHERE run_id = ?", run_id
    )
    # the metadata DB (SQLite) keeps them in UTC, without an offset
    return pd.Timestamp(start).tz_localize("UTC"), pd.Timestamp(end).tz_localize("UTC")


def _expected(base: pendulum.DateTime, start: pd.Timestamp, end: pd.Timestamp) -> set[str]:
    first = pd.Timestamp(base.subtract(hours=1))
    stamps = [first + pd.Timedelta(minutes=10 * i) for i in range(24)]
    return {f"user_{i}" for i, s in enumerate(stamps) if start <= s < end}


def test_each_dag_run_sends_exactly_the_rows_of_its_data_interval(
    sandbox: cc.Sandbox,
    table: str,
    base: pendulum.DateTime,
    monkeypatch: pytest.MonkeyPatch,
    query: Query,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    sent: set[str] = set()
    for hour in (1, 2):  # two consecutive hourly intervals
        state, tasks, run_id = run_dag(DAG_ID, {"table": table}, logical_date=base.add(hours=hour))
        assert (state, tasks["send_events"][0]) == ("success", "success")
        start, end = _interval(query, run_id)
        assert end - start == pd.Timedelta(hours=1)
        expected = _expected(base, start, end)
        assert len(expected) == 6
        summary = xcom(DAG_ID, "send_events", run_id)
        assert (summary["rows"], summary["counts"]["sent"]) == (6, 6)
        stored = set(sandbox.events()["external_user_id"])
        assert stored - sent == expected
        sent = stored
    assert len(sandbox.events()) == 12  # no row of the two hours twice, none outside


def test_identities_from_a_query_are_bounded_by_the_interval_too(
    sandbox: cc.Sandbox,
    table: str,
    base: pendulum.DateTime,
    monkeypatch: pytest.MonkeyPatch,
    query: Query,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    _, tasks, run_id = run_dag(DAG_ID, {"table": table}, logical_date=base.add(hours=1))
    assert tasks["identify"][0] == "success"
    start, end = _interval(query, run_id)
    summary = xcom(DAG_ID, "identify", run_id)
    assert summary["counts"]["sent"] == len(_expected(base, start, end)) == 6


def test_the_connection_password_is_in_no_rendered_field_xcom_or_lineage(
    sandbox: cc.Sandbox,
    table: str,
    base: pendulum.DateTime,
    monkeypatch: pytest.MonkeyPatch,
    query: Query,
    capfd: pytest.CaptureFixture[str],
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    state, _, run_id = run_dag(DAG_ID, {"table": table}, logical_date=base.add(hours=2))
    assert state == "success"
    stored = query(
        "SELECT rendered_fields FROM rendered_task_instance_fields WHERE run_id = ?", run_id
    )
    xcoms = query("SELECT value FROM xcom WHERE run_id = ?", run_id)
    blob = json.dumps([str(r) for r in stored + xcoms]).encode()
    assert table in blob.decode()  # the rendered query is stored: the check looks at it
    out, err = capfd.readouterr()
    lineage = OPENLINEAGE_FILE.read_bytes() if OPENLINEAGE_FILE.exists() else b""
    assert leaks(blob + out.encode() + err.encode() + lineage, [PG_PASSWORD]) == []


def test_lineage_names_the_table_the_query_reads(
    sandbox: cc.Sandbox,
    table: str,
    base: pendulum.DateTime,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    state, _, _ = run_dag(DAG_ID, {"table": table}, logical_date=base.add(hours=1))
    assert state == "success"
    done = [
        e
        for e in openlineage_events()
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == f"{DAG_ID}.send_events"
    ]  # the last: this test's run (the file holds the session's events)
    inputs = {(i["namespace"], i["name"]) for i in done[-1]["inputs"]}
    assert inputs == {(f"postgres://127.0.0.1:{postgres.port}", f"ledger.{table}")}


def test_sql_needs_its_connection_and_is_the_only_input() -> None:
    with pytest.raises(TypeError, match="conn_id"):
        SendEventsOperator(task_id="t", sql="SELECT 1")
    with pytest.raises(TypeError, match="one input"):
        SendEventsOperator(task_id="t", source="x.parquet", sql="SELECT 1", conn_id="c")


def test_with_a_ledger_each_run_reads_the_rows_past_the_watermark_of_a_sqlite_connection(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    path = tmp_path / "source.sqlite"
    now = pd.Timestamp.now(tz="UTC").floor("s") - pd.Timedelta(hours=1)

    def add(start: int, stop: int) -> None:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER, uid TEXT, ts TEXT)")
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?)",
                [
                    (i, f"user_{i}", (now + pd.Timedelta(seconds=i)).isoformat())
                    for i in range(start, stop)
                ],
            )

    monkeypatch.setenv(
        "AIRFLOW_CONN_CHURN_SOURCE", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    conf = {"ledger": str(tmp_path / "ledger.sqlite")}
    add(0, 5)
    first = run_dag("churn_sql_ledger", conf)
    add(5, 8)
    second = run_dag("churn_sql_ledger", conf)
    assert (first[0], second[0]) == ("success", "success")
    counts = [xcom("churn_sql_ledger", "send_events", r[2])["rows"] for r in (first, second)]
    assert counts == [5, 3]
    assert sorted(sandbox.events()["external_user_id"]) == sorted(f"user_{i}" for i in range(8))


def test_a_cursor_without_a_ledger_or_a_data_interval_fails_the_task_without_a_retry(
    sandbox: cc.Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    path = tmp_path / "source.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE events (id INTEGER, uid TEXT, ts TEXT)")
    monkeypatch.setenv(
        "AIRFLOW_CONN_CHURN_SOURCE", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    state, tasks, _ = run_dag("churn_sql_no_interval", {})
    assert (state, tasks["send_events"]) == ("failed", ("failed", 1))  # retries=1: not used
    out, err = capfd.readouterr()  # the task's log: dag.test() runs it in this process
    assert "bounded by the DAG run's data interval, and this run has none" in out + err
    assert len(sandbox.requests_log()) == 0
