"""The column-wise wire path must give the per-row path's bytes, ids and keys exactly (message
ids are a compatibility promise), in both id formats. Property-based: random typed frames of
validated rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import struct
from decimal import Decimal
from typing import Any
from unittest import mock

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._core.types import Decimals, EpochUnit, ExtraColumns, IdFormat
from churn_connector._events.api import validate_events
from churn_connector._events.stream import EventStream
from churn_connector._json import parsed
from churn_connector._json.arrow import floats, quote
from churn_connector._json.arrow import format_ms_binary as format_ms_arrow
from churn_connector._json.timestamps import datetime_to_wire, format_ms, normalize_timestamps
from churn_connector._json.values import ValueRules, json_number, object_value, problem_of
from churn_connector._options.events import WIRE_FIELDS, EventOptions
from churn_connector._read.arrow import arrow_to_pandas
from churn_connector._read.names import NameStyle
from churn_connector._slices import batches
from churn_connector._validate.columns import (
    column_problems,
    scalar_column,
    struct_problems,
    text_objects,
)
from churn_connector._wire import column_wise as columnar
from churn_connector._wire.events import build_events, build_events_per_row

TEXT = st.text(
    alphabet=st.one_of(
        st.characters(exclude_categories=["Cs"]),  # anything UTF-8 can carry
        st.sampled_from(list('"\\/\x00\x1f\x7f\n\t\r\b\f\u2028\u2029\U0001f600é')),
    ),
    max_size=12,
)
KEYS = TEXT.filter(bool)
EVENT_TYPE = st.from_regex(r"[a-z0-9]{1,6}(?:_[a-z0-9]{1,4}){0,2}", fullmatch=True)
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            0.0,
            -0.0,
            5e-324,
            -5e-324,
            2.2250738585072014e-308,
            1e16,
            1e-5,
            1e-7,
            0.1,
            1.0,
            123456789.123,
            1.7976931348623157e308,
            9007199254740993.0,
        ]
    ),
    st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
)
# integral floats, which id format v2 writes as integers, and the edges of its range
WHOLE = st.one_of(
    st.integers(-(2**53) + 1, 2**53 - 1).map(float),
    st.sampled_from([2.0**53, -(2.0**53), 2.0**53 - 1, 1e15, 1e16, 1e300, -0.0, 0.0]),
)
FLOATS = st.one_of(FLOATS, WHOLE)
ID_FORMATS: st.SearchStrategy[IdFormat] = st.sampled_from(["v1", "v2"])
MS = st.integers(-62_135_596_800_000, 253_402_300_799_999)  # years 1..9999
INT64 = st.integers(-(2**63), 2**63 - 1)

# pandas 3's default string dtype; pandas 2 reads "str" as object, which the columnar path
# leaves to the per-row one, so there the nearest dtype it takes is tested instead
STR = "str" if int(pd.__version__.split(".")[0]) >= 3 else "string"


def with_nulls(values: list[Any], mask: list[bool]) -> list[Any]:
    return [None if m else v for v, m in zip(values, mask, strict=True)]


@st.composite
def flat_column(draw: st.DrawFn, n: int) -> pd.Series:
    kind = draw(
        st.sampled_from(
            [
                "int64",
                "Int64",
                "uint64",
                "float64",
                "float32",
                "bool",
                "boolean",
                "str",
                "string",
                "ts_utc",
                "ts_paris",
                "ts_us_wide",
            ]
        )
    )
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if kind == "int64":
        return pd.Series(draw(st.lists(INT64, min_size=n, max_size=n)), dtype="int64")
    if kind == "Int64":
        return pd.Series(
            with_nulls(draw(st.lists(INT64, min_size=n, max_size=n)), nulls), dtype="Int64"
        )
    if kind == "uint64":
        return pd.Series(
            draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype="uint64"
        )
    if kind in ("float64", "float32"):
        values = [
            np.nan if m else v
            for v, m in zip(draw(st.lists(FLOATS, min_size=n, max_size=n)), nulls, strict=True)
        ]
        s = pd.Series(values, dtype="float64")
        if kind == "float32":
            with np.errstate(over="ignore"):
                s = s.astype("float32")
            s = s.where(np.isfinite(s))  # validation refuses infinity
        return s
    if kind == "bool":
        return pd.Series(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if kind == "boolean":
        return pd.Series(
            with_nulls(draw(st.lists(st.booleans(), min_size=n, max_size=n)), nulls),
            dtype="boolean",
        )
    if kind in ("str", "string"):
        return pd.Series(
            with_nulls(draw(st.lists(TEXT, min_size=n, max_size=n)), nulls),
            dtype=STR if kind == "str" else kind,
        )
    ms = draw(
        st.lists(
            MS if kind == "ts_us_wide" else st.integers(-(2**62) // 10**6, 2**62 // 10**6),
            min_size=n,
            max_size=n,
        )
    )
    extra = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n))
    us = np.array([m * 1000 + e for m, e in zip(ms, extra, strict=True)], dtype="int64")
    arr = us.astype("datetime64[us]")
    arr[np.array(nulls, dtype=bool)] = np.datetime64("NaT")
    s = pd.Series(arr).dt.tz_localize("UTC")
    return s.dt.tz_convert("Europe/Paris") if kind == "ts_paris" else s


@st.composite
def frames(draw: st.DrawFn) -> tuple[pd.DataFrame, EventOptions]:
    n = draw(st.integers(1, 25))
    data: dict[str, pd.Series] = {}
    id_kind = draw(st.sampled_from(["int64", "Int64", "str", "object_mixed"]))
    if id_kind == "str":
        ids = pd.Series(
            draw(st.lists(TEXT.filter(lambda t: t.strip()), min_size=n, max_size=n)), dtype=STR
        )
    elif id_kind == "object_mixed":
        ids = pd.Series(
            draw(
                st.lists(st.one_of(INT64, TEXT.filter(lambda t: t.strip())), min_size=n, max_size=n)
            ),
            dtype=object,
        )
    else:
        ids = pd.Series(draw(st.lists(INT64, min_size=n, max_size=n)), dtype=id_kind)
    data["external_user_id"] = ids
    data["event_type"] = pd.Series(
        draw(st.lists(EVENT_TYPE, min_size=n, max_size=n)),
        dtype=draw(st.sampled_from([STR, object])),
    )
    ms = np.array(draw(st.lists(MS, min_size=n, max_size=n)), dtype="int64")
    when: pd.Series[Any] = pd.Series(ms.astype("datetime64[ms]")).dt.tz_localize("UTC")
    ts_kind = draw(st.sampled_from(["utc", "zone", "text"]))
    if ts_kind == "zone":
        when = when.dt.tz_convert("America/New_York")
    elif ts_kind == "text":  # CSV-like RFC 3339 text with offsets (validated: near now)
        near = pd.Series((ms % 10**12 + 1_000_000_000_000).astype("datetime64[ms]"))
        local = near.dt.tz_localize("UTC").dt.tz_convert("Asia/Kolkata")
        when = pd.Series([t.isoformat() for t in local], dtype=STR)
    data["occurred_at"] = when
    for kind in ("properties", "context"):
        keys = draw(st.lists(KEYS, max_size=5 if kind == "properties" else 2, unique=True))
        for key in keys:
            data[f"{kind}.{key}"] = draw(flat_column(n))
    namespace = draw(st.one_of(st.none(), TEXT))
    columns = list(data)
    order = draw(st.permutations(columns))
    df = pd.DataFrame({c: data[c].reset_index(drop=True) for c in order})
    return df, EventOptions(namespace=namespace, id_format=draw(ID_FORMATS))


def both(df: pd.DataFrame, options: EventOptions) -> tuple[Any, Any]:
    ms = normalize_timestamps(df["occurred_at"]).ms
    return columnar.build(df, options, ms), build_events_per_row(df, options, ms)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=frames())
def test_the_columnar_path_is_byte_identical(case: tuple[pd.DataFrame, EventOptions]) -> None:
    df, options = case
    (body, digests), reference = both(df, options)
    assert body.to_pylist() == reference.body.to_pylist()
    assert digests.tobytes() == reference.digests.tobytes()
    assert digests.tobytes() == reference.content.tobytes()


@settings(max_examples=200, deadline=None)
@given(values=st.lists(FLOATS, min_size=1, max_size=50))
def test_float_spelling_is_orjsons(values: list[float]) -> None:
    got = floats(np.array(values, dtype=np.float64)).to_pylist()
    assert got == [orjson.dumps(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(FLOATS, min_size=1, max_size=50))
def test_v2_float_spelling_is_orjsons_of_the_json_number(values: list[float]) -> None:
    got = floats(np.array(values, dtype=np.float64), whole_as_int=True).to_pylist()
    assert got == [orjson.dumps(json_number(v)) for v in values]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=50))
def test_string_escaping_is_orjsons(values: list[str | None]) -> None:
    got = quote(pa.array(values, pa.string())).to_pylist()
    assert got == [None if v is None else orjson.dumps(v) for v in values]


def numpy_spelling(arr: np.ndarray) -> list[bytes]:
    """An independent spelling of epoch ms (numpy's, what both paths used to build on)."""
    text = np.datetime_as_string(arr.astype("datetime64[ms]"), unit="ms", timezone="UTC")
    return [t.encode() for t in text.tolist()]


@settings(max_examples=200, deadline=None)
@given(ms=st.lists(MS, min_size=1, max_size=50))
def test_both_paths_spell_timestamps_alike_and_as_numpy_does(ms: list[int]) -> None:
    arr = np.array(ms, dtype=np.int64)
    assert format_ms_arrow(arr).to_pylist() == numpy_spelling(arr)
    assert [t.encode() for t in format_ms(arr)] == numpy_spelling(arr)


@settings(max_examples=200, deadline=None)
@given(base=MS, offsets=st.lists(st.integers(0, 40 * 86_400_000), min_size=1, max_size=50))
def test_timestamps_of_a_narrow_span_are_spelled_as_numpy_does(
    base: int, offsets: list[int]
) -> None:
    arr = np.minimum(np.array(offsets, dtype=np.int64) + base, 253_402_300_799_999)
    assert format_ms_arrow(arr).to_pylist() == numpy_spelling(arr)
    assert [t.encode() for t in format_ms(arr)] == numpy_spelling(arr)


@settings(max_examples=200, deadline=None)
@given(ms=MS, micro=st.integers(0, 999), zone=st.integers(-14 * 60, 14 * 60))
def test_one_datetime_is_spelled_as_its_column_would_be(ms: int, micro: int, zone: int) -> None:
    # a dict's datetime (per-row path) and a struct field or column of them (column-wise)
    utc = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms, microseconds=micro)
    try:
        local = utc.astimezone(dt.timezone(dt.timedelta(minutes=zone)))
    except OverflowError:  # the local date would be outside years 1..9999
        local = utc
    assert datetime_to_wire(local, None) == format_ms(np.array([ms]))[0]


def test_rows_whose_properties_are_all_omitted_keep_their_place() -> None:
    # pyarrow's join with null_handling="skip" drops rows whose inputs are all null
    df = pd.DataFrame(
        {
            "external_user_id": [1, 2, 3],
            "event_type": ["a", "b", "c"],
            "occurred_at": pd.to_datetime(["2026-11-01T00:00:00Z"] * 3, utc=True),
            "properties.x": [None, 1.5, None],
            "properties.y": pd.Series([None, None, "q"], dtype=STR),
            "context.z": pd.array([None, None, None], dtype="Int64"),
        }
    )
    (body, _), reference = both(df, EventOptions())
    assert body.to_pylist() == reference.body.to_pylist()


@pytest.mark.parametrize("column", ["properties", "context"])
def test_object_columns_take_the_per_row_path(column: str) -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["u"],
            "event_type": ["a"],
            "occurred_at": pd.to_datetime(["2026-11-01T00:00:00Z"], utc=True),
            column: [{"k": 1}],
        }
    )
    with pytest.raises(columnar.Unsupported):
        columnar.build(df, EventOptions(), normalize_timestamps(df["occurred_at"]).ms)
    per_row = build_events_per_row(df, EventOptions(), normalize_timestamps(df["occurred_at"]).ms)
    assert build_events(df, EventOptions()).body.to_pylist() == per_row.body.to_pylist()


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_fast_column_check_finds_what_the_wire_values_would(data: st.DataObject) -> None:
    s = data.draw(flat_column(data.draw(st.integers(1, 20))))
    if s.dtype.kind == "f":  # infinities are what the check is for
        s = s.mask(
            pd.Series(data.draw(st.lists(st.booleans(), min_size=len(s), max_size=len(s)))), np.inf
        )
    rules = ValueRules()
    expected = sorted(scalar_column(s, "properties.x", rules)[1])
    assert column_problems(s, "properties.x", rules).tolist() == expected


LEAVES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int": (pa.int64(), INT64),
    "float": (
        pa.float64(),
        st.one_of(FLOATS, st.sampled_from([float("nan"), float("inf"), -float("inf")])),
    ),
    "str": (pa.string(), TEXT),
    "bool": (pa.bool_(), st.booleans()),
    "when": (pa.timestamp("us", "UTC"), MS.map(lambda m: pd.Timestamp(m, unit="ms", tz="UTC"))),
    "naive": (pa.timestamp("us"), MS.map(lambda m: pd.Timestamp(m, unit="ms"))),
}


@st.composite
def struct_column(draw: st.DrawFn, n: int, *, depth: int = 0) -> pa.StructArray:
    kinds = draw(
        st.lists(st.sampled_from([*LEAVES, "nested"][: 7 if depth == 0 else 6]), max_size=4)
    )
    names = draw(st.lists(KEYS, min_size=len(kinds), max_size=len(kinds), unique=True))
    fields: list[pa.Array] = []
    for kind in kinds:
        if kind == "nested":
            fields.append(draw(struct_column(n, depth=depth + 1)))
            continue
        arrow_type, values = LEAVES[kind]
        cells = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
        fields.append(pa.array(cells, arrow_type))
    mask = pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return (
        pa.StructArray.from_arrays(fields, names=names, mask=mask)
        if fields
        else pa.array([{}] * n, pa.struct([]))
    )


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_struct_column_is_checked_and_written_as_its_dicts_would_be(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    table = pa.table(
        {
            "external_user_id": pa.array(range(n), pa.int64()),
            "event_type": pa.array(["login"] * n),
            "occurred_at": pa.array([pd.Timestamp("2026-11-20", tz="UTC")] * n),
            "properties": data.draw(struct_column(n)),
        }
    )
    offset = data.draw(st.integers(0, n - 1))
    df = arrow_to_pandas(table.slice(offset), pd.RangeIndex(n - offset))
    options = EventOptions(id_format=data.draw(ID_FORMATS))
    rules = options.rules
    bad = struct_problems(df["properties"], rules)
    per_cell = [
        i
        for i, v in enumerate(df["properties"].tolist())
        if problem_of(object_value, v, "properties", rules) is not None
    ]
    if bad is not None:
        assert bad.tolist() == per_cell
    valid = df.drop(index=df.index[per_cell]).reset_index(drop=True)
    if len(valid):
        ms = normalize_timestamps(valid["occurred_at"]).ms
        reference = build_events_per_row(valid, options, ms)
        try:
            body, digests = columnar.build(valid, options, ms)
        except columnar.Unsupported:  # a field type left to the per-row path
            body, digests = build_events(valid, options, ms).body, reference.digests
        assert body.to_pylist() == reference.body.to_pylist()
        assert digests.tobytes() == reference.digests.tobytes()


@pytest.mark.parametrize(
    ("id_format", "members"),
    [("v2", b'{"n":2}'), ("v1", b'{"n":2,"plan":null,"x":null}')],
)
def test_a_struct_of_plain_types_takes_the_columnar_path(
    id_format: IdFormat, members: bytes
) -> None:
    props = pa.array(
        [{"plan": "pro", "n": 1, "x": 0.5}, None, {"plan": None, "n": 2, "x": None}],
        pa.struct([("plan", pa.string()), ("n", pa.int64()), ("x", pa.float64())]),
    )
    table = pa.table(
        {
            "external_user_id": [1, 2, 3],
            "event_type": ["a", "b", "c"],
            "occurred_at": pa.array([pd.Timestamp("2026-11-20", tz="UTC")] * 3),
            "properties": props,
        }
    )
    df = arrow_to_pandas(table, pd.RangeIndex(3))
    ms = normalize_timestamps(df["occurred_at"]).ms
    options = EventOptions(id_format=id_format)
    assert struct_problems(df["properties"], options.rules) is not None
    body, _ = columnar.build(df, options, ms)
    assert body.to_pylist() == build_events_per_row(df, options, ms).body.to_pylist()
    assert b'"properties":' + members in body.to_pylist()[2]


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**25]),  # the 64-bit edges
    FLOATS,
    TEXT,
    st.sampled_from(["[", "{", "]}", "x{y", "1234567890123456789012"]),  # brackets in text
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
HOSTILE_TEXTS = st.sampled_from(
    [
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": 1e400}',
        '{"a": "\\ud800"}',
        "[1, 2]",
        "5",
        '"text"',
        "{oops",
        "",
        "{" * 200 + "}" * 200,
        '{"a": ' + "[" * 130 + "]" * 130 + "}",
        '{"a": 1, "a": 2}',
    ]
)


@st.composite
def json_texts(draw: st.DrawFn) -> str | None:
    kind = draw(st.sampled_from(["object", "object", "object", "hostile", "null"]))
    if kind == "null":
        return None
    if kind == "hostile":
        return draw(HOSTILE_TEXTS)
    obj = draw(st.dictionaries(KEYS, JSON_VALUES, max_size=4))
    spacing = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
    return json.dumps(obj, separators=spacing, ensure_ascii=draw(st.booleans()))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(json_texts(), min_size=1, max_size=10), id_format=ID_FORMATS)
@example(
    texts=['{"a": 18446744073709551616}', '{"a": -9223372036854775808, "b": "[{"}'],
    id_format="v2",
)
@example(texts=['{"a": 3.0, "b": null, "c": {"d": 1e2, "e": null}}'], id_format="v2")
@example(texts=['{"a": 2.9999999999999999, "b": [30E-1, "x3.0,"], "c": -0.0}'], id_format="v2")
def test_a_json_text_column_is_checked_and_written_as_its_dicts_would_be(
    texts: list[str | None], id_format: IdFormat
) -> None:
    n = len(texts)
    df = pd.DataFrame(
        {
            "external_user_id": range(n),
            "event_type": ["login"] * n,
            "occurred_at": pd.to_datetime(["2026-11-20T00:00:00Z"] * n, utc=True),
            "properties": pd.Series(texts, dtype=STR),
        }
    )
    options = EventOptions(id_format=id_format)
    rules = options.rules
    found = text_objects(df["properties"], "properties", rules, hand_over=True)
    assert found is not None
    ok = found.ok & ~found.repeated
    per_cell = [
        t is None or problem_of(object_value, t, "properties", rules) is None for t in texts
    ]
    assert ok.tolist() == per_cell
    rows = np.flatnonzero(ok)
    valid = df.iloc[rows].reset_index(drop=True)
    # validation's parse reaches the wire step, as in a stream
    kept = {"properties": (found.texts, found.members)} if found.members is not None else {}
    handed = parsed.ParsedTexts(kept).of_rows(df, valid, rows)
    if len(valid):
        ms = normalize_timestamps(valid["occurred_at"]).ms
        reference = build_events_per_row(valid, options, ms)
        # first with validation's parse (where the column is Arrow's), then parsed afresh
        for given in (handed, parsed.NO_PARSES):
            body, digests = columnar.build(valid, options, ms, given)
            assert body.to_pylist() == reference.body.to_pylist()
            assert digests.tobytes() == reference.digests.tobytes()


# -- every option, through the whole stream, on both paths ---------------------------------
# The tests above hold the column-wise building blocks to the per-row ones on made-up rows.
# Here whole inputs go through validation and the wire with every option that can change
# what is sent, once as the package runs them and once with the column-wise path switched
# off: the rows' states, ids, errors and every byte must be the same.

NOW = pd.Timestamp("2026-11-21T12:00:00Z")
NOW_MS = NOW.value // 10**6
RECENT = st.integers(NOW_MS - 29 * 86_400_000, NOW_MS)  # inside the API's window
ZONES = st.sampled_from([None, "Europe/Paris", "America/New_York"])
EPOCH_UNITS: st.SearchStrategy[EpochUnit | None] = st.sampled_from([None, "s", "ms", "us"])
STYLES: st.SearchStrategy[NameStyle | None] = st.sampled_from([None, "snake"])
EXTRA: st.SearchStrategy[ExtraColumns] = st.sampled_from(["error", "ignore"])
DECIMALS: st.SearchStrategy[Decimals] = st.sampled_from(["error", "float", "str"])
_PER_MS = {"s": 0.001, "ms": 1, "us": 1000}


@st.composite
def occurred_at(
    draw: st.DrawFn, n: int, naive_timezone: str | None, epoch_unit: str | None
) -> pd.Series:
    """Instants of the last 29 days, mostly in a form the options accept."""
    ms = np.array(draw(st.lists(RECENT, min_size=n, max_size=n)), dtype="int64")
    kinds = ["utc", "zone", "text", "naive" if naive_timezone else "utc"]
    kinds += ["epoch"] * (epoch_unit is not None) * 2
    kind = draw(st.sampled_from(kinds)) if draw(PLAUSIBLY) else draw(st.sampled_from(_ANY_TIME))
    when = pd.Series(ms.astype("datetime64[ms]"))
    if kind == "naive":
        return when
    aware = when.dt.tz_localize("UTC")
    if kind == "zone":
        return aware.dt.tz_convert("Asia/Kolkata")
    if kind == "text":
        return pd.Series([t.isoformat() for t in aware], dtype=STR)
    unit = epoch_unit if epoch_unit in _PER_MS else "s"
    return pd.Series((ms * _PER_MS[unit]).astype("int64"), dtype="int64")


@st.composite
def member_column(draw: st.DrawFn, n: int, options: EventOptions) -> pd.Series:
    """A ``<kind>.<key>`` column: the typed ones, and (mostly when the options accept
    them) naive datetimes, Decimals and columns of Python objects."""
    kinds = ["typed"] * 8 + ["objects"]
    kinds += ["naive"] * (options.naive_timezone is not None)
    kinds += ["decimal"] * (options.decimals != "error")
    kind = draw(st.sampled_from(kinds)) if draw(PLAUSIBLY) else draw(st.sampled_from(_ANY_MEMBER))
    if kind == "typed":
        s: pd.Series = draw(flat_column(n))
        return s
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if kind == "naive":
        ms = np.array(draw(st.lists(RECENT, min_size=n, max_size=n)), dtype="int64")
        arr = ms.astype("datetime64[ms]")
        arr[np.array(nulls, dtype=bool)] = np.datetime64("NaT")
        return pd.Series(arr)
    if kind == "decimal":
        digits = draw(st.lists(st.integers(-(10**6), 10**6), min_size=n, max_size=n))
        scale = Decimal(draw(st.sampled_from(["1", "0.5", "0.01"])))
        return pd.Series(with_nulls([Decimal(d) * scale for d in digits], nulls), dtype=object)
    values = draw(st.lists(st.one_of(INT64, TEXT, st.booleans(), FLOATS), min_size=n, max_size=n))
    return pd.Series(with_nulls(values, nulls), dtype=object)


PLAUSIBLY = st.sampled_from([True] * 9 + [False])  # data the options accept, mostly
SOMETIMES = st.sampled_from([False] * 5 + [True])  # an option that takes the per-row path
_ANY_TIME = ["utc", "zone", "naive", "text", "epoch"]
_ANY_MEMBER = ["typed", "naive", "decimal", "objects"]


@st.composite
def inputs_and_options(draw: st.DrawFn) -> tuple[pd.DataFrame, EventOptions]:
    n = draw(st.integers(1, 16))
    style = draw(STYLES)
    extra_columns = draw(EXTRA)
    base = EventOptions(
        now=NOW,
        namespace=draw(st.one_of(st.none(), TEXT)),
        id_format=draw(ID_FORMATS),
        naive_timezone=draw(ZONES),
        epoch_unit=draw(EPOCH_UNITS),
        decimals=draw(DECIMALS),
        extra_columns=extra_columns,
        slice_rows=draw(st.integers(1, n + 2)),
        event_type_style=style,
    )
    types = draw(st.lists(EVENT_TYPE, min_size=n, max_size=n))
    if style == "snake":  # what event_type_style rewrites
        types = [t.replace("_", " ").title() for t in types]
    data: dict[str, pd.Series] = {
        "external_user_id": pd.Series(
            draw(st.lists(st.one_of(INT64, TEXT.filter(str.strip)), min_size=n, max_size=n)),
            dtype=object,
        )
        if draw(st.booleans())
        else pd.Series(draw(st.lists(INT64, min_size=n, max_size=n)), dtype="int64"),
        "event_type": pd.Series(types, dtype=STR),
        "occurred_at": draw(occurred_at(n, base.naive_timezone, base.epoch_unit)),
    }
    properties = draw(st.sampled_from(["flat", "flat", "struct", "json"]))
    if properties == "flat":
        for key in draw(st.lists(KEYS, max_size=4, unique=True)):
            data[f"properties.{key}"] = draw(member_column(n, base))
    elif properties == "struct":
        table = pa.table({"properties": draw(struct_column(n))})
        data["properties"] = arrow_to_pandas(table, pd.RangeIndex(n))["properties"]
    else:
        texts = draw(st.lists(json_texts(), min_size=n, max_size=n))
        data["properties"] = pd.Series(texts, dtype=STR)
    for key in draw(st.lists(KEYS, max_size=2, unique=True)):
        data[f"context.{key}"] = draw(member_column(n, base))
    if draw(SOMETIMES):  # the caller's own ids, some repeated
        data["message_id"] = pd.Series(
            [f"m-{i}" for i in draw(st.lists(st.integers(0, n), min_size=n, max_size=n))],
            dtype=STR,
        )
    if draw(st.booleans()) and (extra_columns == "ignore" or not draw(PLAUSIBLY)):
        data["note"] = pd.Series(["x"] * n, dtype=STR)  # a column the API has no place for
    id_columns = None
    if draw(SOMETIMES):
        named = [c for c in data if c in WIRE_FIELDS or c.startswith(("properties.", "context."))]
        id_columns = tuple(draw(st.lists(st.sampled_from(named), min_size=1, unique=True)))
    rename: dict[str, str] = {}
    if draw(st.booleans()):  # the caller's own name for a column
        data["user"] = data.pop("external_user_id")
        rename = {"user": "external_user_id"}
    order = draw(st.permutations(list(data)))
    df = pd.DataFrame({c: data[c].reset_index(drop=True) for c in order})
    return df, dataclasses.replace(base, id_columns=id_columns, rename=rename)


def sent(df: pd.DataFrame, options: EventOptions) -> tuple[Any, ...]:
    """Everything a send would take from the stream: each batch, and the row book."""
    stream = EventStream(df, options)
    taken = [
        (
            b.positions,
            list(b.keys),
            b.bodies.to_pylist() if isinstance(b.bodies, pa.Array) else b.bodies,
            None if b.content is None else b.content.tolist(),
        )
        for b in batches(stream)
    ]
    return taken, stream.book.frame(), dict(stream.wire_paths)


def per_row_only() -> Any:
    return mock.patch.object(columnar, "fallback_reason", return_value="switched off by a test")


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=inputs_and_options())
def test_every_option_gives_the_same_rows_ids_and_bytes_on_both_paths(
    case: tuple[pd.DataFrame, EventOptions],
) -> None:
    df, options = case
    batches_run, book_run, paths = sent(df, options)
    with per_row_only():
        batches_ref, book_ref, ref_paths = sent(df, options)
    assert ref_paths["columnar"] == 0
    event("column-wise" if paths["columnar"] else "per-row" if paths["per_row"] else "no valid row")
    assert batches_run == batches_ref
    pd.testing.assert_frame_equal(book_run, book_ref)


def typical(n: int = 6) -> pd.DataFrame:
    """Rows every option leaves valid and column-wise (with the options below)."""
    ms = NOW_MS - 3_600_000 * np.arange(n)
    return pd.DataFrame(
        {
            "external_user_id": pd.Series([f"u{i % 3}" for i in range(n)], dtype=STR),
            "event_type": pd.Series(["page_view"] * n, dtype=STR),
            "occurred_at": pd.Series(ms.astype("datetime64[ms]")).dt.tz_localize("UTC"),
            "properties.amount": [1.0, 2.5, None, 3.0, 0.1, -0.0][:n],
            "properties.plan": pd.Series(["pro", None, "free", 'a "q"', "é", "x"][:n], dtype=STR),
            "context.source": pd.Series(["crm"] * n, dtype=STR),
        }
    )


@pytest.mark.parametrize(
    ("change", "options"),
    [
        ("namespace", {"namespace": "shop-eu"}),
        ("id_format", {"id_format": "v1"}),
        ("naive_timezone", {"naive_timezone": "Europe/Paris"}),
        ("epoch_unit", {"epoch_unit": "ms"}),
        ("decimals", {"decimals": "float"}),
        ("slice_rows", {"slice_rows": 4}),
        ("extra_columns", {"extra_columns": "ignore"}),
        ("event_type_style", {"event_type_style": "snake"}),
        ("rename", {"rename": {"user": "external_user_id"}}),
    ],
)
def test_each_option_runs_column_wise_and_matches_the_per_row_path(
    change: str, options: dict[str, Any]
) -> None:
    df = typical()
    if change == "naive_timezone":  # naive instants, the zone named
        df["occurred_at"] = df["occurred_at"].dt.tz_localize(None)
        df["properties.seen"] = df["occurred_at"]
    elif change == "epoch_unit":
        df["occurred_at"] = NOW_MS - 3_600_000 * np.arange(len(df))
    elif change == "extra_columns":
        df["note"] = "x"
    elif change == "event_type_style":
        df["event_type"] = "Page View"
    elif change == "rename":
        df = df.rename(columns={"external_user_id": "user"})
    chosen = EventOptions(now=NOW, **options)
    batches_run, book_run, paths = sent(df, chosen)
    with per_row_only():
        batches_ref, book_ref, _ = sent(df, chosen)
    assert paths["per_row"] == 0
    assert paths["columnar"] >= 1
    assert (book_run["status"] == "pending").all()  # every row valid, none a repeat
    assert batches_run == batches_ref
    pd.testing.assert_frame_equal(book_run, book_ref)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("id_columns", "id_columns"),
        ("message_id", "a message_id column"),
        ("dicts", "properties is a column of Python objects (object dtype), not an Arrow struct"),
        ("object_member", "properties.plan is a column of Python objects (object dtype)"),
        ("both", "a properties column beside properties.<key> columns"),
        ("list_field", "properties: field 'tags' is of type list<item: string>"),
    ],
)
def test_the_per_row_path_is_declared_counted_and_logged(
    change: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    df = typical()
    options = EventOptions(now=NOW)
    if change == "id_columns":
        options = EventOptions(now=NOW, id_columns=("external_user_id", "properties.plan"))
    elif change == "message_id":
        df["message_id"] = [f"m{i}" for i in range(len(df))]
    elif change == "dicts":
        df = df.drop(columns=["properties.amount", "properties.plan"])
        df["properties"] = pd.Series([{"plan": "pro"}] * len(df), dtype=object)
    elif change == "object_member":
        df["properties.plan"] = df["properties.plan"].astype(object)
    elif change == "both":
        df["properties"] = pd.Series(['{"x": 1}'] * len(df), dtype=STR)
        options = EventOptions(now=NOW)
    else:
        df = df.drop(columns=["properties.amount", "properties.plan"])
        tags = pa.array([{"tags": ["a", "b"]}] * len(df))
        df["properties"] = arrow_to_pandas(pa.table({"properties": tags}), df.index)["properties"]
    assert columnar.fallback_reason(df, options) is not None
    assert reason in str(columnar.fallback_reason(df, options))
    with caplog.at_level(logging.DEBUG, logger="churn_connector"):
        report = validate_events(df, now=NOW, id_columns=options.id_columns)
    if change == "both":  # an object and its keys side by side: validation decides first
        return
    assert report.ok, report.failures
    assert report.wire_paths == {"columnar": 0, "per_row": 1}
    assert f"take the per-row path: {columnar.fallback_reason(df, options)}" in caplog.text


def test_a_send_counts_the_slices_each_path_wrote() -> None:
    def part(k: int) -> pd.DataFrame:  # other users in each part: no row repeats another
        df = typical()
        return df.assign(external_user_id=[f"p{k}-{i}" for i in range(len(df))])

    as_objects = part(1).astype({"properties.plan": object})  # the per-row path's
    client = cc.Client(config=cc.ClientConfig.create(None, None, dry_run=True))
    result = client.send_events([part(0), as_objects, part(2)], now=NOW, dry_run=True)
    assert result.counts["would_send"] == 3 * len(as_objects)
    assert result.wire_paths == {"columnar": 2, "per_row": 1}
    users = pd.DataFrame({"external_user_id": ["u1", "u2"]})
    assert client.identify(users, dry_run=True).wire_paths == {}  # events only
