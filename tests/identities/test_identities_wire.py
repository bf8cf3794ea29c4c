"""identities_to_wire: exactly the contract's identify body (2.2, 2.3) for every valid row."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from churn_connector import identities_to_wire, validate_identities
from churn_connector._identities.stream import IdentityStream
from churn_connector._options.identities import IdentityOptions
from churn_connector._slices import batches
from churn_connector._wire.identities import body_bytes

WHEN = pd.Timestamp("2026-11-20T09:30:00.123987Z")
BODY_KEYS = {"external_user_id", "traits", "preferred_channel", "channels"}
ITEM_KEYS = {"channel", "address", "opted_in", "verified"}
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
E164 = re.compile(r"\+[1-9]\d{1,14}")


def body_of(**columns: object) -> dict[str, Any]:
    data = {
        "external_user_id": ["u1"],
        **{k: pd.Series([v], dtype=object) for k, v in columns.items()},
    }
    (body,) = identities_to_wire(pd.DataFrame(data))
    return body


def test_full_row_becomes_exactly_the_contract_body() -> None:
    body = body_of(
        traits={"plan": "pro"},
        preferred_channel="email",
        email="ada@example.com",
        email_verified=True,
        phone="+14155550100",
        sms_opted_in=False,
        pushToken="tok",
        channels=[{"channel": "push", "address": "tok-2", "verified": False}],
        **{"traits.seats": 3},
    )
    assert body == {
        "external_user_id": "u1",
        "traits": {"plan": "pro", "seats": 3},
        "preferred_channel": "email",
        "channels": [
            {"channel": "push", "address": "tok-2", "verified": False},
            {"channel": "email", "address": "ada@example.com", "opted_in": True, "verified": True},
            {"channel": "sms", "address": "+14155550100", "opted_in": False},
            {"channel": "push", "address": "tok", "opted_in": True},
        ],
    }


def test_only_the_id_is_sent_when_nothing_else_is_set() -> None:
    body = body_of(traits=None, preferred_channel=None, email=None, channels=None)
    assert body == {"external_user_id": "u1"}


@pytest.mark.parametrize("traits", [{}, "{}", None])
def test_traits_are_omitted_when_empty(traits: object) -> None:
    assert "traits" not in body_of(traits=traits, **{"traits.plan": None})


def test_null_flat_traits_are_omitted_not_sent_as_null() -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["a", "b"],
            "traits.n": pd.array([7, None], dtype="Int64"),
            "traits.f": [np.nan, 1.5],
        }
    )
    assert [b["traits"] for b in identities_to_wire(df)] == [{"n": 7}, {"f": 1.5}]


def test_traits_object_and_flat_columns_are_merged() -> None:
    assert body_of(traits='{"plan": "pro"}', **{"traits.seats": 2})["traits"] == {
        "plan": "pro",
        "seats": 2,
    }


def test_datetimes_in_traits_become_wire_timestamps() -> None:
    df = pd.DataFrame({"external_user_id": ["u"], "traits.signed_up": [WHEN]})
    assert identities_to_wire(df)[0]["traits"] == {"signed_up": "2026-11-20T09:30:00.123Z"}


def test_preferred_channel_is_omitted_when_null() -> None:
    df = pd.DataFrame({"external_user_id": ["a", "b"], "preferred_channel": ["sms", None]})
    assert [b.get("preferred_channel") for b in identities_to_wire(df)] == ["sms", None]
    assert "preferred_channel" not in identities_to_wire(df)[1]


@pytest.mark.parametrize(
    "ids", [[42], pd.array([42], dtype="Int64"), np.array([42], dtype=np.uint32)]
)
def test_integer_user_ids_are_sent_as_decimal_digits(ids: object) -> None:
    df = pd.DataFrame({"external_user_id": ids})
    assert identities_to_wire(df)[0]["external_user_id"] == "42"


def test_convenience_item_is_opted_in_by_default() -> None:
    assert body_of(email="a@b.co")["channels"] == [
        {"channel": "email", "address": "a@b.co", "opted_in": True}
    ]


def test_opt_out_false_is_recorded() -> None:
    item = body_of(push_token="t", push_opted_in=False)["channels"][0]
    assert item == {"channel": "push", "address": "t", "opted_in": False}


@pytest.mark.parametrize(("verified", "expected"), [(True, True), (False, None), (None, None)])
def test_verified_is_sent_only_when_true(verified: object, expected: object) -> None:
    item = body_of(phone="+14155550100", sms_verified=verified)["channels"][0]
    assert item.get("verified") == expected
    assert ("verified" in item) is (expected is True)


@pytest.mark.parametrize(
    ("blank_consent", "blank_row"), [("omit_channel", None), ("opted_in", (True, True))]
)
def test_nullable_boolean_flags_follow_the_same_rules(
    blank_consent: str, blank_row: tuple[bool, bool] | None
) -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["a", "b", "c"],
            "email": ["a@b.co", "b@b.co", "c@b.co"],
            "email_opted_in": pd.array([False, None, True], dtype="boolean"),
            "email_verified": pd.array([None, True, False], dtype="boolean"),
        }
    )
    bodies = identities_to_wire(df, blank_consent=blank_consent)  # type: ignore[arg-type]
    items = [b["channels"][0] if "channels" in b else None for b in bodies]
    assert [None if i is None else (i["opted_in"], i.get("verified")) for i in items] == [
        (False, None),
        blank_row,  # the blank consent cell: the caller's policy, never a guess
        (True, None),
    ]


@pytest.mark.parametrize("column", ["push_token", "pushToken"])
def test_push_token_and_its_alias_become_a_push_item(column: str) -> None:
    assert body_of(**{column: "tok"})["channels"] == [
        {"channel": "push", "address": "tok", "opted_in": True}
    ]


def test_convenience_inputs_never_reach_the_wire() -> None:
    body = body_of(email="a@b.co", phone="+14155550100", pushToken="t", email_opted_in=True)
    wire = orjson.dumps(body)
    for key in (b'"email":', b'"phone"', b'"pushToken"', b'"push_token"', b'"type"', b"_opted_in"):
        assert key not in wire


def test_explicit_channels_come_first_as_given() -> None:
    explicit = [
        {"channel": "sms", "address": "+14155550101"},
        {"verified": True, "address": "x@y.co", "channel": "email", "opted_in": False},
    ]
    channels = body_of(channels=explicit, email="a@b.co")["channels"]
    assert channels[:2] == explicit
    assert list(channels[1]) == ["verified", "address", "channel", "opted_in"]
    assert channels[2]["address"] == "a@b.co"


def test_arrow_struct_items_lose_their_null_fields_and_numpy_types() -> None:
    cell = np.array(
        [
            {
                "channel": np.str_("email"),
                "address": "a@b.co",
                "opted_in": np.bool_(False),
                "verified": None,
            }
        ],
        dtype=object,
    )
    (item,) = body_of(channels=cell)["channels"]
    assert item == {"channel": "email", "address": "a@b.co", "opted_in": False}
    assert type(item["opted_in"]) is bool and type(item["channel"]) is str


def test_phone_region_normalises_local_numbers_to_e164() -> None:
    df = pd.DataFrame({"external_user_id": ["u"], "phone": ["(415) 555-0100"]})
    (body,) = identities_to_wire(df, phone_region="US")
    assert body["channels"] == [{"channel": "sms", "address": "+14155550100", "opted_in": True}]


def test_unusable_phone_with_a_region_keeps_the_row_off_the_wire() -> None:
    df = pd.DataFrame({"external_user_id": ["a", "b"], "phone": ["(415) 555-0100", "555"]})
    assert [b["external_user_id"] for b in identities_to_wire(df, phone_region="US")] == ["a"]


def test_invalid_rows_are_not_transformed() -> None:
    df = pd.DataFrame({"external_user_id": ["a", "b"], "preferred_channel": ["sms", "fax"]})
    assert [b["external_user_id"] for b in identities_to_wire(df)] == ["a"]


def test_bytes_sent_are_the_canonical_json_of_the_body() -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["u"],
            "traits": [{"z": 1, "a": [1, {"b": None}]}],
            "email": ["a@b.co"],
        }
    )
    stream = IdentityStream(df, IdentityOptions())
    batch = stream.process(df)
    ((position, user, raw),) = zip(batch.positions, batch.keys, batch.bodies, strict=True)
    body = identities_to_wire(df)[0]
    assert (position, user) == (0, "u")
    assert raw == body_bytes(body) == orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    assert orjson.loads(raw) == body


def test_stream_returns_rows_to_send_in_row_order_with_positions() -> None:
    df = pd.DataFrame({"external_user_id": ["a", "b", "c"], "email": ["a@b.co", "bad", "c@b.co"]})
    stream = IdentityStream(df, IdentityOptions(slice_rows=2))
    sent = [(p, u) for b in batches(stream) for p, u in zip(b.positions, b.keys, strict=True)]
    assert sent == [(0, "a"), (2, "c")]
    assert list(stream.book.frame()["status"]) == ["pending", "invalid", "pending"]


# -- property: for any valid rows, only contract fields and valid channel items -------------
tokens = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Z", "C"]), min_size=1, max_size=12
)
emails = st.builds(
    "{}@{}.{}".format,
    st.from_regex(r"[a-z0-9._+-]{1,8}", fullmatch=True),
    st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True),
    st.sampled_from(["com", "org", "co"]),
)
phones = st.from_regex(r"\+[1-9][0-9]{1,14}", fullmatch=True)
flags = st.sampled_from([True, False, None])
addressed = st.one_of(
    st.fixed_dictionaries({"channel": st.just("email"), "address": emails}),
    st.fixed_dictionaries({"channel": st.just("sms"), "address": phones}),
    st.fixed_dictionaries({"channel": st.just("push"), "address": tokens}),
)
optional_flags = st.fixed_dictionaries(
    {}, optional={"opted_in": st.booleans(), "verified": st.booleans()}
)
items = st.builds(lambda item, extra: {**item, **extra}, addressed, optional_flags)
trait_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)
)
rows = st.fixed_dictionaries(
    {
        "external_user_id": st.one_of(
            st.text(min_size=1, max_size=8).filter(str.strip), st.integers(0, 10**12)
        ),
        "traits": st.one_of(
            st.none(), st.dictionaries(st.text(max_size=5), trait_values, max_size=3)
        ),
        "preferred_channel": st.sampled_from(["email", "sms", "push", None]),
        "email": st.one_of(st.none(), emails),
        "phone": st.one_of(st.none(), phones),
        "push_token": st.one_of(st.none(), tokens),
        "channels": st.one_of(st.none(), st.lists(items, max_size=3)),
        **{f"{c}_{f}": flags for c in ("email", "sms", "push") for f in ("opted_in", "verified")},
    }
)


def _distinct_items(row: dict[str, Any]) -> bool:
    pairs = [(i["channel"], i["address"]) for i in row["channels"] or []]
    pairs += [
        (c, row[k])
        for c, k in (("email", "email"), ("sms", "phone"), ("push", "push_token"))
        if row[k] is not None
    ]
    return len(pairs) == len(set(pairs))


def _valid_item(item: dict[str, Any]) -> bool:
    address = item["address"]
    if not isinstance(address, str) or not set(item) <= ITEM_KEYS:
        return False
    rule: dict[str, Callable[[str], object]] = {
        "email": EMAIL.fullmatch,
        "sms": E164.fullmatch,
        "push": lambda a: a.strip(),
    }
    flags_ok = all(type(item[k]) is bool for k in ("opted_in", "verified") if k in item)
    return item["channel"] in rule and bool(rule[item["channel"]](address)) and flags_ok


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.lists(
        rows.filter(_distinct_items),
        min_size=1,
        max_size=6,
        unique_by=lambda r: str(r["external_user_id"]),
    )
)
def test_wire_bodies_hold_only_contract_fields_and_valid_items(
    generated: list[dict[str, Any]],
) -> None:
    df = pd.DataFrame({k: pd.Series([r[k] for r in generated], dtype=object) for k in generated[0]})
    # blank consent cells are generated too: sent opted in on request (tests/validate/test_consent.py)
    assert validate_identities(df, blank_consent="opted_in").ok
    bodies = identities_to_wire(df, blank_consent="opted_in")
    assert len(bodies) == len(generated)
    for body, row in zip(bodies, generated, strict=True):
        assert set(body) <= BODY_KEYS
        assert body["external_user_id"] == str(row["external_user_id"])
        assert body.get("traits", None) != {}
        assert "traits" in body or not {
            k: v for k, v in (row["traits"] or {}).items() if v is not None
        }
        channels = body.get("channels", [])
        assert channels != [] or "channels" not in body
        assert all(_valid_item(item) for item in channels)
        assert len({(i["channel"], i["address"]) for i in channels}) == len(channels)
