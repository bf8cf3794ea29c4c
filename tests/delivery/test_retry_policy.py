"""RetryPolicy: back-off bounds, Retry-After parsing and capping, and the test-mode switch."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

import churn_connector as cc
from churn_connector._delivery.policy import Attempt, Policy
from churn_connector._delivery.pool import Answer
from churn_connector._delivery.retry import next_wait, parse_retry_after, retry_testing


def test_backoff_grows_exponentially_within_full_jitter() -> None:
    policy = cc.RetryPolicy(initial_delay=0.5, multiplier=2.0, max_delay=30.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (10, 30.0)]:
        waits = [policy.backoff(attempt, rng) for _ in range(200)]
        assert min(waits) >= 0
        assert max(waits) <= ceiling
        assert max(waits) > ceiling * 0.8  # jitter spans the whole range


def test_retry_after_seconds_are_honoured() -> None:
    assert next_wait(cc.RetryPolicy(), 1, "7", random.Random(0)) == 7.0


def test_retry_after_is_capped() -> None:
    assert next_wait(cc.RetryPolicy(max_retry_after=10), 1, "3600", random.Random(0)) == 10


def test_retry_after_http_date_is_parsed() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=42), usegmt=True)
    assert parse_retry_after(header, now=now) == 42


def test_retry_after_in_the_past_means_now() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(now - timedelta(hours=1), usegmt=True), now=now) == 0


def test_unparseable_retry_after_falls_back_to_backoff() -> None:
    assert parse_retry_after("soon") is None
    assert next_wait(cc.RetryPolicy(initial_delay=0.1), 1, "soon", random.Random(0)) <= 0.1


def test_invalid_policies_are_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="max_attempts"):
        cc.RetryPolicy(max_attempts=0)


def test_instant_retries_skip_waiting_and_restore_the_previous_mode() -> None:
    config = cc.ClientConfig.create("https://api.example.com", "k")
    cc.set_retry_testing(False)
    try:
        with cc.instant_retries():
            assert retry_testing()
            delivery = Policy(config).delivery("/v1/events/batch")
            delivery.next()
            # the policy says attempt again at once, where it would say wait 5 s
            assert isinstance(delivery.answered(Answer(503, None, "5")), Attempt)
        assert not retry_testing()
    finally:
        cc.set_retry_testing(True)  # the suite's autouse fixture expects it on
