"""POST /v1/identify: the identify object (2.2), channel items (2.3), merging and idempotence."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import pytest
import requests

from churn_connector._sandbox import Sandbox
from tests.sandbox.conftest import Api, MakeSandbox


def user(
    sandbox: Sandbox, external_user_id: str = "u1", api_key: str | None = None
) -> dict[Hashable, Any]:
    users = sandbox.users(api_key)
    rows = users[users["external_user_id"] == external_user_id].to_dict("records")
    assert len(rows) == 1, users
    return rows[0]


def test_minimal_identify_creates_a_user(api: Api, sandbox: Sandbox) -> None:
    response = api.identify({"external_user_id": "u1"})
    assert response.status_code == 200
    assert response.json() == {"ok": True, "changed": True}
    assert list(sandbox.users().columns) == [
        "external_user_id",
        "traits",
        "preferred_channel",
        "channels",
    ]
    assert user(sandbox) == {
        "external_user_id": "u1",
        "traits": {},
        "preferred_channel": None,
        "channels": [],
    }


def test_full_identify_is_stored(api: Api, sandbox: Sandbox) -> None:
    body = {
        "external_user_id": "u1",
        "traits": {"plan": "pro", "name": "Ada"},
        "preferred_channel": "sms",
        "channels": [
            {"channel": "email", "address": "ada@example.com", "opted_in": True, "verified": True},
            {"channel": "sms", "address": "+4915112345678", "opted_in": False},
            {"channel": "push", "address": "fcm-token-123"},
        ],
    }
    assert api.identify(body).status_code == 200
    assert user(sandbox) == {
        "external_user_id": "u1",
        "traits": {"plan": "pro", "name": "Ada"},
        "preferred_channel": "sms",
        "channels": [
            {"channel": "email", "address": "ada@example.com", "opted_in": True, "verified": True},
            {"channel": "sms", "address": "+4915112345678", "opted_in": False},
            {"channel": "push", "address": "fcm-token-123", "opted_in": True},
        ],
    }


def test_traits_are_merged_shallowly_later_call_wins(api: Api, sandbox: Sandbox) -> None:
    first = {"plan": "free", "name": "Ada", "address": {"city": "A", "zip": "1"}}
    api.identify({"external_user_id": "u1", "traits": first})
    api.identify({"external_user_id": "u1", "traits": {"plan": "pro", "address": {"city": "B"}}})
    assert user(sandbox)["traits"] == {"plan": "pro", "name": "Ada", "address": {"city": "B"}}


def test_identify_without_traits_keeps_stored_traits(api: Api, sandbox: Sandbox) -> None:
    api.identify({"external_user_id": "u1", "traits": {"plan": "pro"}})
    api.identify({"external_user_id": "u1"})
    assert user(sandbox)["traits"] == {"plan": "pro"}


def test_preferred_channel_is_set_when_given_and_kept_when_absent(
    api: Api, sandbox: Sandbox
) -> None:
    api.identify({"external_user_id": "u1", "preferred_channel": "email"})
    api.identify({"external_user_id": "u1", "traits": {"x": 1}})
    assert user(sandbox)["preferred_channel"] == "email"
    api.identify({"external_user_id": "u1", "preferred_channel": "push"})
    assert user(sandbox)["preferred_channel"] == "push"


def test_channel_items_are_upserted_by_channel_and_address(api: Api, sandbox: Sandbox) -> None:
    email = {"channel": "email", "address": "a@example.com"}
    api.identify({"external_user_id": "u1", "channels": [email]})
    api.identify({"external_user_id": "u1", "channels": [{**email, "opted_in": False}]})
    assert user(sandbox)["channels"] == [{**email, "opted_in": False}]
    # absent opted_in keeps the stored opt-out; verified appears once sent
    api.identify({"external_user_id": "u1", "channels": [{**email, "verified": True}]})
    assert user(sandbox)["channels"] == [{**email, "opted_in": False, "verified": True}]


def test_a_new_address_adds_a_second_item(api: Api, sandbox: Sandbox) -> None:
    api.identify({"external_user_id": "u1", **item("email", "a@x.io")})
    api.identify({"external_user_id": "u1", **item("email", "b@x.io")})
    assert [c["address"] for c in user(sandbox)["channels"]] == ["a@x.io", "b@x.io"]


def test_opted_in_defaults_to_true_on_first_insert(api: Api, sandbox: Sandbox) -> None:
    api.identify({"external_user_id": "u1", "channels": [{"channel": "push", "address": "t"}]})
    assert user(sandbox)["channels"] == [{"channel": "push", "address": "t", "opted_in": True}]


def test_same_identify_twice_changes_nothing(api: Api, sandbox: Sandbox) -> None:
    body = {
        "external_user_id": "u1",
        "traits": {"plan": "pro"},
        "preferred_channel": "email",
        "channels": [{"channel": "email", "address": "a@example.com", "opted_in": True}],
    }
    assert api.identify(body).json()["changed"] is True
    before = sandbox.users().to_dict("records")
    assert api.identify(body).json() == {"ok": True, "changed": False}
    assert sandbox.users().to_dict("records") == before
    assert sandbox.stats()["identifies"] == 2


def test_identify_log_records_each_accepted_call_in_order(api: Api, sandbox: Sandbox) -> None:
    api.identify({"external_user_id": "u1", "traits": {"a": 1}})
    api.identify({"external_user_id": "u1", "email": "x@y.z"})  # rejected: not logged
    api.identify({"external_user_id": "u2"})
    log = sandbox.identify_log()
    assert list(log.columns) == ["seq", "external_user_id", "body", "started_at", "finished_at"]
    assert log["external_user_id"].tolist() == ["u1", "u2"]
    assert log["body"].tolist()[0] == {"external_user_id": "u1", "traits": {"a": 1}}
    assert (log["started_at"] <= log["finished_at"]).all()


# --------------------------------------------------------------------------- rejections


def item(channel: str, address: Any, **extra: Any) -> dict[str, Any]:
    """An identify body fragment with one channel item."""
    return {"channels": [{"channel": channel, "address": address, **extra}]}


TYPE_ITEM = {"channels": [{"type": "email", "address": "a@b.co"}]}
ADDR = "channels[0].address"


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        (TYPE_ITEM, "channels[0].type", "unknown_field"),
        (TYPE_ITEM, "channels[0].channel", "missing_field"),
        ({"email": "a@b.co"}, "email", "unknown_field"),
        ({"phone": "+4915112345678"}, "phone", "unknown_field"),
        ({"pushToken": "tok"}, "pushToken", "unknown_field"),
        ({"name": "Ada"}, "name", "unknown_field"),
        (item("email", "not-an-email"), ADDR, "invalid_format"),
        (item("email", "a@b"), ADDR, "invalid_format"),
        (item("email", "a b@c.de"), ADDR, "invalid_format"),
        (item("sms", "015112345678"), ADDR, "invalid_format"),
        (item("sms", "+49 151 12345678"), ADDR, "invalid_format"),
        (item("sms", "+0123456"), ADDR, "invalid_format"),
        (item("sms", "+1234567890123456"), ADDR, "invalid_format"),
        (item("push", ""), ADDR, "empty"),
        (item("push", 5), ADDR, "wrong_type"),
        ({"channels": [{"channel": "push"}]}, ADDR, "missing_field"),
        (item("fax", "1"), "channels[0].channel", "invalid_value"),
        (item("email", "a@b.co", opted_in="true"), "channels[0].opted_in", "wrong_type"),
        (item("email", "a@b.co", opted_in=1), "channels[0].opted_in", "wrong_type"),
        (item("email", "a@b.co", verified="yes"), "channels[0].verified", "wrong_type"),
        ({"channels": ["a@b.co"]}, "channels[0]", "wrong_type"),
        ({"channels": {"channel": "email"}}, "channels", "wrong_type"),
        ({"preferred_channel": "whatsapp"}, "preferred_channel", "invalid_value"),
        ({"preferred_channel": "Email"}, "preferred_channel", "invalid_value"),
        ({"preferred_channel": None}, "preferred_channel", "invalid_value"),
        ({"traits": []}, "traits", "wrong_type"),
        ({"traits": None}, "traits", "wrong_type"),
        ({"external_user_id": ""}, "external_user_id", "empty"),
        ({"external_user_id": 42}, "external_user_id", "wrong_type"),
    ],
)
def test_identify_rules_reject(
    api: Api, sandbox: Sandbox, body: dict[str, Any], field: str, code: str
) -> None:
    response = api.identify({"external_user_id": "u1", **body})
    assert (None, field, code) in api.problems(response)
    assert sandbox.users().empty


def test_identify_without_user_id_is_rejected(api: Api) -> None:
    response = api.identify({"traits": {"plan": "pro"}})
    assert api.problems(response) == {(None, "external_user_id", "missing_field")}


def test_every_bad_channel_item_is_listed(api: Api) -> None:
    response = api.identify(
        {
            "external_user_id": "u1",
            "channels": [
                {"channel": "email", "address": "ok@example.com"},
                {"type": "sms", "address": "+4915112345678"},
                {"channel": "sms", "address": "12"},
            ],
        }
    )
    expected = {"channels[1].type", "channels[1].channel", "channels[2].address"}
    assert api.fields(response) == expected


@pytest.mark.parametrize(
    ("channel", "address"),
    [
        ("email", "first.last+tag@sub.example.co.uk"),
        ("sms", "+15550100"),
        ("sms", "+123456789012345"),
        ("push", "ExponentPushToken[xxxx]"),
    ],
)
def test_valid_addresses_are_accepted(api: Api, channel: str, address: str) -> None:
    body = {"external_user_id": "u1", "channels": [{"channel": channel, "address": address}]}
    assert api.identify(body).status_code == 200


# --------------------------------------------------------------------------- concurrency


def _identify_concurrently(sandbox: Sandbox, users: list[str]) -> list[int]:
    statuses: list[int] = []
    barrier = threading.Barrier(len(users), timeout=5)

    def call(uid: str) -> None:
        with requests.Session() as s:
            barrier.wait()
            response = s.post(
                sandbox.base_url + "/v1/identify",
                json={"external_user_id": uid},
                headers={"X-API-Key": sandbox.api_key},
                timeout=5,
            )
            statuses.append(response.status_code)

    threads = [threading.Thread(target=call, args=(uid,)) for uid in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return statuses


def test_concurrent_identifies_for_one_user_are_detected(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(latency=0.3)
    assert _identify_concurrently(sandbox, ["same", "same"]) == [200, 200]
    assert sandbox.stats()["max_concurrent_identify_same_user"] == 2


def test_concurrent_identifies_for_different_users_are_fine(make_sandbox: MakeSandbox) -> None:
    sandbox = make_sandbox(latency=0.3)
    assert _identify_concurrently(sandbox, ["a", "b", "c"]) == [200, 200, 200]
    assert sandbox.stats()["max_concurrent_identify_same_user"] == 1


def test_sequential_identifies_report_concurrency_one(api: Api, sandbox: Sandbox) -> None:
    assert sandbox.stats()["max_concurrent_identify_same_user"] == 0
    api.identify({"external_user_id": "u1"})
    api.identify({"external_user_id": "u1"})
    assert sandbox.stats()["max_concurrent_identify_same_user"] == 1
