"""The column-wise wire path must give the per-row path's bytes, ids and keys exactly (message
ids are a compatibility promise), in both id formats. Property-based: random typed frames of
validated rows."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from churn_connector._core.types import IdFormat
from churn_connector._events import columnar
from churn_connector._events.options import EventOptions
from churn_connector._events.wire import build_events, build_events_per_row
from churn_connector._json.arrow import floats, quote
from churn_connector._json.arrow import format_ms as format_ms_arrow
from churn_connector._json.timestamps import format_ms, normalize
from churn_connector._json.values import ValueRules, json_number, object_value, problem_of
from churn_connector._read.arrow import arrow_to_pandas
from churn_connector._validate.columns import (
    column_problems,
    scalar_column,
    struct_problems,
    text_objects_ok,
)

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
    ms = normalize(df["occurred_at"]).ms
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


@settings(max_examples=200, deadline=None)
@given(ms=st.lists(MS, min_size=1, max_size=50))
def test_timestamp_text_is_the_per_row_spelling(ms: list[int]) -> None:
    arr = np.array(ms, dtype=np.int64)
    assert format_ms_arrow(arr).to_pylist() == [t.encode() for t in format_ms(arr)]


@settings(max_examples=200, deadline=None)
@given(base=MS, offsets=st.lists(st.integers(0, 40 * 86_400_000), min_size=1, max_size=50))
def test_timestamp_text_of_a_narrow_span_is_the_per_row_spelling(
    base: int, offsets: list[int]
) -> None:
    arr = np.minimum(np.array(offsets, dtype=np.int64) + base, 253_402_300_799_999)
    assert format_ms_arrow(arr).to_pylist() == [t.encode() for t in format_ms(arr)]


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
        columnar.build(df, EventOptions(), normalize(df["occurred_at"]).ms)
    per_row = build_events_per_row(df, EventOptions(), normalize(df["occurred_at"]).ms)
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
        ms = normalize(valid["occurred_at"]).ms
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
    ms = normalize(df["occurred_at"]).ms
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
    ok = text_objects_ok(df["properties"], "properties", rules)
    assert ok is not None
    per_cell = [
        t is None or problem_of(object_value, t, "properties", rules) is None for t in texts
    ]
    assert ok.tolist() == per_cell
    valid = df[ok].reset_index(drop=True)
    if len(valid):
        ms = normalize(valid["occurred_at"]).ms
        reference = build_events_per_row(valid, options, ms)
        body, digests = columnar.build(valid, options, ms)
        assert body.to_pylist() == reference.body.to_pylist()
        assert digests.tobytes() == reference.digests.tobytes()
