"""events_to_wire: every accepted representation gives the same exact wire object."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Unpack

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._events.stream import EventStream
from churn_connector._options.events import EventOptions
from tests.conftest import WireOptions

NOW = pd.Timestamp("2026-11-22T12:00:00Z")
WHEN = pd.Timestamp("2026-11-20T09:30:00.123987Z")
WIRE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def wire(df: pd.DataFrame, **kw: Unpack[WireOptions]) -> list[dict[str, Any]]:
    return cc.events_to_wire(df, now=NOW, **kw)


def base(**columns: object) -> pd.DataFrame:
    data: dict[str, object] = {
        "external_user_id": ["42"],
        "event_type": ["login"],
        "occurred_at": [WHEN],
    }
    data.update(columns)
    return pd.DataFrame(data)


def test_wire_object_has_exactly_the_contract_fields() -> None:
    (event,) = wire(base(**{"properties.plan": ["pro"]}))
    assert event == {
        "external_user_id": "42",
        "event_type": "login",
        "occurred_at": "2026-11-20T09:30:00.123Z",
        "properties": {"plan": "pro"},
        "context": {"$message_id": event["context"]["$message_id"]},
    }


@pytest.mark.parametrize(
    "occurred_at",
    [
        WHEN,
        WHEN.tz_convert("America/New_York"),
        WHEN.tz_convert("Asia/Kolkata").to_pydatetime(),
        "2026-11-20T09:30:00.123987Z",
        "2026-11-20T18:30:00.123987+09:00",
        "2026-11-20T04:30:00.1239-05:00",
    ],
)
def test_timestamps_in_any_zone_or_offset_become_the_same_utc_millisecond(
    occurred_at: object,
) -> None:
    df = base(
        occurred_at=pd.Series(
            [occurred_at], dtype=object if isinstance(occurred_at, dt.datetime) else None
        )
    )
    assert wire(df)[0]["occurred_at"] == "2026-11-20T09:30:00.123Z"


def test_naive_timestamps_use_the_named_zone() -> None:
    local = WHEN.tz_convert("Europe/Paris").tz_localize(None)
    assert wire(base(occurred_at=[local]), naive_timezone="Europe/Paris")[0]["occurred_at"] == (
        "2026-11-20T09:30:00.123Z"
    )


def test_timestamps_are_truncated_not_rounded() -> None:
    df = base(occurred_at=["2026-11-20T09:30:00.9999999Z"])
    assert wire(df)[0]["occurred_at"] == "2026-11-20T09:30:00.999Z"


@pytest.mark.parametrize(
    "ids",
    [
        ["42"],
        [42],
        pd.array([42], dtype="Int64"),
        pd.Series([42], dtype=object),
        np.array([42], dtype=np.uint32),
    ],
)
def test_user_ids_are_strings_of_decimal_digits(ids: object) -> None:
    assert wire(base(external_user_id=ids))[0]["external_user_id"] == "42"


def test_properties_as_dict_json_string_or_flat_columns_give_the_same_wire() -> None:
    as_dict = wire(base(properties=[{"plan": "pro", "seats": 3}]))
    as_json = wire(base(properties=['{"seats": 3, "plan": "pro"}']))
    flat = wire(base(**{"properties.plan": ["pro"], "properties.seats": [3]}))
    assert as_dict == as_json == flat


def test_missing_properties_become_an_empty_object_not_an_array() -> None:
    assert wire(base())[0]["properties"] == {}
    assert wire(base(properties=[None]))[0]["properties"] == {}


def test_null_flat_properties_are_omitted_not_sent_as_null() -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["a", "b"],
            "event_type": ["x", "x"],
            "occurred_at": [WHEN, WHEN],
            "properties.n": pd.array([7, None], dtype="Int64"),
            "properties.f": [np.nan, 1.5],
        }
    )
    assert [e["properties"] for e in wire(df)] == [{"n": 7}, {"f": 1.5}]


def test_nullable_int_property_stays_an_integer() -> None:
    df = base(**{"properties.n": pd.array([7], dtype="Int64")})
    value = wire(df)[0]["properties"]["n"]
    assert value == 7 and isinstance(value, int)


def test_datetimes_inside_properties_become_wire_timestamps() -> None:
    df = base(properties=[{"renewal": WHEN.tz_convert("Asia/Tokyo").to_pydatetime()}])
    assert wire(df)[0]["properties"]["renewal"] == "2026-11-20T09:30:00.123Z"


def test_context_columns_are_merged_into_context() -> None:
    df = base(context=[{"source": "crm"}], **{"context.batch": ["b1"]})
    context = wire(df)[0]["context"]
    assert {k: v for k, v in context.items() if k != "$message_id"} == {
        "source": "crm",
        "batch": "b1",
    }


def test_invalid_rows_are_not_transformed() -> None:
    df = pd.concat([base(), base(event_type=["BAD"])], ignore_index=True)
    assert len(wire(df)) == 1


def test_wire_bytes_sent_equal_the_wire_objects() -> None:
    df = base(properties=[{"z": 1, "a": [1, {"b": None}]}], context=[{"k": "v"}])
    batch = EventStream(df, EventOptions(now=NOW)).process(df)
    assert isinstance(batch.bodies, pa.Array)
    assert orjson.loads(batch.bodies[0].as_py()) == wire(df)[0]


def test_json_text_integers_at_the_64_bit_edges_are_sent_digit_for_digit() -> None:
    text = '{"big": 18446744073709551615, "small": -9223372036854775808, "f": 0.1}'
    df = base(properties=[text])
    bodies = EventStream(df, EventOptions(now=NOW)).process(df).bodies
    assert isinstance(bodies, pa.Array)
    body = bodies[0].as_py()
    assert b'"big":18446744073709551615' in body
    assert b'"small":-9223372036854775808' in body
    assert b'"f":0.1' in body


identifiers = st.from_regex(r"[a-z0-9]{1,8}(_[a-z0-9]{1,8}){0,2}", fullmatch=True)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
rows = st.fixed_dictionaries(
    {
        "external_user_id": st.one_of(
            st.text(min_size=1, max_size=8).filter(str.strip), st.integers(0, 10**12)
        ),
        "event_type": identifiers,
        "offset_ms": st.integers(0, 29 * 86_400_000),
        "zone": st.sampled_from(["UTC", "Europe/Paris", "America/Los_Angeles", "Asia/Kathmandu"]),
        "properties": st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    }
)


def without_null_members(value: Any) -> Any:
    """What a dict value becomes on the wire: null members omitted at any depth (a null
    inside a list keeps its place)."""
    if isinstance(value, dict):
        return {k: without_null_members(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_null_members(v) for v in value]
    return value


@settings(max_examples=80, deadline=None)
@given(st.lists(rows, min_size=1, max_size=8))
def test_transform_is_exact_for_any_valid_rows(generated: list[dict[str, Any]]) -> None:
    when = [
        (NOW - pd.Timedelta(milliseconds=r["offset_ms"])).tz_convert(r["zone"]).to_pydatetime()
        for r in generated
    ]
    df = pd.DataFrame(
        {
            "external_user_id": pd.Series([r["external_user_id"] for r in generated], dtype=object),
            "event_type": [r["event_type"] for r in generated],
            "occurred_at": pd.Series(when, dtype=object),
            "properties": pd.Series([r["properties"] for r in generated], dtype=object),
        }
    )
    report = cc.validate_events(df, now=NOW)
    assert report.ok
    out = wire(df)
    assert len(out) + report.duplicates == len(generated)
    for event in out:
        assert set(event) == {
            "external_user_id",
            "event_type",
            "occurred_at",
            "properties",
            "context",
        }
        assert WIRE_TIME.fullmatch(event["occurred_at"])
        assert isinstance(event["external_user_id"], str)
    if report.duplicates == 0:
        for event, r in zip(out, generated, strict=True):
            assert event["properties"] == without_null_members(r["properties"])
            expected = (NOW - pd.Timedelta(milliseconds=r["offset_ms"])).strftime(
                "%Y-%m-%dT%H:%M:%S.%f"
            )[:-3] + "Z"
            assert event["occurred_at"] == expected
            assert event["external_user_id"] == str(r["external_user_id"])


def test_far_future_datetimes_in_properties_are_exact() -> None:
    far = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
    assert (
        wire(base(properties=[{"until": far}]))[0]["properties"]["until"]
        == "9999-12-31T23:59:59.999Z"
    )


def test_the_second_of_two_equal_local_times_keeps_its_fold() -> None:
    paris = __import__("zoneinfo").ZoneInfo("Europe/Paris")
    first = dt.datetime(2026, 10, 25, 2, 30, tzinfo=paris, fold=0)
    second = dt.datetime(2026, 10, 25, 2, 30, tzinfo=paris, fold=1)
    df = pd.concat(
        [base(properties=[{"t": first}]), base(properties=[{"t": second}])], ignore_index=True
    )
    assert [e["properties"]["t"] for e in wire(df)] == [
        "2026-10-25T00:30:00.000Z",
        "2026-10-25T01:30:00.000Z",
    ]
