"""Event endpoints: the event object (2.1), batch limits (4, 8), whole-batch rejection."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from churn_connector._sandbox import Sandbox
from tests.sandbox.conftest import Api, ApiFor, FmtTime, MakeEvent, MakeSandbox

MS = timedelta(milliseconds=1)


def test_valid_batch_is_stored_exactly_and_acknowledged(
    api: Api, sandbox: Sandbox, make_event: MakeEvent, now: datetime
) -> None:
    events = [make_event(0), make_event(1, event_type="login", properties={})]
    response = api.batch(events)
    assert response.status_code == 200
    assert response.json() == {"accepted": 2, "duplicates": 0, "conflicts": 0}
    stored = sandbox.events()
    assert list(stored.columns) == [
        "external_user_id",
        "event_type",
        "occurred_at",
        "properties",
        "context",
        "message_id",
        "received_at",
    ]
    assert stored["message_id"].tolist() == ["msg-0", "msg-1"]
    assert stored["event_type"].tolist() == ["page_view", "login"]
    assert stored["occurred_at"].tolist() == [events[0]["occurred_at"]] * 2
    assert stored["properties"].tolist() == [{"plan": "pro", "n": 0}, {}]
    assert stored["context"].tolist() == [{"$message_id": "msg-0"}, {"$message_id": "msg-1"}]
    assert stored["received_at"].tolist() == [pd.Timestamp(now)] * 2


def test_track_accepts_one_bare_event(api: Api, sandbox: Sandbox, make_event: MakeEvent) -> None:
    response = api.track(make_event(7))
    assert response.status_code == 200
    assert response.json()["accepted"] == 1
    assert sandbox.events()["message_id"].tolist() == ["msg-7"]


def test_track_rejects_an_event_wrapped_like_a_batch(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    response = api.post("/v1/events/track", {"events": [make_event()]})
    assert (None, "events", "unknown_field") in api.problems(response)
    assert sandbox.events().empty


def test_track_problems_have_no_index(api: Api, make_event: MakeEvent) -> None:
    response = api.track(make_event(event_type="Bad"))
    assert api.problems(response) == {(None, "event_type", "invalid_format")}


def test_batch_of_500_events_is_accepted(api: Api, sandbox: Sandbox, make_event: MakeEvent) -> None:
    response = api.batch([make_event(i) for i in range(500)])
    assert response.status_code == 200
    assert response.json()["accepted"] == 500
    assert len(sandbox.events()) == 500


def test_batch_of_501_events_is_rejected_and_stores_nothing(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    response = api.batch([make_event(i) for i in range(501)])
    assert api.problems(response) == {(None, "events", "too_many_events")}
    assert sandbox.events().empty


def test_empty_batch_is_rejected(api: Api) -> None:
    assert api.problems(api.batch([])) == {(None, "events", "too_few_events")}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({}, (None, "events", "missing_field")),
        ({"events": {}}, (None, "events", "wrong_type")),
        ({"events": None}, (None, "events", "wrong_type")),
        ([], (None, None, "wrong_type")),
        ({"events": ["x"]}, (0, "events[0]", "wrong_type")),
    ],
)
def test_batch_body_shape_is_checked(
    api: Api, body: object, problem: tuple[int | None, str | None, str]
) -> None:
    response = api.post("/v1/events/batch", body)
    assert problem in api.problems(response)


def test_unknown_key_next_to_events_is_rejected(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    response = api.post("/v1/events/batch", {"events": [make_event()], "sent_at": "now"})
    assert api.problems(response) == {(None, "sent_at", "unknown_field")}
    assert sandbox.events().empty


def test_one_bad_event_rejects_the_whole_batch_and_every_problem_is_listed(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    events = [make_event(i) for i in range(5)]
    events[1]["event_type"] = "Page View"
    events[3]["occurred_at"] = "2024-06-01T11:00:00Z"
    events[3]["extra"] = 1
    response = api.batch(events)
    body = response.json()
    assert body["error"]["code"] == "validation_failed"
    assert api.problems(response) == {
        (1, "events[1].event_type", "invalid_format"),
        (3, "events[3].occurred_at", "invalid_format"),
        (3, "events[3].extra", "unknown_field"),
    }
    assert sandbox.events().empty


def test_error_body_has_code_message_and_details(api: Api, make_event: MakeEvent) -> None:
    body = api.batch([make_event(event_type="X")]).json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    (detail,) = body["error"]["details"]
    assert set(detail) >= {"index", "field", "message"}
    assert detail["message"]


# --------------------------------------------------------------------------- event_type


@pytest.mark.parametrize("event_type", ["login", "page_view", "a1_b2_c3", "3d_secure", "x"])
def test_snake_case_event_types_are_accepted(
    api: Api, make_event: MakeEvent, event_type: str
) -> None:
    assert api.batch([make_event(event_type=event_type)]).status_code == 200


@pytest.mark.parametrize(
    "event_type",
    [
        "abc\n",
        "Login",
        "page-view",
        "page view",
        "page__view",
        "_login",
        "login_",
        "",
        "päge",
        "login\t",
        " login",
    ],
)
def test_event_types_not_fully_matching_the_pattern_are_rejected(
    api: Api, make_event: MakeEvent, event_type: str
) -> None:
    response = api.batch([make_event(event_type=event_type)])
    assert api.problems(response) == {(0, "events[0].event_type", "invalid_format")}


@pytest.mark.parametrize("event_type", [True, 5, None, ["login"]])
def test_non_string_event_type_is_rejected(
    api: Api, make_event: MakeEvent, event_type: object
) -> None:
    response = api.batch([make_event(event_type=event_type)])
    assert api.problems(response) == {(0, "events[0].event_type", "wrong_type")}


# --------------------------------------------------------------------------- occurred_at


@pytest.mark.parametrize(
    "offset",
    [timedelta(days=-30), timedelta(minutes=5), timedelta(0), timedelta(days=-29, hours=-23)],
    ids=["exactly-30-days-ago", "exactly-5-minutes-ahead", "now", "inside"],
)
def test_occurred_at_inside_the_window_is_accepted(
    api: Api, make_event: MakeEvent, now: datetime, fmt_time: FmtTime, offset: timedelta
) -> None:
    response = api.batch([make_event(occurred_at=fmt_time(now + offset))])
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "offset",
    [timedelta(days=-30) - MS, timedelta(minutes=5) + MS, timedelta(days=-400)],
    ids=["1ms-older-than-30-days", "1ms-beyond-5-minutes", "long-ago"],
)
def test_occurred_at_outside_the_window_is_rejected(
    api: Api,
    sandbox: Sandbox,
    make_event: MakeEvent,
    now: datetime,
    fmt_time: FmtTime,
    offset: timedelta,
) -> None:
    response = api.batch([make_event(occurred_at=fmt_time(now + offset))])
    assert api.problems(response) == {(0, "events[0].occurred_at", "out_of_window")}
    assert sandbox.events().empty


def test_window_follows_the_sandbox_clock(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent, now: datetime
) -> None:
    later = make_sandbox(clock=lambda: now + timedelta(days=31))
    response = api_for(later).batch([make_event()])  # one hour before NOW: now too old
    assert response.json()["error"]["details"][0]["code"] == "out_of_window"


@pytest.mark.parametrize(
    "value",
    [
        "2024-06-01T11:00:00Z",  # no milliseconds
        "2024-06-01T11:00:00.000+00:00",  # offset instead of Z
        "2024-06-01T11:00:00.000000Z",  # microseconds
        "2024-06-01T11:00:00.00Z",  # two fractional digits
        "2024-06-01T11:00:00.000z",  # lowercase z
        "2024-06-01t11:00:00.000Z",  # lowercase t
        "2024-06-01 11:00:00.000Z",  # space separator
        "2024-06-01",  # date only
        "2024-06-01T11:00:00.000Z\n",  # trailing newline
        "2024-02-30T11:00:00.000Z",  # not a calendar date
        "2024-06-01T24:00:00.000Z",  # hour 24
        "2024-06-01T11:00:60.000Z",  # leap second
        "٢٠٢٤-06-01T11:00:00.000Z",  # non-ASCII digits
    ],
)
def test_occurred_at_in_another_format_is_rejected(
    api: Api, make_event: MakeEvent, value: str
) -> None:
    response = api.batch([make_event(occurred_at=value)])
    assert api.problems(response) == {(0, "events[0].occurred_at", "invalid_format")}


@pytest.mark.parametrize("value", [1717236000000, None, True])
def test_occurred_at_must_be_a_string(api: Api, make_event: MakeEvent, value: object) -> None:
    response = api.batch([make_event(occurred_at=value)])
    assert api.problems(response) == {(0, "events[0].occurred_at", "wrong_type")}


# --------------------------------------------------------------------------- other fields


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"properties": []}, ("events[0].properties", "wrong_type")),
        ({"properties": None}, ("events[0].properties", "wrong_type")),
        ({"properties": "{}"}, ("events[0].properties", "wrong_type")),
        ({"context": []}, ("events[0].context", "wrong_type")),
        ({"context": {}}, ("events[0].context.$message_id", "missing_field")),
        ({"context": {"message_id": "m"}}, ("events[0].context.$message_id", "missing_field")),
        ({"context": {"$message_id": ""}}, ("events[0].context.$message_id", "empty")),
        ({"context": {"$message_id": 42}}, ("events[0].context.$message_id", "wrong_type")),
        ({"external_user_id": ""}, ("events[0].external_user_id", "empty")),
        ({"external_user_id": 12345}, ("events[0].external_user_id", "wrong_type")),
        ({"external_user_id": True}, ("events[0].external_user_id", "wrong_type")),
        ({"message_id": "m"}, ("events[0].message_id", "unknown_field")),
        ({"userId": "u"}, ("events[0].userId", "unknown_field")),
    ],
)
def test_event_field_rules(
    api: Api,
    sandbox: Sandbox,
    make_event: MakeEvent,
    overrides: dict[str, Any],
    problem: tuple[str, str],
) -> None:
    response = api.batch([make_event(**overrides)])
    assert api.problems(response) == {(0, *problem)}
    assert sandbox.events().empty


@pytest.mark.parametrize(
    "field", ["external_user_id", "event_type", "occurred_at", "properties", "context"]
)
def test_every_event_field_is_required(api: Api, make_event: MakeEvent, field: str) -> None:
    ev = make_event()
    del ev[field]
    assert (0, f"events[0].{field}", "missing_field") in api.problems(api.batch([ev]))


def test_properties_and_context_are_free_form(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    nested: dict[str, Any] = {"a": {"b": [1, 2.5, None, True]}, "Weird Key": "ü"}
    ev = make_event(properties=nested, context={"$message_id": "m", "ip": "1.2.3.4"})
    assert api.batch([ev]).status_code == 200
    row = sandbox.events().iloc[0]
    assert row["properties"] == nested
    assert row["context"] == {"$message_id": "m", "ip": "1.2.3.4"}
