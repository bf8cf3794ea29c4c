"""A PostgreSQL ledger session that stops answering never holds a run past its deadline:
every statement is bounded (the session's ``statement_timeout``, TCP keepalives and
``tcp_user_timeout``, and on the client a watchdog at the bound or the run's deadline,
whichever comes first), so the run ends near its deadline with its rows file. A real
server, behind a TCP proxy that freezes its sessions; the program in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import MakeEvents
from tests.ledger.freezeproxy import FreezeProxy
from tests.ledger.servers import PG_PASSWORD, PostgresServer

pytestmark = pytest.mark.e2e


def _proxied(url: str, proxy: FreezeProxy, server: PostgresServer) -> str:
    return url.replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{proxy.port}")


def test_a_frozen_ledger_session_ends_the_run_near_its_deadline_with_its_rows_file(
    postgres: PostgresServer,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
) -> None:
    export = tmp_path / "events.parquet"
    make_events(now, n=5_000, users=50).to_parquet(export)
    rows = tmp_path / "rows.csv"
    # the command line takes no password in a URL: libpq's PGPASSWORD gives it
    url = postgres.url(postgres.fresh_schema(), password=False)
    with FreezeProxy(postgres.port) as proxy:
        env = {**os.environ, "CHURN_API_KEY": sandbox.api_key, "PGPASSWORD": PG_PASSWORD}
        command = [
            sys.executable, "-m", "churn_connector._cli", "send", "events", str(export),
            "--base-url", sandbox.base_url, "--ledger", _proxied(url, proxy, postgres),
            "--rows", str(rows), "--deadline", "4", "--concurrency", "2", "-q",
        ]  # fmt: skip
        proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        while len(sandbox.requests_log()) == 0 and proc.poll() is None:
            time.sleep(0.005)
        proxy.freeze()  # the ledger opened; the requests are under way: it stops answering
        frozen = time.monotonic()
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the run hung on a frozen ledger session: {err[-2000:]}")
        elapsed = time.monotonic() - frozen
    assert proc.returncode == 3, err
    # the deadline (4 s), a last statement's 5 s after it, a new session's 2 s: never a hang
    assert elapsed < 25, elapsed
    # a statement that stopped answering, or a new session that could not start
    assert "cannot record what the API acknowledged" in err, err
    assert "did not answer" in err or "connection timeout expired" in err, err
    assert PG_PASSWORD not in err
    frame = pd.read_csv(rows, dtype=str)
    assert len(frame) >= 5_000  # every row accounted for (not read: one last row)


def test_a_frozen_session_fails_one_statement_at_its_statement_timeout(
    postgres: PostgresServer, pg_url: str
) -> None:
    with FreezeProxy(postgres.port) as proxy:
        # libpq's own setting, in the URL: the session's statement_timeout, 1.5 s
        url = _proxied(pg_url, proxy, postgres) + "%20-cstatement_timeout%3D1500"
        ledger = cc.Ledger(url)
        outcome: list[BaseException | None] = []

        def stats() -> None:
            try:
                ledger.stats()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        try:
            ledger.stats()
            proxy.freeze()
            started = time.monotonic()
            worker = threading.Thread(target=stats, daemon=True)
            worker.start()
            worker.join(30)
            assert outcome, "the statement hung on a frozen session"
            assert time.monotonic() - started < 1.5 + 5
            error = outcome[0]
            assert isinstance(error, cc.LedgerError), error
            assert "did not answer" in str(error)
            assert error.retryable
            assert PG_PASSWORD not in str(error)
        finally:
            proxy.thaw()
            ledger.close()
