"""max_requests_per_second: a request-rate budget shared by a client's workers, retries
included (Spark tasks each get a share of a cluster-wide budget)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._delivery.transport import HttpPoster
from tests.conftest import MakeEvents

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def _busiest(times: pd.Series, window: float) -> int:
    """The most requests received within any ``window`` seconds."""
    seconds = sorted((times - times.min()).dt.total_seconds())
    best = lo = 0
    for hi, t in enumerate(seconds):
        while t - seconds[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def test_workers_share_one_request_rate(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    client = cc.Client(
        sandbox.base_url, sandbox.api_key, max_concurrency=4, max_requests_per_second=40
    )
    started = time.monotonic()
    res = client.send_events(make_events(now, n=20), now=now, batch_size=1)
    elapsed = time.monotonic() - started
    assert res.counts["sent"] == 20
    # 20 attempts spaced 1/40 s apart, whatever the concurrency: no burst above the rate
    assert elapsed >= 19 / 40
    assert _busiest(sandbox.requests_log()["received_at"], 0.25) <= 40 * 0.25 + 2


def test_every_attempt_takes_a_token_retries_included(
    odd_server: Callable[..., str], make_events: MakeEvents, now: pd.Timestamp
) -> None:
    url = odd_server(503)
    retry = cc.RetryPolicy(max_attempts=4)
    client = cc.Client(url, "k", max_requests_per_second=20, retry=retry)
    started = time.monotonic()
    res = client.send_events(make_events(now, n=1), now=now)
    # instant-retry test mode skips the back-off sleeps, never the rate limit
    assert res.chunks["attempts"].tolist() == [4]
    assert time.monotonic() - started >= 3 / 20


def test_a_stop_ends_the_wait_for_a_slot(sandbox: cc.Sandbox) -> None:
    config = cc.ClientConfig.create(
        sandbox.base_url, sandbox.api_key, max_requests_per_second=0.1
    )  # one attempt every 10 s
    poster = HttpPoster(config, pool_size=1)
    body = b'{"external_user_id":"u1"}'
    try:
        assert poster.post("/v1/identify", body).status == "sent"  # the first slot is free
        threading.Timer(0.1, poster.stop, args=("interrupted",)).start()
        started = time.monotonic()
        outcome = poster.post("/v1/identify", body)
    finally:
        poster.close()
    assert time.monotonic() - started < 5
    assert (outcome.status, outcome.error) == ("failed", "not sent: interrupted")


@pytest.mark.parametrize("rate", [0, -1, float("inf"), True, "10"])
def test_the_rate_must_be_a_positive_number(rate: object) -> None:
    with pytest.raises(cc.ConfigurationError, match="max_requests_per_second"):
        cc.ClientConfig.create("https://api.example.com", "k", max_requests_per_second=rate)  # type: ignore[arg-type]
