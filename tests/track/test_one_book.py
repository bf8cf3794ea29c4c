"""A tracked event ends as a row of a batch would: the same states, counts and texts.

A tracker's request is a small run whose events are rows of a ``RowBook``, landed by the
batch path's code (``_delivery.landing``); these tests put the same event through
``send_events`` and through a tracker, thread and async, against the same answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._delivery.landing import EXPIRED_TEXT

pytestmark = pytest.mark.e2e  # real HTTP throughout

KEY = "one-book-test-key-0042"

REJECTED = (
    b'{"error": {"message": "invalid batch", "details": '
    b'[{"index": 0, "field": "events[0].properties", "message": "plan is unknown"}]}}'
)
ANSWERS = {
    "failed": (503, b'{"error": {"message": "busy"}}'),
    "rejected": (422, REJECTED),
}


def values(now: pd.Timestamp) -> dict[str, Any]:
    return {
        "external_user_id": "u1",
        "event_type": "plan_upgraded",
        "occurred_at": now - pd.Timedelta(minutes=5),
        "properties": {"plan": "pro"},
    }


async def tracked_async(url: str, event: dict[str, Any], now: pd.Timestamp) -> cc.FlushReport:
    retry = cc.RetryPolicy(max_attempts=2)
    async with cc.AsyncClient(url, KEY, retry=retry) as client:
        tracker = client.tracker()
        await tracker.track(**event, now=now)
        return await tracker.aclose()


@pytest.mark.parametrize("state", ["failed", "rejected"])
@pytest.mark.parametrize("how", ["thread", "async"])
def test_a_tracked_event_ends_with_a_batch_rows_state_and_text(
    odd_server: Callable[..., str], now: pd.Timestamp, state: str, how: str
) -> None:
    url = odd_server(*ANSWERS[state])
    event = values(now)
    client = cc.Client(url, KEY, retry=cc.RetryPolicy(max_attempts=2))
    batch = client.send_events(pd.DataFrame([event]), now=now)
    if how == "thread":
        tracker = client.tracker()
        tracker.track(**event, now=now)
        report = tracker.close()
    else:
        report = asyncio.run(tracked_async(url, event, now))
    (row,) = batch.rows.to_dict("records")
    (undelivered,) = report.undelivered
    assert (undelivered.state, undelivered.error) == (row["status"], row["error"])
    assert undelivered.message_id == row["message_id"]
    if state == "rejected":  # the API's own word on the event, as on the batch's row
        assert undelivered.error == "HTTP 422: properties: plan is unknown"
    # counted under the same names as a send's rows, pending last
    assert list(report.counts) == [*batch.counts, "pending"]
    assert report.counts[state] == batch.counts[state] == 1


def test_a_spooled_event_that_aged_out_has_the_batch_rows_expired_text(
    tmp_path: Any, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    then = now - pd.Timedelta(days=40)
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    with client.tracker(tmp_path / "spool.sqlite") as tracker:
        handle = tracker.track("u1", "login", occurred_at=then - pd.Timedelta(hours=1), now=then)
        report = tracker.flush(timeout=30)
    (undelivered,) = report.undelivered
    assert (undelivered.state, undelivered.error) == ("expired", EXPIRED_TEXT)
    with pytest.raises(cc.DeliveryError) as caught:
        handle.result(timeout=0)
    assert str(caught.value) == f"event {handle.message_id} expired: {EXPIRED_TEXT}"
    assert not caught.value.retryable


def test_a_request_too_large_for_the_api_is_split_as_a_batchs_would_be() -> None:
    # the sandbox refuses bodies over 2 KB with 413; 40 events of ~200 bytes fit in none
    with cc.Sandbox(max_body_bytes=2048) as sandbox:
        client = cc.Client(sandbox.base_url, sandbox.api_key, bisect_rejected=False)
        with client.tracker(max_concurrency=1) as tracker:
            for i in range(40):
                tracker.track("u1", "page_view", properties={"i": i, "pad": "x" * 100})
            report = tracker.flush(timeout=30)
            huge = tracker.track("u1", "page_view", properties={"pad": "x" * 4000})
            alone = tracker.flush(timeout=30)
        log = sandbox.requests_log()
    # a 413 is a size, never a content, problem: split even with bisection off, and the
    # size learned: later requests are built to fit
    assert report.ok and report.n_delivered == 40
    assert (log["status"] == 413).sum() < 10
    (refused,) = alone.undelivered
    assert refused.message_id == huge.message_id and refused.state == "rejected"
    assert refused.error.startswith("HTTP 413: this event alone (")


@pytest.mark.parametrize("how", ["thread", "async"])
def test_one_event_too_large_for_the_api_is_said_as_a_batch_row_says_it(how: str) -> None:
    big = {"pad": "x" * 4000}
    with cc.Sandbox(max_body_bytes=2048) as sandbox:
        if how == "thread":
            client = cc.Client(sandbox.base_url, sandbox.api_key)
            try:
                with pytest.raises(cc.DeliveryError) as caught:
                    client.track("u1", "login", properties=big)
            finally:
                client.close()
        else:

            async def send() -> None:
                async with cc.AsyncClient(sandbox.base_url, sandbox.api_key) as client:
                    await client.track("u1", "login", properties=big)

            with pytest.raises(cc.DeliveryError) as caught:
                asyncio.run(send())
    assert "HTTP 413: this event alone (" in str(caught.value)
    assert "bytes) is larger than the API accepts" in str(caught.value)
    assert str(caught.value).startswith("the API refused event ")
