"""A sync killed with ``kill -9`` (or stopped with SIGTERM) at any moment, then run again
until it finishes, stores every row exactly once and skips none: the watermark is written
only after the rows below it were settled, and a stopped run moves it no further than its
settled rows allow (a property over kill points; each example a few runs of the program)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import churn_connector as cc
from tests.sync.sources import SqliteSource, rows

ROOT = Path(__file__).resolve().parents[2]
QUERY = (
    'SELECT id, id AS "properties.seq", uid AS external_user_id, et AS event_type, '
    "ts AS occurred_at FROM events"
)
STOPS = (signal.SIGKILL, signal.SIGKILL, signal.SIGTERM)
GROWTH = 200  # rows added before each run: 20 requests, about a second's sending


def program(sandbox: cc.Sandbox, source: SqliteSource, ledger: Path) -> list[str]:
    return [
        sys.executable, "-m", "churn_connector._cli", "-q", "send", "events",
        "--sql", QUERY, "--connection", source.connection, "--cursor", "id",
        "--ledger", str(ledger), "--base-url", sandbox.base_url,
        "--batch-size", "10", "--concurrency", "2",
    ]  # fmt: skip


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kills=st.lists(
        st.tuples(st.floats(min_value=0.3, max_value=3.0), st.sampled_from(STOPS)),
        min_size=1,
        max_size=3,
    )
)
def test_a_sync_killed_anywhere_then_run_again_stores_every_row_once(
    kills: list[tuple[float, signal.Signals]], now: pd.Timestamp
) -> None:
    with tempfile.TemporaryDirectory() as folder, cc.Sandbox() as sandbox:
        sandbox.set_faults(latency=0.1)
        source = SqliteSource(Path(folder) / "source.sqlite")
        ledger = Path(folder) / "ledger.sqlite"
        env = {**os.environ, "CHURN_API_KEY": sandbox.api_key, "PYTHONPATH": str(ROOT)}
        total = 0
        for stop in [*kills, None]:  # killed runs, then one left to finish
            source.add(rows(total, total + GROWTH, now))
            total += GROWTH
            errors = Path(folder) / "stderr"
            with errors.open("wb") as err:
                run = subprocess.Popen(
                    program(sandbox, source, ledger), env=env, stdout=err, stderr=err
                )
                if stop is not None:
                    time.sleep(stop[0])
                    run.send_signal(stop[1])
                run.wait(120)
            if stop is None:
                assert run.returncode == 0, errors.read_text()
        stored = sandbox.events()["properties"].map(lambda p: p["seq"])
        assert sorted(stored) == list(range(total))  # each once, none skipped
