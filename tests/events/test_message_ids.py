"""Message ids: the canonical form is pinned by golden vectors and independent of presentation."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any, Unpack

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._core.types import IdFormat
from churn_connector._events.stream import EventStream
from churn_connector._options.events import EventOptions
from churn_connector._slices import batches
from churn_connector._wire import column_wise as columnar
from churn_connector._wire import ids as id_module
from churn_connector._wire.batch import WireBatch
from churn_connector._wire.canonical import canonical
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

SEATS = {
    "context": {"price": 10.0},
    "event_type": "seat_added",
    "external_user_id": "u1",
    "occurred_at": "2026-11-20T09:30:00.123Z",
    "properties": {"seats": 3.0, "ratio": 0.5, "cleared": None, "flags": [1.0, None, True]},
}

# Golden vectors: these ids must never change, or re-runs after an upgrade would duplicate
# data. v1 (id_format="v1"): the ids of 0.1, pinned then (SEATS computed by 0.1's code).
GOLDEN_V1 = [
    (LOGIN, None, "6a2e7882-aa1c-8040-95ff-c1f146f1ba12"),
    (PURCHASE, None, "d91939c1-f68b-8697-b1d8-56799f40c5b5"),
    (PURCHASE, "shop-eu", "ca585b55-08d5-8317-84e1-98c1fd86cd41"),
    (SEATS, None, "156e3f45-7f0e-840f-9571-39e0f21bb07b"),
]
# v2, the default since 0.2: integral floats are integers (CHANGELOG, "Message ids v2")
GOLDEN_V2 = [
    (LOGIN, None, "47336989-c4fc-8492-901a-5d25e20a99e9"),
    (PURCHASE, None, "1e8a5b7c-5666-8490-8dfe-c294ebdf679b"),
    (PURCHASE, "shop-eu", "56babe7a-6802-82e8-8b54-69744c4ea8c4"),
    (SEATS, None, "2ade8710-1d20-877f-9990-7ebbfb492493"),
]
GOLDEN = [*((*v, "v1") for v in GOLDEN_V1), *((*v, "v2") for v in GOLDEN_V2)]


@pytest.mark.parametrize(("event", "namespace", "expected", "id_format"), GOLDEN)
def test_golden_vectors_never_change(
    event: dict[str, Any], namespace: str | None, expected: str, id_format: IdFormat
) -> None:
    assert cc.message_id(event, namespace=namespace, id_format=id_format) == expected


@pytest.mark.parametrize(("event", "namespace", "expected"), GOLDEN_V2)
def test_v2_is_the_default(event: dict[str, Any], namespace: str | None, expected: str) -> None:
    assert cc.message_id(event, namespace=namespace) == expected


def as_json_numbers(value: Any) -> Any:
    """v2's numbers, written out again: a float holding an integer below 2**53 is it."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: as_json_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json_numbers(v) for v in value]
    return value


def spec_id(event: dict[str, Any], namespace: str | None = None, id_format: str = "v2") -> str:
    """The definition in docs/concepts/message-ids.md, written with the standard library only."""
    form = as_json_numbers(event) if id_format == "v2" else event
    canonical = json.dumps(form, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = f"churn-connector/message-id/{id_format}\n".encode() + (namespace or "").encode()
    digest = bytearray(hashlib.sha256(data + b"\n" + canonical.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x80
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


@pytest.mark.parametrize(("event", "namespace", "expected", "id_format"), GOLDEN)
def test_golden_vectors_follow_the_documented_definition(
    event: dict[str, Any], namespace: str | None, expected: str, id_format: IdFormat
) -> None:
    assert spec_id(event, namespace, id_format) == expected


NOW = pd.Timestamp("2026-11-21T12:00:00Z")


def export_table() -> pa.Table:
    """A struct written from dicts with different keys (a null field) and a float column
    holding whole numbers: what 0.1 sent with ``"plan":null`` and ``10.0``."""
    return pa.table(
        {
            "external_user_id": ["u1", "u2", "u3"],
            "event_type": ["login", "seat_added", "seat_added"],
            "occurred_at": pa.array(
                [pd.Timestamp("2026-11-20T09:30:00.123Z")] * 3, pa.timestamp("ms", "UTC")
            ),
            "properties": pa.array(
                [{"plan": "pro", "seats": 3}, {"plan": None, "seats": 4}, None],
                pa.struct([("plan", pa.string()), ("seats", pa.int64())]),
            ),
            "context.price": pa.array([10.0, 0.5, None], pa.float64()),
        }
    )


_TAIL = b'"event_type":"seat_added","external_user_id":"u'
# the bytes sent, pinned: v1 as 0.1 sent them (ids computed by 0.1's code), v2 as now
GOLDEN_WIRE = {
    "v1": [
        b'{"context":{"$message_id":"5dba7503-901f-8fc5-97b5-2abc804b8512","price":10.0},'
        b'"event_type":"login","external_user_id":"u1","occurred_at":"2026-11-20T09:30:00.123Z",'
        b'"properties":{"plan":"pro","seats":3}}',
        b'{"context":{"$message_id":"38d67ee6-c869-870c-8fb6-4c31ddf565f4","price":0.5},'
        + _TAIL
        + b'2","occurred_at":"2026-11-20T09:30:00.123Z","properties":{"plan":null,"seats":4}}',
        b'{"context":{"$message_id":"774c56b8-f387-8a4e-b7c8-8b84bae3de5e"},'
        + _TAIL
        + b'3","occurred_at":"2026-11-20T09:30:00.123Z","properties":{}}',
    ],
    "v2": [
        b'{"context":{"$message_id":"7114283a-a9fa-8cbf-809b-5e86ac61593a","price":10},'
        b'"event_type":"login","external_user_id":"u1","occurred_at":"2026-11-20T09:30:00.123Z",'
        b'"properties":{"plan":"pro","seats":3}}',
        b'{"context":{"$message_id":"f04bcf6c-2fe1-851a-9dc6-3815532e0018","price":0.5},'
        + _TAIL
        + b'2","occurred_at":"2026-11-20T09:30:00.123Z","properties":{"seats":4}}',
        b'{"context":{"$message_id":"2a44a5dc-9c91-8bae-be3a-f992a0a161da"},'
        + _TAIL
        + b'3","occurred_at":"2026-11-20T09:30:00.123Z","properties":{}}',
    ],
}


def bodies_of(batch: WireBatch) -> list[bytes]:
    return batch.bodies.to_pylist() if isinstance(batch.bodies, pa.Array) else batch.bodies


def bodies(data: Any, **options: Any) -> list[bytes]:
    """The exact bytes of each event that would be sent."""
    stream = EventStream(data, EventOptions(now=NOW, **options))
    return [body for batch in batches(stream) for body in bodies_of(batch)]


@pytest.mark.parametrize("id_format", ["v1", "v2"])
@pytest.mark.parametrize("reader", ["arrow", "pandas"])
def test_golden_wire_bytes_never_change(id_format: IdFormat, reader: str) -> None:
    # Arrow: the column-wise path (struct); pandas (dicts): the per-row one
    table = export_table()
    data = table if reader == "arrow" else table.to_pandas()
    assert bodies(data, id_format=id_format) == GOLDEN_WIRE[id_format]


# -- the golden vectors through both wire paths ------------------------------------------

# A vector of every value a typed column can carry (strings needing escapes, a whole float,
# a boolean, a negative integer, an instant), pinned when the two paths came to share their
# primitives: as dicts it takes the per-row path, as flat typed columns or Arrow structs the
# column-wise one, and all three must give these ids.
SIGNUP = {
    "context": {"campaign": 'spring "26"', "ip_known": True},
    "event_type": "signed_up",
    "external_user_id": "u-9",
    "occurred_at": "2026-11-20T09:30:00.123Z",
    "properties": {
        "at": "2026-11-19T23:59:59.999Z",
        "note": "line\nbreak \\ / é ✓",
        "plan": "pro",
        "ratio": 0.25,
        "score": -7,
        "seats": 3.0,
        "trial": False,
    },
}
GOLDEN_TYPED: list[tuple[dict[str, Any], str | None, str, IdFormat]] = [
    (SIGNUP, None, "315aca9f-84a0-8831-b575-1cae15d24ff8", "v1"),
    (SIGNUP, None, "c0b87c89-9414-8bde-abb7-62b9487376d1", "v2"),
    (SIGNUP, "shop-eu", "c24520da-e01c-85f5-bde8-2cbfde04df3d", "v1"),
    (SIGNUP, "shop-eu", "c999c5fb-8fa6-8c68-9326-e98d46a20d37", "v2"),
]
TIMES = {"at"}  # members that are instants: an input carries them as timestamps
# SEATS cannot come from a table: its ``"cleared": null`` is omitted from a table's objects
# in v2, and no Arrow type holds its list of floats and a boolean as they are
FRAMED = [g for g in [*GOLDEN, *GOLDEN_TYPED] if g[0] is not SEATS]
_FLAT_DTYPES = {str: "string", bool: "boolean", int: "Int64", float: "float64"}


def as_input(event: dict[str, Any], form: str) -> pd.DataFrame:
    """One event as an input table: ``dicts`` (columns of dicts), ``flat`` (typed
    ``<kind>.<key>`` columns) or ``struct`` (Arrow struct columns)."""

    def value(key: str, v: Any) -> Any:
        return pd.Timestamp(v) if key in TIMES else v

    table: dict[str, Any] = {
        "external_user_id": pd.array([event["external_user_id"]], dtype="string"),
        "event_type": pd.array([event["event_type"]], dtype="string"),
        "occurred_at": pd.Series([pd.Timestamp(event["occurred_at"])]),
    }
    for kind in ("context", "properties"):
        members = {k: value(k, v) for k, v in event[kind].items()}
        if form == "dicts":
            table[kind] = pd.Series([members], dtype=object)
        elif form == "struct":
            struct = pa.array([members])
            table[kind] = pd.Series(struct, dtype=pd.ArrowDtype(struct.type))
        else:
            for key, v in members.items():
                dtype = _FLAT_DTYPES.get(type(v))
                table[f"{kind}.{key}"] = pd.Series([v], dtype=dtype)
    return pd.DataFrame(table)


def wire_of(data: Any, **options: Any) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The wire events of an input, and which path wrote them."""
    stream = EventStream(data, EventOptions(now=NOW, **options))
    events = [orjson.loads(b) for batch in batches(stream) for b in bodies_of(batch)]
    return events, dict(stream.wire_paths)


def holds_a_list(event: dict[str, Any]) -> bool:
    return any(
        isinstance(v, list) for kind in ("context", "properties") for v in event[kind].values()
    )


@pytest.mark.parametrize(("event", "namespace", "expected", "id_format"), FRAMED)
def test_golden_vectors_through_the_per_row_path(
    event: dict[str, Any], namespace: str | None, expected: str, id_format: IdFormat
) -> None:
    (wire,), paths = wire_of(as_input(event, "dicts"), namespace=namespace, id_format=id_format)
    assert paths == {"columnar": 0, "per_row": 1}
    assert wire["context"].pop("$message_id") == expected
    assert wire == {**event, "context": event["context"]}


@pytest.mark.parametrize("form", ["flat", "struct"])
@pytest.mark.parametrize(("event", "namespace", "expected", "id_format"), FRAMED)
def test_golden_vectors_through_the_column_wise_path(
    event: dict[str, Any], namespace: str | None, expected: str, id_format: IdFormat, form: str
) -> None:
    data = as_input(event, form)
    (wire,), paths = wire_of(data, namespace=namespace, id_format=id_format)
    options = EventOptions(now=NOW, namespace=namespace, id_format=id_format)
    reason = columnar.fallback_reason(data, options)
    if holds_a_list(event):  # lists are the per-row path's: declared, and the id the same
        assert reason is not None
        assert "list" in reason or "Python objects" in reason
        assert paths == {"columnar": 0, "per_row": 1}
    else:
        assert reason is None
        assert paths == {"columnar": 1, "per_row": 0}
    assert wire["context"]["$message_id"] == expected


@pytest.mark.parametrize(("event", "namespace", "expected", "id_format"), GOLDEN_TYPED)
def test_typed_golden_vectors_follow_the_documented_definition(
    event: dict[str, Any], namespace: str | None, expected: str, id_format: IdFormat
) -> None:
    assert cc.message_id(event, namespace=namespace, id_format=id_format) == expected
    assert spec_id(event, namespace, id_format) == expected


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
    # pandas reads an int column with nulls as float64: 3.0 is 3 (id format v2)
    as_floats = numeric.astype({"properties.seq": "float64"})
    float_objects = numeric.astype({"properties.seq": "float64"}).astype(object)
    expected = ids(numeric, now)
    assert ids(as_text, now) == expected
    assert ids(nullable, now) == expected
    assert ids(as_objects, now) == expected
    assert ids(as_floats, now) == expected
    assert ids(float_objects, now) == expected


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
def test_v1_float_spelling_is_pinned(value: float, spelled: bytes) -> None:
    # the canonical form of v1 spells floats as orjson 3 does; a change here would change ids
    assert canonical({"x": value}) == b'{"x":' + spelled + b"}"


V2_SPELLING = [
    (1.0, b"1"),
    (-0.0, b"0"),
    (3.0, b"3"),
    (-42.0, b"-42"),
    (1e15, b"1000000000000000"),
    (2.0**53 - 1, b"9007199254740991"),
    (-(2.0**53) + 1, b"-9007199254740991"),
    (2.0**53, b"9007199254740992.0"),  # outside the interoperable range: a float as it was
    (1e16, b"1e+16"),
    (0.1, b"0.1"),
    (1e-05, b"0.00001"),
    (1.5, b"1.5"),
]


def one_row(value: Any, column: str = "properties.x") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": ["u"],
            "event_type": ["login"],
            "occurred_at": [pd.Timestamp("2026-11-20T09:30:00.123Z")],
            column: [value],
        }
    )


@pytest.mark.parametrize(("value", "spelled"), V2_SPELLING)
@pytest.mark.parametrize("dtype", ["float64", "Float64", "double[pyarrow]", object])
def test_v2_float_spelling_is_pinned_on_both_paths(
    value: float, spelled: bytes, dtype: Any
) -> None:
    # float64, Float64 and Arrow doubles take the column-wise path, an object column the
    # per-row one; beyond 2**53 a numpy or pandas float column is refused (it may be an
    # int64 a reader rounded: check float_beyond_2_53), an Arrow one is the source's float
    if abs(value) > 2**53 and dtype in ("float64", "Float64"):
        dtype = "double[pyarrow]"
    df = one_row(value).astype({"properties.x": dtype})
    (body,) = bodies(df)
    assert body.endswith(b'"properties":{"x":' + spelled + b"}}")


def frames_of(number: int, where: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same value as an integer and as a float, carried as ``where`` says; each frame
    has a second row with nothing there (a null: what makes pandas read ints as floats)."""

    def frame(value: Any, dtype: Any) -> pd.DataFrame:
        # the null is set on the column, not concatenated: pandas 2.2 warns (FutureWarning)
        # when a frame whose column is all null takes part in a concat's dtype
        df = pd.concat([one_row(value), one_row(value)], ignore_index=True)
        df["event_type"] = ["login", "logout"]
        if where == "flat":
            df["properties.x"] = pd.Series([value, None], dtype=dtype)
            return df
        df = df.drop(columns="properties.x")
        if where == "dict":
            df["properties"] = pd.Series([{"x": value, "nested": {"y": [value]}}, None])
        elif where == "context":
            df["context.x"] = pd.Series([value, None], dtype=dtype)
        else:  # JSON text, as a CSV export carries it
            df["properties"] = pd.Series([f'{{"x": {value!r}}}', None], dtype="string")
        return df

    return frame(number, "Int64"), frame(float(number), "float64")


@settings(max_examples=120, deadline=None)
@given(
    number=st.integers(-(2**53) + 1, 2**53 - 1),
    where=st.sampled_from(["flat", "dict", "context", "json_text"]),
)
@example(number=0, where="flat")
@example(number=2**53 - 1, where="dict")
def test_an_integral_float_and_its_integer_are_one_id_and_one_wire(number: int, where: str) -> None:
    as_int, as_float = frames_of(number, where)
    assert bodies(as_float) == bodies(as_int)
    event = {**LOGIN, "properties": {"x": number, "l": [number]}}
    floated = {**LOGIN, "properties": {"x": float(number), "l": [float(number)]}}
    assert cc.message_id(floated) == cc.message_id(event)


@settings(max_examples=60, deadline=None)
@given(number=st.integers(-(2**53) + 1, 2**53 - 1).filter(lambda n: n != 0))
def test_v1_keeps_an_integral_float_apart_from_its_integer(number: int) -> None:
    as_int, as_float = frames_of(number, "flat")
    assert bodies(as_float, id_format="v1") != bodies(as_int, id_format="v1")
    floated = {**LOGIN, "properties": {"x": float(number)}}
    event = {**LOGIN, "properties": {"x": number}}
    assert cc.message_id(floated, id_format="v1") != cc.message_id(event, id_format="v1")


@pytest.mark.parametrize("where", ["flat", "dict", "json_text"])
@pytest.mark.parametrize("flag", [True, False])
def test_a_boolean_is_never_its_integer(where: str, flag: bool) -> None:  # noqa: FBT001
    number = int(flag)
    if where == "flat":
        as_bool = one_row(flag).astype({"properties.x": "boolean"})
        as_int = one_row(number).astype({"properties.x": "Int64"})
        as_float = one_row(float(number)).astype({"properties.x": "float64"})
    elif where == "dict":
        as_bool, as_int, as_float = (
            one_row({"x": v}, "properties") for v in (flag, number, float(number))
        )
    else:
        as_bool, as_int, as_float = (
            one_row(f'{{"x": {v}}}', "properties")
            for v in ("true" if flag else "false", number, float(number))
        )
    assert bodies(as_int) == bodies(as_float)
    assert bodies(as_bool) != bodies(as_int)
    assert b'"x":' + (b"true" if flag else b"false") in bodies(as_bool)[0]


def test_a_wire_event_hashes_to_its_own_id(events: pd.DataFrame, now: pd.Timestamp) -> None:
    floats = events.assign(**{"properties.seq": events["properties.seq"].astype("float64")})
    for event in cc.events_to_wire(floats, now=now):
        assert cc.message_id(event) == event["context"]["$message_id"]


def test_an_unknown_id_format_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="id_format"):
        cc.message_id(LOGIN, id_format="v3")  # type: ignore[arg-type]
    with pytest.raises(cc.ConfigurationError, match="id_format"):
        cc.events_to_wire(one_row(1), id_format="V2")  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None)
@given(
    tails=st.lists(st.text(st.characters(exclude_categories=["Cs"])), max_size=40),
    cut=st.integers(0, 5),
)
def test_the_native_hash_gives_the_bytes_of_hashlib(tails: list[str], cut: int) -> None:
    column = pa.array([t.encode("utf-8") for t in tails], pa.binary()).slice(min(cut, len(tails)))
    native = id_module.native_sha256(b"churn-connector/message-id/v2\nns\n", column)
    assert native is not None, "the fast extra (polars-hash) is a dev dependency"
    reference = id_module.python_sha256(b"churn-connector/message-id/v2\nns\n", column)
    assert native == reference


def test_text_that_is_not_utf8_is_hashed_by_hashlib() -> None:
    assert id_module._native() is not None, "the fast extra (polars-hash) is a dev dependency"
    column = pa.array([b"\xff\xfe", b"ok"], pa.binary())
    assert id_module.native_sha256(b"head", column) is None
