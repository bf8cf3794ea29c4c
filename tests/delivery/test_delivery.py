"""Delivery over real HTTP against the sandbox: exactly once, retries, refusals, accounting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._delivery.transport import HttpPoster
from tests.conftest import MakeEvents

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def stored_wire(sb: cc.Sandbox) -> list[dict[str, Any]]:
    stored = sb.events()
    return [
        {
            "external_user_id": r.external_user_id,
            "event_type": r.event_type,
            "occurred_at": r.occurred_at,
            "properties": r.properties,
            "context": r.context,
        }
        for r in stored.itertuples()
    ]


def by_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["context"]["$message_id"]: e for e in events}


def test_every_valid_row_lands_exactly_once_as_the_expected_wire_object(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, make_events: MakeEvents
) -> None:
    df = make_events(now, n=1234)
    result = client.send_events(df, now=now)
    assert result.ok and result.counts["sent"] == 1234
    assert by_id(stored_wire(sandbox)) == by_id(cc.events_to_wire(df, now=now))
    assert len(sandbox.events()) == 1234


def test_chunks_hold_at_most_the_batch_size(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    result = client.send_events(events, now=now, batch_size=4)
    assert list(result.chunks["events"]) == [4, 4, 2]
    assert list(result.chunks["first_row"]) == [0, 4, 8]


def test_invalid_rows_never_reach_the_server(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    events.loc[[2, 5], "event_type"] = ["Bad Type", "oops\n"]
    result = client.send_events(events, now=now)
    assert result.counts == {
        "sent": 8,
        "invalid": 2,
        "rejected": 0,
        "failed": 0,
        "skipped": 0,
        "expired": 0,
        "held": 0,
    }
    sent_ids = set(sandbox.events()["message_id"])
    invalid_rows = result.rows[result.rows["status"] == "invalid"]
    assert list(invalid_rows.index) == [2, 5]
    assert sent_ids.isdisjoint(set(invalid_rows["message_id"].dropna()))
    assert sandbox.stats()["rejected"] == 0
    assert result.exit_code == 1


def test_resending_the_same_export_stores_nothing_new(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client.send_events(events, now=now)
    client.send_events(events.sample(frac=1, random_state=1), now=now, batch_size=3)
    stats = sandbox.stats()
    assert stats["stored"] == len(events)
    assert stats["duplicates"] == len(events)
    assert stats["conflicts"] == 0


def test_exact_duplicate_rows_are_sent_once_and_reported_as_skipped(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    result = client.send_events(pd.concat([events, events.iloc[:2]], ignore_index=True), now=now)
    assert result.counts["skipped"] == 2
    assert list(result.rows.loc[10:, "error"]) == [
        "duplicate of row 0 (same message id)",
        "duplicate of row 1 (same message id)",
    ]
    assert len(sandbox.events()) == len(events)


def test_server_errors_are_retried_with_byte_identical_bodies(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("5xx", status=503), cc.Fault("5xx", status=500)])
    result = client.send_events(events, now=now)
    assert result.ok
    assert result.chunks.iloc[0]["attempts"] == 3
    log = sandbox.requests_log()
    assert list(log["status"]) == [503, 500, 200]
    assert log["body_sha256"].nunique() == 1


def test_rate_limits_are_retried(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("429", retry_after=1)])
    result = client.send_events(events, now=now)
    assert result.ok
    assert result.chunks.iloc[0]["attempts"] == 2


def test_a_429_pauses_every_worker_for_its_retry_after(sandbox: cc.Sandbox) -> None:
    sandbox.script_faults([cc.Fault("429", retry_after=30)])
    config = cc.ClientConfig.create(sandbox.base_url, sandbox.api_key)
    poster = HttpPoster(config, pool_size=2)
    try:
        poster.post("/v1/identify", b'{"external_user_id":"a"}')
        # the shared gate, not only the retrying thread, holds back the next ~30 s
        assert poster.policy.paused_for(time.monotonic()) > 20
    finally:
        poster.close()


def test_a_lost_response_is_retried_and_the_server_deduplicates(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.script_faults([cc.Fault("drop")])
    result = client.send_events(events, now=now)
    assert result.ok
    assert sandbox.stats()["stored"] == len(events)
    assert sandbox.stats()["duplicates"] == len(events)


def test_a_stalled_response_times_out_and_is_retried(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, read_timeout=0.3)
    sandbox.script_faults([cc.Fault("stall", seconds=1.0)])
    result = client.send_events(events, now=now)
    assert result.ok
    assert result.chunks.iloc[0]["attempts"] == 2


def test_giving_up_after_max_attempts_marks_rows_failed(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, retry=cc.RetryPolicy(max_attempts=3))
    sandbox.set_faults(error_rate=1.0)
    result = client.send_events(events, now=now)
    assert result.counts["failed"] == len(events)
    assert result.chunks.iloc[0]["attempts"] == 3
    assert result.exit_code == 2
    with pytest.raises(cc.DeliveryError):
        result.raise_for_failures()


def test_the_deadline_stops_retrying(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, deadline=1e-9)
    result = client.send_events(events, now=now)
    assert result.counts["failed"] == len(events)
    assert (result.rows["error"] == "not sent: deadline exceeded").all()
    assert sandbox.requests_log().empty


def test_other_client_errors_are_not_retried_but_bisected(make_events: MakeEvents) -> None:
    # the API's clock runs 10 days ahead of ours, so two rows 25 days old look valid to the
    # client (then and when sent) but are outside the API's window
    now = pd.Timestamp.now(tz="UTC")
    df = make_events(now - pd.Timedelta(days=10), n=8)
    df.loc[[1, 6], "occurred_at"] = now - pd.Timedelta(days=25)
    with cc.Sandbox(clock=lambda: (now + pd.Timedelta(days=10)).to_pydatetime()) as sandbox:
        result = cc.Client(sandbox.base_url, sandbox.api_key).send_events(df, now=now)
        assert len(sandbox.events()) == 6
    assert result.counts["sent"] == 6 and result.counts["rejected"] == 2
    rejected = result.rows[result.rows["status"] == "rejected"]
    assert list(rejected.index) == [1, 6]
    assert "HTTP 400" in rejected.iloc[0]["error"]
    assert set(result.chunks["attempts"]) == {1}
    assert result.chunks.iloc[0]["status"] == "split"


def test_an_oversized_request_is_split(now: pd.Timestamp, make_events: MakeEvents) -> None:
    df = make_events(now, n=40)
    with cc.Sandbox(max_body_bytes=3000) as sb:
        result = cc.Client(sb.base_url, sb.api_key).send_events(df, now=now)
        assert result.ok
        assert (result.chunks["http_status"] == 413).any()
        assert len(sb.events()) == 40


def test_max_request_bytes_keeps_requests_small(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    small = cc.Client(config=client.config.with_options(max_request_bytes=700))
    result = small.send_events(events, now=now)
    assert result.ok and (result.chunks["bytes"] <= 700).all()
    assert len(result.chunks) > 1


def test_a_refused_key_stops_the_run_without_showing_the_key(
    sandbox: cc.Sandbox, now: pd.Timestamp, make_events: MakeEvents
) -> None:
    key = "sk_test_not_the_right_one_123456"
    client = cc.Client(sandbox.base_url, key, max_concurrency=1)
    with pytest.raises(cc.AuthenticationError) as info:
        client.send_events(make_events(now, n=2000), now=now)
    assert key not in str(info.value) and key not in repr(info.value)
    assert info.value.status == 401
    assert info.value.counts["failed"] == 2000
    assert len(sandbox.requests_log()) == 1


def test_x_api_key_header_is_supported(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, auth_header="x-api-key")
    assert client.send_events(events, now=now).ok
    headers = sandbox.requests_log().iloc[0]["headers"]
    assert "x-api-key" in headers and "authorization" not in headers


def test_dry_run_builds_requests_without_sending(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    result = client.send_events(events, now=now, dry_run=True, batch_size=4)
    assert sandbox.requests_log().empty
    assert list(result.chunks["status"]) == ["dry_run"] * 3
    assert result.counts["would_send"] == len(events)
    assert not result.ok


def test_row_states_add_up_to_the_input(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    events.loc[0, "event_type"] = "BAD"
    result = client.send_events(pd.concat([events, events.iloc[3:5]], ignore_index=True), now=now)
    assert sum(result.counts.values()) == len(result.rows) == 12
    assert result.chunks["events"].sum() == result.counts["sent"]


def test_one_pooled_connection_per_worker_is_reused(
    odd_server: Callable[..., str], now: pd.Timestamp, make_events: MakeEvents
) -> None:
    peers: set[tuple[str, int]] = set()
    url = odd_server(200, b"{}", delay=0.02, peers=peers)
    client = cc.Client(url, "k", max_concurrency=4)
    result = client.send_events(make_events(now, n=400), now=now, batch_size=10)
    assert len(result.chunks) == 40
    assert 2 <= len(peers) <= 4  # concurrent, and never more connections than workers


def test_one_call_form_reads_the_environment(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    assert cc.send_events(events, now=now, batch_size=5).counts["sent"] == len(events)


def test_plain_http_to_a_remote_host_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="https"):
        cc.Client("http://api.example.com", "k")


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (202, b"queued", {}),
        (204, b"", {}),
        (200, b"\x00not gzip at all", {"Content-Encoding": "gzip"}),
    ],
)
def test_any_2xx_is_success_whatever_the_body(
    odd_server: Callable[..., str],
    events: pd.DataFrame,
    now: pd.Timestamp,
    status: int,
    body: bytes,
    headers: dict[str, str],
) -> None:
    url = odd_server(status, body, headers)
    result = cc.Client(url, "k").send_events(events, now=now)
    assert result.ok
    assert list(result.chunks["http_status"]) == [status]


@pytest.mark.parametrize(("status", "headers"), [(404, {}), (405, {}), (302, {"Location": "/x"})])
def test_a_wrong_endpoint_stops_the_run_without_bisecting(
    odd_server: Callable[..., str],
    events: pd.DataFrame,
    now: pd.Timestamp,
    status: int,
    headers: dict[str, str],
) -> None:
    url = odd_server(status, b"nope", headers)
    with pytest.raises(cc.TransportError, match="check base_url") as info:
        cc.Client(url, "k", max_concurrency=1).send_events(events, now=now, batch_size=2)
    assert info.value.status == status
    assert info.value.counts["failed"] == len(events)
    chunks, rows = info.value.chunks, info.value.rows
    assert chunks is not None and rows is not None  # a stopped send carries its results
    # one request went out; any already queued stop before sending
    assert (chunks["attempts"] > 0).sum() == 1
    assert (rows["status"] == "failed").all()
    assert info.value.retryable is False  # base_url must change first


def test_an_unusable_key_is_refused_before_sending_without_echoing_it() -> None:
    key = "sk_test_from_a_file_0123456789\n"
    with pytest.raises(cc.ConfigurationError, match="trailing newline") as info:
        cc.Client("http://127.0.0.1:9", key)
    assert key.strip() not in str(info.value)


def test_bisection_stops_when_its_request_budget_is_spent(make_events: MakeEvents) -> None:
    now = pd.Timestamp.now(tz="UTC")
    df = make_events(now - pd.Timedelta(days=25), n=64)
    # the API's clock runs 10 days ahead: every row is outside its window, none outside ours
    with cc.Sandbox(clock=lambda: (now + pd.Timedelta(days=10)).to_pydatetime()) as sandbox:
        client = cc.Client(sandbox.base_url, sandbox.api_key, max_split_requests=4)
        result = client.send_events(df, now=now)
        assert result.counts["rejected"] == 64
        assert len(sandbox.requests_log()) == 5  # the batch, then 4 halves within the budget
