"""Arrow-native inputs: the same rows through pandas, pyarrow, polars and DuckDB give the same
wire events and message ids; nested time zones survive; nothing is materialised whole."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._read.arrow import pylist


def test_importing_the_package_leaves_the_environment_alone() -> None:
    # pandera sets PYARROW_IGNORE_TIMEZONE on import, which makes pyarrow drop nested zones
    code = (
        "import os, json; before = dict(os.environ); import churn_connector; "
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYARROW_IGNORE_TIMEZONE",)}
    env.pop("SPARK_LOCAL_IP", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_tz_aware_timestamp_inside_a_struct_property_stays_aware(now: pd.Timestamp) -> None:
    paid = (now - pd.Timedelta(hours=2)).to_pydatetime()
    table = pa.table(
        {
            "external_user_id": ["u1"],
            "event_type": ["order_placed"],
            "occurred_at": pa.array([now - pd.Timedelta(hours=1)], pa.timestamp("us", "UTC")),
            "properties": pa.array(
                [{"paid_at": paid, "tries": [paid]}],
                pa.struct(
                    [
                        ("paid_at", pa.timestamp("us", "Asia/Kolkata")),
                        ("tries", pa.list_(pa.timestamp("ms", "America/New_York"))),
                    ]
                ),
            ),
        }
    )
    report = cc.validate_events(table, now=now)
    assert report.ok, report.summary()
    wire = cc.events_to_wire(table, now=now)
    expected = (
        paid.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{paid.microsecond // 1000:03d}Z"
    )
    assert wire[0]["properties"] == {"paid_at": expected, "tries": [expected]}


def _table(now: pd.Timestamp, n: int = 40) -> pa.Table:
    return pa.table(
        {
            "external_user_id": pa.array([i % 7 for i in range(n)], pa.int64()),
            "event_type": ["order_placed" if i % 2 else "page_viewed" for i in range(n)],
            "occurred_at": pa.array(
                [now - pd.Timedelta(minutes=i, microseconds=123_456) for i in range(n)],
                pa.timestamp("us", "UTC"),
            ).cast(pa.timestamp("us", "America/New_York")),
            "properties.plan": pa.array([None if i % 5 == 0 else "pro" for i in range(n)]),
            "properties.count": pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int64()),
        }
    )


class CapsuleOnly:
    """An object with nothing but the Arrow stream interface (what ADBC results are)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)


def _sources(table: pa.Table, tmp_path: Path) -> dict[str, object]:
    pq.write_table(table, tmp_path / "same.parquet", row_group_size=11)
    con = duckdb.connect()
    return {
        "pandas": table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get),
        "pa.Table": table,
        "pa.RecordBatch": table.combine_chunks().to_batches()[0],
        "reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches(9)),
        "polars": pl.from_arrow(table),
        "polars lazy": pl.scan_parquet(tmp_path / "same.parquet"),
        "duckdb": con.sql(f"select * from read_parquet('{tmp_path / 'same.parquet'}')"),
        "capsule": CapsuleOnly(table),
        "list of tables": [table.slice(0, 15), table.slice(15)],
    }


def test_the_same_rows_give_the_same_ids_whatever_carried_them(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    table = _table(now)
    expected = cc.events_to_wire(table, now=now)
    assert len(expected) == 40
    for name, source in _sources(table, tmp_path).items():
        wire = cc.events_to_wire(source, now=now, slice_rows=8)
        assert wire == expected, name


def test_identities_from_one_shot_sources_are_read_once_and_spooled(tmp_path: Path) -> None:
    users = pa.table(
        {
            "external_user_id": ["a", "b", "a", "c"],
            "email": ["a@x.co", "b@x.co", "a2@x.co", "c@x.co"],
            "email_opted_in": [True, False, True, None],
        }
    )
    expected = cc.identities_to_wire(users, duplicates="keep_last")
    pq.write_table(users, tmp_path / "users.parquet")
    relation = duckdb.sql(f"select * from read_parquet('{tmp_path / 'users.parquet'}')")
    sources = {
        "reader": pa.RecordBatchReader.from_batches(users.schema, users.to_batches(1)),
        "duckdb": relation,
        "polars lazy": pl.scan_parquet(tmp_path / "users.parquet"),
        "generator": (b for b in users.to_batches(2)),
    }
    for name, source in sources.items():
        got = cc.identities_to_wire(source, duplicates="keep_last", slice_rows=1)
        assert got == expected, name


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (pd.Series([1, 2]), "pandas Series"),
        (pl.Series("external_user_id", ["u1"]), "polars Series (one column)"),
        (pl.Series("external_user_id", ["u1"]), "series.to_frame()"),
        (pa.array(["u1"]), "pyarrow Array"),
        (pa.chunked_array([["u1"]]), "pyarrow ChunkedArray"),
        (np.array([["u1"]]), "numpy array"),
        ([pl.DataFrame({"a": [1]}), pl.Series([1])], "item 1 of the iterable is a polars Series"),
        ({"external_user_id": [1]}, "pd.DataFrame(data)"),
        (42, "is a int"),
        (b"x", "bytes"),
        ([pd.DataFrame({"a": [1]}), pd.Series([1])], "item 1 of the iterable is a pandas Series"),
        ([object()], "item 0 of the iterable is a object"),
    ],
)
def test_unsupported_inputs_name_their_type_and_what_to_pass(data: object, fragment: str) -> None:
    with pytest.raises(cc.InputError) as info:
        cc.validate_events(data)
    assert fragment in str(info.value)


def test_a_polars_series_is_refused_on_every_path_that_takes_a_table() -> None:
    # identities read their input twice: a one-shot source is spooled first, so the series
    # must be refused before Arrow tries to read it as a table
    series = pl.Series("external_user_id", ["u1"])
    for call in (cc.validate_events, cc.events_to_wire, cc.identities_to_wire):
        with pytest.raises(cc.InputError, match=r"polars Series \(one column\)"):
            call(series)


def test_an_empty_lazy_frame_still_reports_its_missing_columns() -> None:
    lazy = pl.LazyFrame({"external_user_id": []}, schema={"external_user_id": pl.String})
    report = cc.validate_events(lazy)
    assert report.n_rows == 0
    assert "column_in_dataframe" in set(report.failures["check"])


def test_a_list_of_tz_timestamps_in_a_column_stays_aware(now: pd.Timestamp) -> None:
    when = now - pd.Timedelta(hours=3)
    table = pa.table(
        {
            "external_user_id": ["u"],
            "event_type": ["x"],
            "occurred_at": pa.array([now - pd.Timedelta(hours=1)], pa.timestamp("ms", "UTC")),
            "properties.seen": pa.array([[when]], pa.list_(pa.timestamp("us", "Asia/Tokyo"))),
        }
    )
    wire = cc.events_to_wire(table, now=now)
    assert wire[0]["properties"]["seen"] == [when.strftime("%Y-%m-%dT%H:%M:%S.000Z")]


MAP = pa.map_(pa.string(), pa.int64())


def test_maps_at_any_depth_are_dicts_on_every_supported_pyarrow() -> None:
    # to_pylist(maps_as_pydicts=) came with pyarrow 20; before it the pairs are made dicts here
    nested = pa.struct([("m", MAP), ("lm", pa.list_(MAP)), ("mm", pa.map_(pa.string(), MAP))])
    arr = pa.array(
        [
            {"m": [("a", 1), ("b", None)], "lm": [[("c", 2)], None, []], "mm": [("k", [("z", 3)])]},
            None,
            {"m": None, "lm": None, "mm": [("k", None)]},
        ],
        nested,
    )
    assert pylist(arr) == [
        {"m": {"a": 1, "b": None}, "lm": [{"c": 2}, None, {}], "mm": {"k": {"z": 3}}},
        None,
        {"m": None, "lm": None, "mm": {"k": None}},
    ]
    assert pylist(pa.array([[[("y", 2)]], None], pa.large_list(MAP))) == [[{"y": 2}], None]


def test_a_map_that_repeats_a_key_is_a_key_error_on_every_supported_pyarrow() -> None:
    with pytest.raises(KeyError):
        pylist(pa.array([[[("x", 1), ("x", 2)]]], pa.list_(MAP)))


_REPEATING = [("x", 1), ("x", 2)]


@pytest.mark.parametrize(
    ("column", "values", "kind", "check", "path"),
    [
        ("properties", [_REPEATING, [("y", 1)]], MAP, "repeated_key", "properties"),
        ("context", [_REPEATING, [("y", 1)]], MAP, "repeated_key", "context"),
        (
            "properties",
            [{"m": _REPEATING}, {"m": [("y", 1)]}],
            pa.struct([("m", MAP)]),
            "repeated_key",
            "properties.m",
        ),
        (
            "properties.tags",
            [[_REPEATING], [[("y", 1)]]],
            pa.list_(MAP),
            "repeated_key",
            "properties.tags[0]",
        ),
    ],
    ids=["map", "context map", "map in a struct", "map in a list"],
)
def test_an_arrow_map_that_repeats_a_key_makes_only_its_row_invalid_by_name(
    column: str,
    values: list[object],
    kind: pa.DataType,
    check: str,
    path: str,
    now: pd.Timestamp,
) -> None:
    # a JSON object cannot hold a key twice and keeping either value would be a guess: the
    # row is refused with the check's name and the key, never a raw Arrow exception
    table = pa.table(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login", "login"],
            "occurred_at": pa.array([now - pd.Timedelta(hours=1)] * 2, pa.timestamp("us", "UTC")),
            column: pa.array(values, kind),
        }
    )
    report = cc.validate_events(table, now=now)
    assert (report.n_rows, report.n_valid) == (2, 1)
    (failure,) = report.failures.itertuples()
    assert (failure.row, failure.check) == (0, check)
    assert failure.message == (
        f"{path}: the map holds the key 'x' twice (an Arrow map may, a JSON object may not); "
        "keep one value per key"
    )
    wire = cc.events_to_wire(table, now=now)
    assert len(wire) == 1 and wire[0]["external_user_id"] == "u2"
