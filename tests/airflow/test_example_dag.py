"""The example DAG (examples/airflow/churn_daily.py) runs as written, twice."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.airflow.conftest import GOOD_KEY, load_dag, run_dag, use_connection, xcom


def test_the_example_dag_delivers_a_day_and_its_ledgers_skip_a_rerun(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
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
    conf = {"exports": str(tmp_path / "exports"), "state": str(tmp_path / "state")}

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
    for task in ("send_events", "identify"):  # one ledger per task, on the state volume
        ledger = tmp_path / "state" / "churn_daily" / f"{task}.sqlite"
        with sqlite3.connect(ledger) as db:
            assert db.execute("SELECT count(*) FROM acknowledged").fetchone()[0] > 0
    assert json.dumps(events)  # a plain JSON summary
