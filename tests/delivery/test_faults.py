"""Hostile networks and servers, over real HTTP through a fault proxy: every event stored
exactly once, deadlines that hold against trickling answers, a breaker for hosts that
cannot be reached, 1xx interim answers, 413s that teach the run, and retry logs that say why."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.conftest import Figures, MakeEvents
from tests.faultproxy import FaultProxy, Mode

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


FAULTS: list[Mode] = ["reset_mid_body", "reset_after_store", "half_response", "early_hints"]


@pytest.fixture
def proxy(sandbox: cc.Sandbox) -> Iterator[FaultProxy]:
    with FaultProxy(sandbox.base_url) as p:
        yield p


def client_for(proxy: FaultProxy, sandbox: cc.Sandbox, **options: object) -> cc.Client:
    return cc.Client(proxy.url, sandbox.api_key, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("fault", FAULTS)
def test_every_event_is_stored_exactly_once_whatever_the_network_does(
    fault: Mode,
    proxy: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    events = make_events(now, n=200)
    proxy.script_modes([fault, fault, "pass", fault])
    result = client_for(proxy, sandbox).send_events(events, now=now, batch_size=50)
    assert result.ok, result.summary()
    stats = sandbox.stats()
    assert stats["stored"] == len(events)
    assert len(sandbox.events()) == len(events)
    attempts = int(result.chunks["attempts"].sum())
    figures(
        f"{len(result.chunks)} requests, {attempts - len(result.chunks)} retries, "
        f"{stats['duplicates']} duplicates absorbed, {stats['stored']} events stored"
    )


def test_an_early_hints_answer_is_not_the_outcome(
    proxy: FaultProxy, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    proxy.mode = "early_hints"
    result = client_for(proxy, sandbox).send_events(events, now=now)
    assert result.chunks["http_status"].tolist() == [200]
    assert result.chunks["attempts"].tolist() == [1]


def test_a_stalled_answer_ends_at_the_request_timeout_and_is_retried(
    proxy: FaultProxy, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    proxy.script_modes(["stall"])
    started = time.monotonic()
    result = client_for(proxy, sandbox, request_timeout=1.0).send_events(events, now=now)
    assert result.ok
    assert result.chunks["attempts"].tolist() == [2]
    assert time.monotonic() - started < 10
    assert sandbox.stats()["stored"] == len(events)  # the stalled attempt's store absorbed


def test_a_trickling_answer_cannot_hold_the_run_past_its_deadline(
    proxy: FaultProxy,
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    # one byte a second: a read timeout (per socket read) never fires
    proxy.mode, proxy.trickle_interval = "trickle", 1.0
    client = client_for(proxy, sandbox, deadline=2.0, read_timeout=30.0)
    started = time.monotonic()
    result = client.send_events(events, now=now)
    elapsed = time.monotonic() - started
    figures(f"deadline 2 s, ended after {elapsed:.1f} s")
    assert elapsed < 2.0 + 5  # the deadline plus a few seconds
    assert result.counts["failed"] == len(events)
    assert "deadline exceeded" in result.rows["error"].iloc[0]
    assert result.exit_code == 2


def test_the_cli_deadline_ends_a_trickling_run_with_exit_2(
    proxy: FaultProxy,
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy.mode, proxy.trickle_interval = "trickle", 1.0
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    rows = tmp_path / "rows.csv"
    args = ["send", "events", str(path), "--base-url", proxy.url, "--rows", str(rows)]
    started = time.monotonic()
    assert main([*args, "--deadline", "2", "--request-timeout", "60"]) == 2
    assert time.monotonic() - started < 2 + 5
    assert set(pd.read_csv(rows)["status"]) == {"failed"}


def test_a_listener_that_never_answers_ends_at_the_read_timeout(
    proxy: FaultProxy, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    proxy.mode = "blackhole"
    retry = cc.RetryPolicy(max_attempts=2)
    client = client_for(proxy, sandbox, read_timeout=0.5, retry=retry)
    started = time.monotonic()
    result = client.send_events(events, now=now)
    assert time.monotonic() - started < 10
    assert result.counts["failed"] == len(events)
    assert "read timeout" in result.rows["error"].iloc[0]


def test_413s_teach_the_run_its_size_limit_and_reject_no_valid_row(
    proxy: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    events = make_events(now, n=5000)  # ten batches of 500
    proxy.mode, proxy.max_body = "too_large", 6_000
    result = client_for(proxy, sandbox, max_concurrency=1).send_events(events, now=now)
    assert result.ok and result.counts["sent"] == len(events)
    assert sandbox.stats()["stored"] == len(events)
    refused = int((result.chunks["http_status"] == 413).sum())
    figures(f"{len(result.chunks)} requests of at most 6 KB for 5,000 events; {refused} were 413s")
    # halving from 500 events (~100 KB) to what fits takes a few 413s, not one per batch
    assert 1 <= refused <= 6
    assert (result.chunks.loc[result.chunks["status"] == "sent", "bytes"] <= 6_000).all()


def test_one_event_larger_than_the_api_accepts_is_rejected_alone(
    proxy: FaultProxy, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=20)
    events["properties.blob"] = ["x" * 10] * 19 + ["x" * 5000]
    proxy.mode, proxy.max_body = "too_large", 2_000
    result = client_for(proxy, sandbox).send_events(events, now=now)
    assert result.counts["sent"] == 19
    assert result.counts["rejected"] == 1
    assert "this event alone" in result.rows["error"].iloc[19]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_stops_the_run_naming_host_and_cause(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    port = _closed_port()
    with pytest.raises(
        cc.TransportError, match=rf"127\.0\.0\.1:{port}.*connection refused"
    ) as info:
        cc.Client(f"http://127.0.0.1:{port}", "k").send_events(events, now=now)
    assert info.value.counts["failed"] == len(events)
    assert info.value.rows is not None and len(info.value.rows) == len(events)


def test_a_refused_connection_is_retryable(events: pd.DataFrame, now: pd.Timestamp) -> None:
    # a server that is down may be up for the next try (an orchestrator's retry)
    with pytest.raises(cc.TransportError) as info:
        cc.Client(f"http://127.0.0.1:{_closed_port()}", "k").send_events(events, now=now)
    assert info.value.retryable is True


@pytest.mark.slow
def test_a_closed_port_ends_the_run_within_about_30_seconds_with_real_waits(
    events: pd.DataFrame,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    figures: Figures,
) -> None:
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    monkeypatch.setenv("CHURN_API_KEY", "k")
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with cc.instant_retries():
        cc.set_retry_testing(False)  # real back-off: what a user sees
        code = main(["send", "events", str(path), "--base-url", url])
    elapsed = time.monotonic() - started
    figures(f"exit {code} after {elapsed:.1f} s")
    assert code == 3
    assert elapsed < 30


def test_retries_are_logged_with_their_cause_at_most_once_a_few_seconds(
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox.script_faults([cc.Fault("5xx", status=503)] * 6)
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        result = cc.Client(sandbox.base_url, sandbox.api_key, max_concurrency=4).send_events(
            make_events(now, n=200), now=now, batch_size=10
        )
    assert result.ok
    lines = [r.getMessage() for r in caplog.records if "HTTP 503" in r.getMessage()]
    assert 1 <= len(lines) <= 3  # 6 retries, a couple of lines
    assert "retries since the last line" in lines[-1]


def test_a_429_pause_is_logged_with_its_length_and_reason(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox.script_faults([cc.Fault("429", retry_after=7)])
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        assert cc.Client(sandbox.base_url, sandbox.api_key).send_events(events, now=now).ok
    assert "rate limiting (HTTP 429): pausing every request for 7.0 s" in caplog.text
