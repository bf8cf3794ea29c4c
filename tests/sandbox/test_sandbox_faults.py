"""Fault injection: latency, 5xx, 429 + Retry-After, dropped responses, stalls, scripts, seeds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from churn_connector._sandbox import Fault, Sandbox
from tests.sandbox.conftest import Api, ApiFor, MakeEvent, MakeSandbox


def test_latency_delays_every_request(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    api = api_for(make_sandbox(latency=0.2))
    calls: list[Callable[[], requests.Response]] = [
        lambda: api.batch([make_event()]),
        lambda: api.post("/nope", {}),
    ]
    for call in calls:
        started = time.monotonic()
        call()
        assert time.monotonic() - started >= 0.2


def test_error_rate_one_answers_5xx_and_stores_nothing(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(error_rate=1.0)
    api = api_for(sandbox)
    statuses = {api.batch([make_event(i)]).status_code for i in range(10)}
    assert statuses <= {500, 502, 503}
    assert sandbox.events().empty
    assert sandbox.stats()["stored"] == 0


def test_set_faults_changes_knobs_at_runtime(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(error_rate=1.0)
    api = api_for(sandbox)
    assert api.batch([make_event()]).status_code >= 500
    sandbox.set_faults(error_rate=0.0)
    assert api.batch([make_event()]).status_code == 200


def test_rate_limit_rate_one_answers_429_with_retry_after(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(rate_limit_rate=1.0, retry_after=2)
    response = api_for(sandbox).batch([make_event()])
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "rate_limited"
    assert sandbox.events().empty


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [
        (0.25, "0.25"),
        (1.0, "1"),
        ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT"),
    ],
)
def test_retry_after_is_rendered_as_given(
    make_sandbox: MakeSandbox,
    api_for: ApiFor,
    make_event: MakeEvent,
    retry_after: float | str,
    header: str,
) -> None:
    sandbox = make_sandbox(rate_limit_rate=1.0, retry_after=retry_after)
    assert api_for(sandbox).batch([make_event()]).headers["Retry-After"] == header


def test_drop_rate_one_stores_but_the_client_sees_a_connection_error(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(drop_rate=1.0)
    with pytest.raises(requests.ConnectionError):
        api_for(sandbox).batch([make_event(1)])
    assert sandbox.events()["message_id"].tolist() == ["msg-1"]
    log = sandbox.requests_log()
    assert log["status"].isna().tolist() == [True]
    assert log["fault"].tolist() == ["drop"]
    assert sandbox.stats()["requests"] == {"POST /v1/events/batch dropped": 1}


def test_dropped_identify_is_applied(make_sandbox: MakeSandbox, api_for: ApiFor) -> None:
    sandbox = make_sandbox(drop_rate=1.0)
    with pytest.raises(requests.ConnectionError):
        api_for(sandbox).identify({"external_user_id": "u1", "traits": {"a": 1}})
    assert sandbox.users()["traits"].tolist() == [{"a": 1}]


def test_drop_of_an_invalid_body_stores_nothing(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(drop_rate=1.0)
    with pytest.raises(requests.ConnectionError):
        api_for(sandbox).batch([make_event(event_type="Bad")])
    assert sandbox.events().empty


def test_faults_never_fake_a_401(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(error_rate=1.0)
    sandbox.script_faults([Fault("429")])
    api = api_for(sandbox)
    assert api.batch([make_event()], key=None).status_code == 401
    assert api.batch([make_event()], key="sk_test_wrong").status_code == 401
    assert sandbox.pending_faults() == (Fault("429"),)  # not consumed by the 401s


def test_scripted_faults_are_consumed_in_order_then_normal_service(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    sandbox.script_faults([Fault("5xx", status=502), Fault("429", retry_after=3), Fault("drop")])
    first, second = api.batch([make_event(1)]), api.batch([make_event(2)])
    assert (first.status_code, second.status_code) == (502, 429)
    assert second.headers["Retry-After"] == "3"
    with pytest.raises(requests.ConnectionError):
        api.batch([make_event(3)])
    assert api.batch([make_event(4)]).status_code == 200
    assert sandbox.pending_faults() == ()
    assert sandbox.events()["message_id"].tolist() == ["msg-3", "msg-4"]


def test_scripted_5xx_can_carry_retry_after(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    sandbox.script_faults([Fault("5xx", status=503, retry_after=1)])
    response = api.batch([make_event()])
    assert (response.status_code, response.headers["Retry-After"]) == (503, "1")


def test_scripted_fault_with_endpoint_waits_for_that_endpoint(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    sandbox.script_faults([Fault("5xx", status=500, endpoint="/v1/identify")])
    assert api.batch([make_event()]).status_code == 200
    assert api.identify({"external_user_id": "u1"}).status_code == 500
    assert api.identify({"external_user_id": "u1"}).status_code == 200


def test_scripted_faults_come_before_random_ones(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(error_rate=1.0)
    sandbox.script_faults([Fault("429")])
    api = api_for(sandbox)
    assert api.batch([make_event()]).status_code == 429
    assert api.batch([make_event()]).status_code in {500, 502, 503}


def test_stall_makes_the_client_time_out_then_stores(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    sandbox.script_faults([Fault("stall", seconds=0.5)])
    with pytest.raises(requests.Timeout):
        api.batch([make_event(1)], timeout=0.1)
    deadline = time.monotonic() + 5
    while sandbox.events().empty and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox.events()["message_id"].tolist() == ["msg-1"]


def test_same_seed_gives_the_same_fault_sequence(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    def run(seed: int) -> list[int]:
        sandbox = make_sandbox(error_rate=0.3, rate_limit_rate=0.3, seed=seed)
        api = api_for(sandbox)
        return [api.batch([make_event(i)]).status_code for i in range(20)]

    first = run(7)
    assert first == run(7)
    assert {200, 429} <= set(first)
    assert set(first) & {500, 502, 503}
    assert first != run(8)


@pytest.mark.parametrize(
    "options",
    [
        {"error_rate": 1.5},
        {"drop_rate": -0.1},
        {"error_rate": 0.6, "rate_limit_rate": 0.6},
        {"latency": -1},
        {"retry_after": -1},
        {"retry_after": "1\r\nX-Evil: 1"},
        {"max_body_bytes": 0},
        {"api_keys": []},
        {"api_keys": ["has space"]},
        {"api_keys": ["same", "same"]},
    ],
)
def test_invalid_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (each case has its own message)
        Sandbox(**options)


def test_set_faults_refuses_unknown_knobs(sandbox: Sandbox) -> None:
    with pytest.raises(TypeError, match="unknown fault setting"):
        sandbox.set_faults(timeout=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "boom"},
        {"kind": "5xx", "status": 404},
        {"kind": "drop", "endpoint": "v1/x"},
        {"kind": "stall", "seconds": -1},
    ],
)
def test_invalid_faults_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        Fault(**kwargs)
