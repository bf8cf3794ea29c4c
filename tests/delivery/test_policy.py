"""The delivery policy without I/O: what it says next, given what an attempt saw and the time.

Every caller's poster (batch sends, ``track()``, the trackers, the async client) is a shell
around these decisions, so they are tested here once, on a clock the test moves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import churn_connector as cc
from churn_connector._delivery.failures import NetworkFailure
from churn_connector._delivery.policy import Attempt, Delivery, Done, Policy, Stop, Wait
from churn_connector._delivery.pool import Answer
from churn_connector._delivery.retry import retry_testing

KEY = "policy-canary-key-7f3e"
REFUSED = NetworkFailure("connection refused by api.example.com:443", unreachable=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def real_waits() -> Iterator[None]:
    # the suite skips back-off waits; these tests read them
    cc.set_retry_testing(False)
    try:
        yield
    finally:
        cc.set_retry_testing(True)


def policy(clock: Clock, **options: object) -> Policy:
    config = cc.ClientConfig.create("https://api.example.com", KEY, **options)  # type: ignore[arg-type]
    return Policy(config, seed=1, clock=clock)


def answer(status: int, text: str | None = None, retry_after: str | None = None) -> Answer:
    return Answer(status, text, retry_after)


def test_an_attempt_then_a_wait_then_an_attempt_then_done(clock: Clock, real_waits: None) -> None:
    delivery = policy(clock).delivery("/v1/events/batch")
    step = delivery.next()
    assert step == Attempt(120.0, "no complete answer within request_timeout (120 s)")
    step = delivery.answered(answer(503, '{"error": {"message": "busy"}}'))
    assert isinstance(step, Wait) and 0 <= step.seconds <= 0.5  # full jitter, first ceiling
    clock.now += step.seconds
    assert isinstance(delivery.next(), Attempt)
    step = delivery.answered(answer(200))
    assert isinstance(step, Done)
    assert (step.outcome.status, step.outcome.attempts, step.outcome.http_status) == (
        "sent",
        2,
        200,
    )


def test_asked_early_the_wait_goes_on(clock: Clock, real_waits: None) -> None:
    delivery = policy(clock).delivery("/p")
    delivery.next()
    step = delivery.answered(answer(500, retry_after="4"))
    assert step == Wait(4.0)
    clock.now += 1  # a shell that wakes early (an async slice) is told to wait the rest
    assert delivery.next() == Wait(3.0)


def test_retry_after_is_honoured_up_to_its_cap(clock: Clock, real_waits: None) -> None:
    retry = cc.RetryPolicy(max_retry_after=5)
    delivery = policy(clock, retry=retry).delivery("/p")
    delivery.next()
    assert delivery.answered(answer(503, retry_after="3600")) == Wait(5.0)


def test_a_429_pauses_every_request_of_the_policy(clock: Clock, real_waits: None) -> None:
    shared = policy(clock)
    first, second = shared.delivery("/p"), shared.delivery("/p")
    first.next()
    assert first.answered(answer(429, retry_after="7")) == Wait(7.0)
    assert second.next() == Wait(7.0)  # it never saw the 429
    clock.now += 7
    assert isinstance(second.next(), Attempt)


def test_the_budget_spaces_attempts_retries_included(clock: Clock) -> None:
    shared = policy(clock, max_requests_per_second=5)
    deliveries = [shared.delivery("/p") for _ in range(3)]
    steps = [d.next() for d in deliveries]
    assert isinstance(steps[0], Attempt)
    assert [s.seconds for s in steps[1:] if isinstance(s, Wait)] == pytest.approx([0.2, 0.4])
    # a retry takes a slot too, after the two already taken (instant retries: no back-off)
    step = deliveries[0].answered(answer(503))
    assert isinstance(step, Wait) and step.seconds == pytest.approx(0.6)


def test_the_breaker_stops_the_run_once_the_host_was_unreachable_for_fail_fast_after(
    clock: Clock, real_waits: None
) -> None:
    shared = policy(clock, fail_fast_after=10, retry=cc.RetryPolicy(max_attempts=100))
    delivery = shared.delivery("/p")
    waited = 0.0
    while True:
        step = delivery.next()
        assert isinstance(step, Attempt)
        step = delivery.failed(REFUSED)
        if isinstance(step, Stop):
            break
        assert isinstance(step, Wait)
        clock.now += step.seconds
        waited += step.seconds
    assert 10 <= waited < 11  # the waits were capped at the breaker's time, not 30 s each
    assert isinstance(step.error, cc.TransportError)
    assert str(step.error) == (
        "cannot reach the API at api.example.com:443: connection refused by "
        "api.example.com:443. The run was stopped."
    )
    late = shared.delivery("/p").next()  # every other request of the run ends, unsent
    assert isinstance(late, Done)
    assert late.outcome.error == "not sent: connection refused by api.example.com:443"


def test_an_answer_resets_the_breaker(clock: Clock, real_waits: None) -> None:
    shared = policy(clock, fail_fast_after=1, retry=cc.RetryPolicy(max_attempts=100))
    one, two = shared.delivery("/p"), shared.delivery("/p")

    def fails() -> Wait | Stop:
        while isinstance(step := one.next(), Wait):
            clock.now += step.seconds
        assert isinstance(step, Attempt)
        after = one.failed(REFUSED)
        assert isinstance(after, Wait | Stop)
        return after

    assert isinstance(fails(), Wait)
    assert isinstance(fails(), Wait)
    two.next()
    assert isinstance(two.answered(answer(200)), Done)  # the host answers after all
    clock.now += 5
    assert isinstance(fails(), Wait)  # a new streak: without the answer, the third failure
    assert isinstance(fails(), Wait)  # over more than a second would have stopped the run
    clock.now += 5
    assert isinstance(fails(), Stop)


def test_the_run_deadline_is_the_policys(clock: Clock) -> None:
    shared = policy(clock, deadline=10)
    clock.now += 9.5
    assert shared.delivery("/p").next() == Attempt(0.5, "deadline exceeded")
    clock.now += 1
    step = shared.delivery("/p").next()
    assert isinstance(step, Done)
    assert step.outcome.error == "deadline exceeded before the request could be delivered"


def test_a_calls_deadline_starts_with_each_request(clock: Clock) -> None:
    config = cc.ClientConfig.create("https://api.example.com", KEY, deadline=10)
    shared = Policy(config, deadline="call", clock=clock)
    clock.now += 3600
    step = shared.delivery("/p").next()
    assert step == Attempt(10.0, "deadline exceeded")


def test_a_retry_that_would_outlive_the_deadline_is_not_made(
    clock: Clock, real_waits: None
) -> None:
    delivery = policy(clock, deadline=5).delivery("/p")
    delivery.next()
    step = delivery.answered(answer(503, retry_after="60"))
    assert isinstance(step, Done)
    assert step.outcome.error == "HTTP 503; deadline would pass before the next retry"


def test_a_refused_key_stops_the_run_and_the_other_requests(clock: Clock) -> None:
    shared = policy(clock)
    one, two = shared.delivery("/p"), shared.delivery("/p")
    one.next()
    two.next()
    step = one.answered(answer(401))
    assert isinstance(step, Stop) and isinstance(step.error, cc.AuthenticationError)
    assert str(step.error) == (
        "the API refused the key (HTTP 401); check CHURN_API_KEY. The run was stopped."
    )
    late = two.answered(answer(503))  # in flight when the run stopped
    assert isinstance(late, Done)
    assert late.outcome.error == "the run was stopped; outcome unknown, safe to re-send"


def test_rejected_content_is_done_at_once_with_the_apis_word_per_event(clock: Clock) -> None:
    body = (
        '{"error": {"message": "invalid batch", "details": '
        '[{"index": 1, "field": "events[1].occurred_at", "message": "too old"}]}}'
    )
    delivery = policy(clock).delivery("/p")
    delivery.next()
    step = delivery.answered(answer(422, body))
    assert isinstance(step, Done)
    assert step.outcome.status == "rejected"
    assert step.outcome.error == "HTTP 422: invalid batch"
    assert step.outcome.event_errors == ((1, "HTTP 422: occurred_at: too old"),)


def test_the_key_echoed_by_a_server_is_masked(clock: Clock) -> None:
    delivery = policy(clock).delivery("/p")
    delivery.next()
    step = delivery.answered(answer(400, f'{{"message": "bad header Bearer {KEY}"}}'))
    assert isinstance(step, Done)
    texts = [step.outcome.error, step.outcome.response]
    assert all(KEY not in (text or "") for text in texts)
    assert step.outcome.error == "HTTP 400: bad header Bearer ********"


def test_instant_retries_skip_back_off_and_pause_never_the_budget(clock: Clock) -> None:
    assert retry_testing()  # the suite's mode
    shared = policy(clock, max_requests_per_second=1)
    delivery = shared.delivery("/p")
    delivery.next()
    # no back-off, no pause: straight to the budget's next slot
    assert delivery.answered(answer(429, retry_after="30")) == Wait(1.0)
    other: Delivery = shared.delivery("/p")
    assert other.next() == Wait(2.0)  # the pause skipped, the budget kept


def test_a_fatal_failure_stops_the_run_without_retrying(clock: Clock) -> None:
    delivery = policy(clock).delivery("/p")
    delivery.next()
    fatal = NetworkFailure("too many open files", unreachable=False, fatal=True)
    step = delivery.failed(fatal)
    assert isinstance(step, Stop) and not step.error.retryable
    assert str(step.error).startswith("cannot send to the API at api.example.com:443:")
