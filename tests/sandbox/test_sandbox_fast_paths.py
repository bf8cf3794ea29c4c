"""The sandbox's fast paths decide exactly what its strict checks decide.

A batch is first put to a whole-batch proof of validity and a body to orjson (taken only
when orjson writes it back to the same bytes); whatever they do not vouch for goes through
the per-event checks and the strict parser. These tests hold the fast paths to the strict
ones: on their own (property-based), and over HTTP for the cases a compact body could slip
through (duplicate keys, numbers orjson cannot hold, re-sends inside one batch).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from churn_connector._sandbox import Sandbox
from churn_connector._sandbox._rules import (
    InvalidJSON,
    all_events_valid,
    parse_json,
    validate_batch,
    validate_event,
)
from tests.sandbox.conftest import Api, ApiFor, MakeEvent, MakeSandbox, wire_time

BASE = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)

# ----------------------------------------------------------------------- strategies


def _times(now: datetime) -> st.SearchStrategy[Any]:
    """occurred_at values around the window's edges, malformed ones and other types."""
    edges = [
        now - timedelta(days=30),
        now + timedelta(minutes=5),
        now,
        now - timedelta(days=29),
    ]
    near = st.builds(
        lambda edge, ms: wire_time(edge + timedelta(milliseconds=ms)),
        st.sampled_from(edges),
        st.integers(-2, 2),
    )
    odd = st.sampled_from(
        [
            "2024-02-29T11:00:00.000Z",  # a leap day (inside the window of BASE)
            "2023-02-29T11:00:00.000Z",  # not a calendar date
            "2024-02-30T11:00:00.000Z",
            "2024-02-20T24:00:00.000Z",
            "2024-02-20T11:60:00.000Z",
            "2024-02-20T11:00:60.000Z",
            "2024-02-20T11:00:00Z",
            "2024-02-20T11:00:00.000+00:00",
            "2024-02-20 11:00:00.000Z",
            "2024-02-20T11:00:00.000Z\n",
            "0000-02-20T11:00:00.000Z",
            "",
        ]
    )
    return st.one_of(near, odd, st.sampled_from([None, 1, 1.5, [], {}]))


def _events(now: datetime) -> st.SearchStrategy[dict[str, Any]]:
    """Events that are valid but for a few fields drawn from values the contract refuses."""
    field_values: dict[str, st.SearchStrategy[Any]] = {
        "external_user_id": st.sampled_from(["u1", "", " ", None, 7, ["u"]]),
        "event_type": st.sampled_from(
            ["page_view", "a1_b2", "Page_View", "page__view", "_x", "x_", "", "é", None, 3]
        ),
        "occurred_at": _times(now),
        "properties": st.sampled_from([{}, {"plan": "pro"}, [], None, "x"]),
        "context": st.sampled_from(
            [
                {"$message_id": "m-1"},
                {"$message_id": "m-2", "ip": "127.0.0.1"},
                {"$message_id": ""},
                {"$message_id": 5},
                {"message_id": "m"},
                {},
                [],
                None,
            ]
        ),
    }

    @st.composite
    def event(draw: st.DrawFn) -> dict[str, Any]:
        out: dict[str, Any] = {
            "external_user_id": "u1",
            "event_type": "page_view",
            "occurred_at": wire_time(now - timedelta(hours=1)),
            "properties": {},
            "context": {"$message_id": "m-0"},
        }
        for name in draw(st.sets(st.sampled_from(sorted(field_values)), max_size=3)):
            out[name] = draw(field_values[name])
        if draw(st.booleans()) and draw(st.booleans()):
            out.pop(draw(st.sampled_from(sorted(out))))
        if draw(st.booleans()) and draw(st.booleans()):
            out[draw(st.sampled_from(["timestamp", "message_id", "extra"]))] = 1
        return out

    return event()


@st.composite
def _batches(draw: st.DrawFn) -> tuple[list[Any], datetime]:
    now = BASE + timedelta(microseconds=draw(st.integers(0, 999_999)))
    events = draw(st.lists(_events(now), min_size=1, max_size=6))
    if draw(st.booleans()) and draw(st.booleans()):
        events.insert(draw(st.integers(0, len(events))), draw(st.sampled_from([None, [], "e"])))
    return events, now


# ----------------------------------------------------------------------- the batch proof


@settings(max_examples=400, deadline=None)
@given(_batches())
def test_the_batch_proof_accepts_exactly_what_the_per_event_checks_accept(
    drawn: tuple[list[Any], datetime],
) -> None:
    events, now = drawn
    per_event = [issue for event in events for issue in validate_event(event, now)]
    assert all_events_valid(events, now) == (not per_event)


def test_the_window_edges_hold_to_the_millisecond_when_the_clock_has_microseconds() -> None:
    now = BASE + timedelta(microseconds=500)  # 12:00:00.000500
    event = {
        "external_user_id": "u",
        "event_type": "x",
        "properties": {},
        "context": {"$message_id": "m"},
    }
    oldest_ok = wire_time(now - timedelta(days=30) + timedelta(microseconds=500))  # .001
    too_old = wire_time(now - timedelta(days=30))  # .000, 0.5 ms before the edge
    latest_ok = wire_time(now + timedelta(minutes=5))  # .000, 0.5 ms inside
    too_late = wire_time(now + timedelta(minutes=5, milliseconds=1))
    for when, valid in ((oldest_ok, True), (too_old, False), (latest_ok, True), (too_late, False)):
        batch = [{**event, "occurred_at": when}]
        assert all_events_valid(batch, now) is valid, when
        assert (validate_batch({"events": batch}, now) == []) is valid, when


def test_a_rejected_batch_still_names_every_bad_event() -> None:
    good = {
        "external_user_id": "u",
        "event_type": "x",
        "occurred_at": wire_time(BASE),
        "properties": {},
        "context": {"$message_id": "m"},
    }
    batch = [good, {**good, "event_type": "Bad"}, good, {**good, "occurred_at": "2024"}]
    issues = validate_batch({"events": batch}, BASE)
    assert [(i.index, i.field, i.code) for i in issues] == [
        (1, "events[1].event_type", "invalid_format"),
        (3, "events[3].occurred_at", "invalid_format"),
    ]


# ----------------------------------------------------------------------- the body parser

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json_values, st.sampled_from(["orjson", "json", "json-ascii"]))
def test_the_fast_parser_reads_what_the_strict_parser_reads(value: Any, spelling: str) -> None:
    if spelling == "orjson":
        body = orjson.dumps(value)
    else:
        body = json.dumps(value, ensure_ascii=spelling == "json-ascii").encode()
    parsed = parse_json(body)
    strict = json.loads(body)
    assert parsed.value == strict
    assert json.dumps(parsed.value, sort_keys=True) == json.dumps(strict, sort_keys=True)
    if spelling == "orjson":
        assert parsed.exact  # the package's bodies take the fast way


@pytest.mark.parametrize(
    "raw",
    [
        b'{"events":[],"events":[]}',
        b'{"events":[{"context":{"$message_id":"m","$message_id":"n"}}]}',
        b'{"a":1,"b":{"c":2,"c":2}}',
    ],
    ids=["top", "context", "nested-equal-values"],
)
def test_a_compact_body_with_a_duplicate_key_is_refused(raw: bytes) -> None:
    with pytest.raises(InvalidJSON, match="duplicate object key"):
        parse_json(raw)


def test_a_compact_duplicate_key_is_a_400_over_http(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    event = orjson.dumps(make_event(1))
    raw = b'{"events":[' + event[:-1] + b',"event_type":"login"}]}'
    response = api.post("/v1/events/batch", raw=raw)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert sandbox.events().empty


@pytest.mark.parametrize("number", [2**64 - 1, 2**64, -(2**63) - 1, 10**30, 0.1, 1e16, -0.0])
def test_numbers_are_stored_exactly_whatever_parser_read_them(
    api: Api, sandbox: Sandbox, make_event: MakeEvent, number: float
) -> None:
    assert api.batch([make_event(1, properties={"n": number})]).status_code == 200
    stored = sandbox.events()["properties"].iloc[0]["n"]
    assert (type(stored), repr(stored)) == (type(number), repr(number))
    # and a re-send of the same content is a duplicate, not a conflict
    assert api.batch([make_event(1, properties={"n": number})]).json()["duplicates"] == 1


# ----------------------------------------------------------------------- storage


def test_resends_inside_and_across_batches_are_told_apart(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    assert api.batch([make_event(1), make_event(2)]).json()["accepted"] == 2
    batch = [
        make_event(3),
        make_event(1),  # a duplicate of an earlier request
        make_event(2, event_type="other"),  # a conflict with an earlier request
        make_event(3),  # a duplicate of this request's first event
        make_event(3, event_type="other"),  # a conflict with it
        make_event(4),
        make_event(4),
    ]
    assert api.batch(batch).json() == {"accepted": 2, "duplicates": 3, "conflicts": 2}
    frame = sandbox.events()
    assert frame["message_id"].tolist() == ["msg-1", "msg-2", "msg-3", "msg-4"]
    assert frame["event_type"].tolist() == ["page_view"] * 4  # the first of each id won
    stats = sandbox.stats()
    assert (stats["stored"], stats["duplicates"], stats["conflicts"]) == (4, 3, 2)


def test_a_file_database_runs_in_wal_mode(tmp_path: Path, make_sandbox: MakeSandbox) -> None:
    db = tmp_path / "sandbox.db"
    make_sandbox(db=db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


_V1_EVENTS = """
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    message_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    properties TEXT NOT NULL,
    context TEXT NOT NULL,
    canonical TEXT NOT NULL,
    received_at TEXT NOT NULL,
    UNIQUE (app, message_id)
);
"""


def test_a_file_of_the_first_schema_is_upgraded_and_keeps_its_events(
    tmp_path: Path, make_event: MakeEvent, api_for: ApiFor, now: datetime
) -> None:
    db = tmp_path / "v1.db"
    with Sandbox(api_keys=["upgrade_key"], db=db, clock=lambda: now) as first:
        api_for(first).batch([make_event(1)], key="upgrade_key")
    first.close()
    with sqlite3.connect(db) as conn:  # rewrite the file as version 1 left it
        rows = conn.execute(
            "SELECT a.app, e.message_id, e.external_user_id, e.event_type, e.occurred_at, "
            "e.properties, e.context, e.received_at FROM events AS e "
            "JOIN apps AS a ON a.id = e.app_no"
        ).fetchall()
        conn.execute("DROP TABLE events")
        conn.execute("DROP TABLE apps")
        conn.executescript(_V1_EVENTS)
        conn.executemany(
            "INSERT INTO events (app, message_id, external_user_id, event_type, occurred_at, "
            "properties, context, canonical, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, '', ?)",
            rows,
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    with Sandbox(api_keys=["upgrade_key"], db=db, clock=lambda: now) as second:
        api = api_for(second)
        assert api.batch([make_event(1)], key="upgrade_key").json()["duplicates"] == 1
        assert api.batch([make_event(2)], key="upgrade_key").json()["accepted"] == 1
        assert second.events()["message_id"].tolist() == ["msg-1", "msg-2"]
    second.close()
