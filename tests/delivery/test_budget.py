"""The shared request budget: one rate and one 429 pause for every process given the same
``budget`` (a token bucket in PostgreSQL), against a receiver that answers 429 above its
rate (benchmarks/ratelimited.py, in a process of its own)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._delivery.budget import SharedBudget, budget_of
from tests.conftest import MakeEvents
from tests.ledger.servers import PG_PASSWORD, PostgresServer

# the benchmarks' receiver, shared with make bench
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
ratelimited: Any = importlib.import_module("ratelimited")

pytestmark = pytest.mark.e2e

KEY = "sk_test_budget_0123456789abcdef"


@pytest.fixture
def budget_url(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A budget's URL (a fresh schema), its password in PGPASSWORD, as users give it."""
    if not postgres.running():
        postgres.start()
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    return postgres.url(postgres.fresh_schema(), password=False)


def _workers(tmp_path: Path, budget: str | None) -> dict[str, Any]:
    env = {
        **os.environ,
        "CHURN_API_KEY": KEY,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    cli = [sys.executable, "-m", "churn_connector._cli"]
    measured: dict[str, Any] = ratelimited.four_workers(
        cli, tmp_path, budget=budget, env=env, each=40
    )
    return measured


def test_four_processes_sharing_a_budget_keep_to_its_rate(budget_url: str, tmp_path: Path) -> None:
    shared = _workers(tmp_path, budget_url)
    assert shared["exit_codes"] == [0, 0, 0, 0], shared["output"]
    assert shared["accepted"] == 160
    # 20 a second together; margins for a shared machine
    assert 15.0 <= shared["rate_per_s"] <= 20.5, shared
    assert shared["share_429"] < 0.03, shared
    assert PG_PASSWORD not in str(shared["output"])


def test_four_processes_without_a_budget_send_four_times_the_rate(tmp_path: Path) -> None:
    alone = _workers(tmp_path, None)  # rows may run out of attempts: exit 2 is allowed
    assert set(alone["exit_codes"]) <= {0, 2}, alone["output"]
    assert alone["share_429"] > 0.1, alone


def test_the_clients_of_a_process_share_one_budget(budget_url: str) -> None:
    config = cc.ClientConfig.create("http://127.0.0.1:9", KEY, budget=budget_url,
                                    max_requests_per_second=5)  # fmt: skip
    one, other = budget_of(config), budget_of(config.with_options(read_timeout=3))
    assert isinstance(one, SharedBudget)
    assert one is other


def test_a_tracker_takes_its_slots_from_the_budget(
    budget_url: str, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, budget=budget_url,
                       max_requests_per_second=50)  # fmt: skip
    budget = budget_of(client.config)
    assert budget is not None
    before = budget.grants
    with client.tracker() as tracker:
        for i in range(3):
            tracker.track("user_1", "login", occurred_at=now, message_id=f"m-{i}")
    client.track("user_1", "login", occurred_at=now)
    assert budget.grants >= before + 2  # the tracker's request(s) and track()'s


def test_a_budget_url_with_a_password_is_refused_without_echoing_it(
    postgres: PostgresServer,
) -> None:
    with pytest.raises(cc.ConfigurationError, match="PGPASSWORD") as caught:
        cc.ClientConfig.create("http://127.0.0.1:9", KEY, budget=postgres.url(),
                               max_requests_per_second=5)  # fmt: skip
    assert PG_PASSWORD not in str(caught.value)


def test_a_budget_needs_a_rate_to_share() -> None:
    with pytest.raises(cc.ConfigurationError, match="max_requests_per_second"):
        cc.ClientConfig.create("http://127.0.0.1:9", KEY, budget="postgresql://u@h/db")


def test_budget_ledger_needs_a_postgresql_ledger(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, budget="ledger",
                       max_requests_per_second=50)  # fmt: skip
    with pytest.raises(cc.ConfigurationError, match="PostgreSQL"):
        client.send_events(make_events(now), now=now, ledger=tmp_path / "l.db")


def test_budget_ledger_shares_the_ledgers_database(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp, pg_url: str
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, budget="ledger",
                       max_requests_per_second=50)  # fmt: skip
    result = client.send_events(make_events(now), now=now, ledger=pg_url, batch_size=5)
    assert result.counts["sent"] == 10
    import psycopg  # noqa: PLC0415

    with psycopg.connect(pg_url) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM churn_budget").fetchone() or (0,)
    assert rows == 1


def test_a_budget_that_cannot_be_reached_fails_soft(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    down = f"postgresql://churn@127.0.0.1:{_closed_port()}/ledger?connect_timeout=2"
    client = cc.Client(sandbox.base_url, sandbox.api_key, budget=down,
                       max_requests_per_second=100)  # fmt: skip
    with caplog.at_level(logging.WARNING, "churn_connector"):
        result = client.send_events(make_events(now), now=now, batch_size=5, progress=False)
    assert result.counts["sent"] == 10
    assert "cannot be used" in caplog.text
    assert PG_PASSWORD not in caplog.text


def _closed_port() -> int:
    from tests.ledger.servers import free_port  # noqa: PLC0415

    return free_port()


def test_the_receiver_limits_by_itself() -> None:
    # the receiver the tests measure against: 429 above its rate, Retry-After given
    process, url = ratelimited.start(2)
    try:
        with httpx.Client() as http:
            answers = [http.post(f"{url}/v1/events/batch", content=b"{}") for _ in range(6)]
    finally:
        ratelimited.stop(process)
    assert answers[0].status_code == 200
    limited = [a for a in answers if a.status_code == 429]
    assert limited
    assert limited[0].headers["Retry-After"] == "1"
