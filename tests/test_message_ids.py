"""Message ids: the canonical form is pinned by golden vectors and independent of presentation."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any, Unpack

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._values import canonical
from tests.conftest import WireOptions

UUID8 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")

LOGIN = {
    "context": {},
    "event_type": "login",
    "external_user_id": "user_1",
    "occurred_at": "2026-11-20T09:30:00.123Z",
    "properties": {},
}
PURCHASE = {
    "context": {"source": "crm"},
    "event_type": "purchase",
    "external_user_id": "42",
    "occurred_at": "2026-11-01T00:00:00.000Z",
    "properties": {"amount": 19.99, "currency": "EUR", "items": [1, 2], "note": "café ✓"},
}

# Golden vectors: these ids must never change, or re-runs after an upgrade would duplicate data.
GOLDEN = [
    (LOGIN, None, "6a2e7882-aa1c-8040-95ff-c1f146f1ba12"),
    (PURCHASE, None, "d91939c1-f68b-8697-b1d8-56799f40c5b5"),
    (PURCHASE, "shop-eu", "ca585b55-08d5-8317-84e1-98c1fd86cd41"),
]


@pytest.mark.parametrize(("event", "namespace", "expected"), GOLDEN)
def test_golden_vectors_never_change(
    event: dict[str, Any], namespace: str | None, expected: str
) -> None:
    assert cc.message_id(event, namespace=namespace) == expected


def spec_id(event: dict[str, Any], namespace: str | None = None) -> str:
    """The definition in docs/concepts/message-ids.md, written with the standard library only."""
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = b"churn-connector/message-id/v1\n" + (namespace or "").encode() + b"\n"
    digest = bytearray(hashlib.sha256(data + canonical.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x80
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


@pytest.mark.parametrize(("event", "namespace", "expected"), GOLDEN)
def test_golden_vectors_follow_the_documented_definition(
    event: dict[str, Any], namespace: str | None, expected: str
) -> None:
    assert spec_id(event, namespace) == expected


def test_ids_are_version_8_uuids() -> None:
    assert UUID8.fullmatch(cc.message_id(LOGIN))
    assert uuid.UUID(cc.message_id(LOGIN)).version == 8


def test_existing_message_id_in_the_event_is_ignored_by_the_hash() -> None:
    with_id = {**LOGIN, "context": {"$message_id": "whatever"}}
    assert cc.message_id(with_id) == cc.message_id(LOGIN)


def test_namespace_changes_the_id() -> None:
    assert cc.message_id(LOGIN, namespace="a") != cc.message_id(LOGIN, namespace="b")


def ids(df: pd.DataFrame, now: pd.Timestamp, **kw: Unpack[WireOptions]) -> list[str]:
    return [e["context"]["$message_id"] for e in cc.events_to_wire(df, now=now, **kw)]


def test_ids_do_not_depend_on_column_order(events: pd.DataFrame, now: pd.Timestamp) -> None:
    assert ids(events, now) == ids(events[events.columns[::-1]], now)


def test_ids_do_not_depend_on_index_labels(events: pd.DataFrame, now: pd.Timestamp) -> None:
    relabelled = events.set_axis([f"x{i}" for i in range(len(events))], axis=0)
    assert ids(events, now) == ids(relabelled, now)


def test_ids_do_not_depend_on_slicing(events: pd.DataFrame, now: pd.Timestamp) -> None:
    assert ids(events, now) == ids(events, now, slice_rows=3)


def test_ids_do_not_depend_on_the_dtype_of_the_same_wire_value(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    numeric = events.assign(external_user_id=range(len(events)))
    as_text = numeric.assign(external_user_id=[str(i) for i in range(len(events))])
    nullable = numeric.astype({"external_user_id": "Int64", "properties.seq": "Int64"})
    as_objects = numeric.astype(object)
    expected = ids(numeric, now)
    assert ids(as_text, now) == expected
    assert ids(nullable, now) == expected
    assert ids(as_objects, now) == expected


def test_id_columns_hash_only_the_chosen_columns(events: pd.DataFrame, now: pd.Timestamp) -> None:
    chosen = ["external_user_id", "properties.seq"]
    changed = events.assign(event_type="other_type")
    assert ids(events, now, id_columns=chosen) == ids(changed, now, id_columns=chosen)
    assert ids(events, now) != ids(changed, now)


def test_message_id_column_is_used_verbatim(events: pd.DataFrame, now: pd.Timestamp) -> None:
    given_ids = [f"order-{i}" for i in range(len(events))]
    assert ids(events.assign(message_id=given_ids), now) == given_ids


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_objects = st.dictionaries(st.text(), json_scalars, max_size=6)


@settings(max_examples=150, deadline=None)
@given(props=json_objects, context=json_objects)
def test_id_is_independent_of_key_order(props: dict[str, Any], context: dict[str, Any]) -> None:
    context.pop("$message_id", None)
    event = {**LOGIN, "properties": props, "context": context}
    reordered = {
        "properties": dict(reversed(list(props.items()))),
        "occurred_at": event["occurred_at"],
        "external_user_id": event["external_user_id"],
        "event_type": event["event_type"],
        "context": dict(reversed(list(context.items()))),
    }
    assert cc.message_id(event) == cc.message_id(reordered)


@settings(max_examples=150, deadline=None)
@given(
    props=st.dictionaries(
        st.text(),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.text(),
        ),
    )
)
def test_canonical_form_is_sorted_compact_utf8_json(props: dict[str, Any]) -> None:
    # floats are excluded here: their spelling is pinned separately below
    assert cc.message_id({**LOGIN, "properties": props}) == spec_id({**LOGIN, "properties": props})


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(1e-05, b"0.00001"), (0.1, b"0.1"), (1.0, b"1.0"), (1e16, b"1e+16"), (-0.0, b"-0.0")],
)
def test_float_spelling_is_pinned(value: float, spelled: bytes) -> None:
    # the canonical form spells floats as orjson 3 does; a change here would change ids
    assert canonical({"x": value}) == b'{"x":' + spelled + b"}"
