"""Deduplication by context.$message_id, conflicts, and per-key isolation."""

from __future__ import annotations

import pytest

from churn_connector._sandbox import Sandbox
from tests.sandbox.conftest import Api, ApiFor, MakeEvent, MakeSandbox


def test_identical_resend_is_a_duplicate_and_stored_once(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    assert api.batch([make_event(1)]).json() == {"accepted": 1, "duplicates": 0, "conflicts": 0}
    assert api.batch([make_event(1)]).json() == {"accepted": 0, "duplicates": 1, "conflicts": 0}
    assert len(sandbox.events()) == 1
    stats = sandbox.stats()
    assert (stats["stored"], stats["duplicates"], stats["conflicts"]) == (1, 1, 0)


def test_resend_via_track_deduplicates_against_batch(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    api.batch([make_event(1)])
    assert api.track(make_event(1)).json()["duplicates"] == 1
    assert len(sandbox.events()) == 1


def test_reused_message_id_with_other_content_is_a_conflict_and_first_wins(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    api.batch([make_event(1, event_type="login")])
    response = api.batch([make_event(1, event_type="logout")])
    assert response.json() == {"accepted": 0, "duplicates": 0, "conflicts": 1}
    assert sandbox.events()["event_type"].tolist() == ["login"]
    stats = sandbox.stats()
    assert (stats["duplicates"], stats["conflicts"]) == (0, 1)


def test_numeric_type_change_counts_as_conflict(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    api.batch([make_event(1, properties={"amount": 1})])
    response = api.batch([make_event(1, properties={"amount": 1.0})])
    assert response.json()["conflicts"] == 1


def test_key_order_does_not_make_a_conflict(api: Api, make_event: MakeEvent) -> None:
    api.batch([make_event(1, properties={"a": 1, "b": 2})])
    response = api.batch([make_event(1, properties={"b": 2, "a": 1})])
    assert response.json()["duplicates"] == 1


def test_duplicates_inside_one_batch_are_counted_like_resends(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    events = [make_event(1), make_event(1), make_event(1, event_type="other"), make_event(2)]
    assert api.batch(events).json() == {"accepted": 2, "duplicates": 1, "conflicts": 1}
    assert sandbox.events()["message_id"].tolist() == ["msg-1", "msg-2"]


def test_each_key_is_its_own_application(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(api_keys=["key_app_a", "key_app_b"])
    api = api_for(sandbox)
    assert api.batch([make_event(1)], key="key_app_a").json()["accepted"] == 1
    # the same message id under another key is a new event, not a duplicate
    assert api.batch([make_event(1)], key="key_app_b").json()["accepted"] == 1
    api.identify({"external_user_id": "only-in-b"}, key="key_app_b")
    assert len(sandbox.events("key_app_a")) == 1
    assert len(sandbox.events("key_app_b")) == 1
    assert sandbox.users("key_app_a").empty
    assert sandbox.users("key_app_b")["external_user_id"].tolist() == ["only-in-b"]
    assert sandbox.stats("key_app_a")["duplicates"] == 0
    assert sandbox.stats("key_app_b")["identifies"] == 1


def test_accessors_default_to_the_first_key(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent
) -> None:
    sandbox = make_sandbox(api_keys=["first_key", "second_key"])
    api_for(sandbox).batch([make_event(1)], key="second_key")
    assert sandbox.api_key == "first_key"
    assert sandbox.events().empty
    assert len(sandbox.events("second_key")) == 1


def test_accessors_refuse_a_foreign_key(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="not one of"):
        sandbox.events("sk_test_someone_else")


def test_stats_count_requests_by_endpoint_and_status(
    api: Api, sandbox: Sandbox, make_event: MakeEvent
) -> None:
    api.batch([make_event(1)])
    api.batch([make_event(2)])
    api.batch([make_event(3, event_type="Bad")])
    api.identify({"external_user_id": "u"})
    stats = sandbox.stats()
    assert set(stats) == {
        "requests", "stored", "duplicates", "conflicts", "identifies", "users",
        "max_concurrent_identify_same_user", "rejected",
    }  # fmt: skip
    assert stats["requests"] == {
        "POST /v1/events/batch 200": 2,
        "POST /v1/events/batch 400": 1,
        "POST /v1/identify 200": 1,
    }
    assert stats["rejected"] == 1
    assert stats["identifies"] == 1
    assert stats["stored"] == 2
