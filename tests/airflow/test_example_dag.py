"""The example DAG (examples/airflow/churn_daily.py) runs as written, twice."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.airflow.conftest import (
    GOOD_KEY,
    Query,
    leaks,
    load_dag,
    run_dag,
    use_connection,
    use_ledger_connection,
    xcom,
)
from tests.ledger.servers import PG_PASSWORD, PostgresServer


def test_the_example_dag_delivers_a_day_and_its_postgres_ledger_skips_a_rerun(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    postgres: PostgresServer,
    capfd: pytest.CaptureFixture[str],
    query: Query,
) -> None:
    day = pd.Timestamp.now(tz="UTC").normalize()
    folder = tmp_path / "exports" / day.strftime("%Y-%m-%d")
    folder.mkdir(parents=True)
    pd.DataFrame(
        {
            "external_user_id": [f"user_{i % 5}" for i in range(10)],
            "event_type": "login",
            "occurred_at": [day - pd.Timedelta(hours=i + 1) for i in range(10)],
        }
    ).to_parquet(folder / "events.parquet")
    pd.DataFrame(
        {"external_user_id": ["user_0", "user_1"], "email": ["a@example.com", "b@example.com"]}
    ).to_parquet(folder / "users.parquet")
    conf = {"exports": str(tmp_path / "exports")}
    schema = postgres.fresh_schema()
    use_ledger_connection(monkeypatch, postgres, schema)

    for task in load_dag("churn_daily", "churn_daily").tasks:
        task.retries = 0  # fail here, rather than wait out the example's retry delays

    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        use_connection(monkeypatch, sb.base_url, GOOD_KEY)
        first = run_dag("churn_daily", conf, "churn_daily", logical_date=day.to_pydatetime())
        assert first[:2] == (
            "success",
            {
                "send_events": ("success", 1),
                "changed_users": ("success", 1),
                "identify": ("success", 1),
            },
        )
        assert (len(sb.events()), len(sb.users())) == (10, 2)
        requests = sb.stats()["requests"]
        # a re-run of the day (a cleared task, a manual trigger): the ledgers skip it all
        later = (day + pd.Timedelta(minutes=1)).to_pydatetime()
        second = run_dag("churn_daily", conf, "churn_daily", logical_date=later)
        assert second[0] == "success"
        assert sb.stats()["requests"] == requests
    events = xcom("churn_daily", "send_events", second[2])
    assert events["counts"]["skipped"] == 10 and events["requests"] == 0
    assert xcom("churn_daily", "identify", second[2])["counts"]["skipped"] == 2
    with cc.Ledger(postgres.url(schema)) as ledger:  # one ledger in PostgreSQL, both tasks'
        assert (ledger.count("events"), ledger.count("identities")) == (10, 2)
    assert json.dumps(events)  # a plain JSON summary
    # the ledger's password is the connection's: in no log, rendered field or XCom
    logs = "".join(capfd.readouterr()).encode()
    assert leaks(logs, [PG_PASSWORD]) == []
    for (table,) in query("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for row in query(f'SELECT * FROM "{table}"'):
            for value in row:
                blob = value if isinstance(value, bytes) else str(value).encode()
                assert leaks(blob, [PG_PASSWORD]) == [], table
