"""A ledger that cannot be reached or written fails loud: ``LedgerError`` naming the ledger
(never its password), exit 3, every row accounted; the password appears in no output."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.conftest import MakeEvents
from tests.ledger.servers import PG_PASSWORD, PostgresServer, free_port

pytestmark = pytest.mark.e2e
WRONG = "pg_CANARY_wrong_5e8f0c"


def test_a_refused_password_stops_the_run_before_anything_is_sent_naming_the_ledger(
    client: cc.Client,
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    now: pd.Timestamp,
    postgres: PostgresServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = postgres.url().replace(PG_PASSWORD, WRONG)
    with caplog.at_level(logging.DEBUG), pytest.raises(cc.LedgerError) as info:
        client.send_events(events, now=now, ledger=url)
    error = info.value
    assert not error.retryable  # the password must change first
    assert "password authentication failed" in str(error)
    assert error.path == url.replace(WRONG, "***")
    assert "nothing was sent" in str(error)
    assert len(sandbox.requests_log()) == 0
    shown = " ".join([str(error), repr(error), caplog.text])
    assert WRONG not in shown and PG_PASSWORD not in shown


def test_a_ledger_server_that_does_not_answer_is_a_retryable_ledger_error(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    url = f"postgresql://churn:{PG_PASSWORD}@127.0.0.1:{free_port()}/ledger"
    with pytest.raises(cc.LedgerError, match="Connection refused") as info:
        client.send_events(events, now=now, ledger=url)
    assert info.value.retryable
    assert PG_PASSWORD not in str(info.value)
    assert len(sandbox.requests_log()) == 0


def test_a_url_libpq_cannot_read_is_refused_without_showing_its_password() -> None:
    with pytest.raises(cc.ConfigurationError) as info:
        cc.Ledger(f"postgresql://churn:{PG_PASSWORD}@[127.0.0.1/ledger")
    assert PG_PASSWORD not in str(info.value)
    assert "postgresql://churn:***@" in str(info.value)


def test_the_password_never_shows_in_a_ledgers_repr_or_description(pg_url: str) -> None:
    with cc.Ledger(pg_url) as ledger:
        shown = f"{ledger!r} {ledger} {ledger.describe()} {ledger.location}"
    assert PG_PASSWORD not in shown
    assert ":***@" in shown


def test_a_bucket_that_refuses_writes_stops_the_run_at_the_first_write(
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    s3: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = tmp_path / "events.parquet"
    make_events(now, n=30).to_parquet(path)
    rows = tmp_path / "rows.csv"
    url = "s3://no-such-bucket/ledger/"  # listing an absent prefix finds nothing; writes fail
    code = main(["send", "events", str(path), "--base-url", sandbox.base_url, "--ledger", url,
                 "--batch-size", "5", "--concurrency", "1", "--rows", str(rows)])  # fmt: skip
    assert code == 3
    err = capsys.readouterr().err
    assert f"ledger {url}: cannot record the natural keys of the events" in err
    written = pd.read_csv(rows)
    assert len(written) == 30  # every row accounted
    # stopped at the first write: the re-id guard's, before any request left
    assert (written["status"] == "sent").sum() == 0
    assert sandbox.stats()["stored"] == 0


def test_ledger_commands_on_an_unreachable_server_exit_3_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    url = f"postgresql://churn@127.0.0.1:{free_port()}/ledger"
    assert main(["ledger", "stats", url]) == 3
    captured = capsys.readouterr()
    assert f"ledger {url}: cannot open" in captured.err
    assert PG_PASSWORD not in captured.out + captured.err
