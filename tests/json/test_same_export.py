"""The same export gives the same events, whatever wrote it and whatever read it (id format
v2): Parquet files written by pyarrow, pandas, polars and DuckDB, read by each of them, give
identical ids and bytes, and the sandbox stores them exactly, over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import orjson
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc

Reader = Callable[[Path], Any]
Writer = Callable[[Path, pa.Table], None]


pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    yield connection
    connection.close()


def readers(con: duckdb.DuckDBPyConnection) -> dict[str, Reader]:
    """Every way a user hands us a Parquet file: the path, pandas (default dtypes: an int
    column with nulls becomes float64, a struct dicts with None and floats), pandas'
    nullable and pyarrow dtypes, a pyarrow table, a polars frame, a DuckDB relation."""
    return {
        "path": str,
        "pandas": pd.read_parquet,
        "pandas_nullable": lambda p: pd.read_parquet(p, dtype_backend="numpy_nullable"),
        "pandas_pyarrow": lambda p: pd.read_parquet(p, dtype_backend="pyarrow"),
        "pyarrow": pq.read_table,
        "polars": pl.read_parquet,
        "duckdb": lambda p: con.sql(f"SELECT * FROM read_parquet('{p}')"),
    }


READERS = list(readers(duckdb.connect()))


def write_duckdb(path: Path, table: pa.Table) -> None:
    """DuckDB writes the file from its own table, typed by DuckDB's SQL types."""
    with duckdb.connect() as db:
        db.register("source", table)
        db.execute("CREATE TABLE export AS SELECT * FROM source")
        db.execute(f"COPY export TO '{path}' (FORMAT parquet)")


WRITERS: dict[str, Writer] = {
    "pyarrow": lambda path, table: pq.write_table(table, path),
    # pandas' default dtypes: an int column with nulls is written as double
    "pandas": lambda path, table: table.to_pandas().to_parquet(path),
    "polars": lambda path, table: pl.from_arrow(table).write_parquet(path),  # type: ignore[union-attr]
    "duckdb": write_duckdb,
}


def when(now: pd.Timestamp, n: int) -> pa.Array:
    return pa.array(
        [(now - pd.Timedelta(hours=1, minutes=i)).to_pydatetime() for i in range(n)],
        pa.timestamp("us", "UTC"),
    )


def flat_export(now: pd.Timestamp) -> pa.Table:
    """Four rows of flat columns, each with a null somewhere (the issue's ``seats``)."""
    return pa.table(
        {
            "external_user_id": ["u1", "u2", "u3", "u4"],
            "event_type": ["seat_added", "seat_added", "login", "login"],
            "occurred_at": when(now, 4),
            "properties.seats": pa.array([3, None, 5, 2**40], pa.int64()),
            "properties.ratio": pa.array([0.5, 2.0, None, -0.0], pa.float64()),
            "properties.active": pa.array([True, None, False, True], pa.bool_()),
            "properties.plan": pa.array(["pro", None, "team", "free"], pa.string()),
            "context.campaign": pa.array(["spring", None, "spring", None], pa.string()),
        }
    )


EXPECTED_FLAT = [
    ({"active": True, "plan": "pro", "ratio": 0.5, "seats": 3}, {"campaign": "spring"}),
    ({"ratio": 2}, {}),
    ({"active": False, "plan": "team", "seats": 5}, {"campaign": "spring"}),
    ({"active": True, "plan": "free", "ratio": 0, "seats": 2**40}, {}),
]


def exact(events: Any) -> bytes:
    """Events (or any JSON value) as bytes that tell 3 from 3.0 (Python's == does not)."""
    return orjson.dumps(events, option=orjson.OPT_SORT_KEYS)


def without_ids(event: dict[str, Any]) -> dict[str, Any]:
    context = {k: v for k, v in event["context"].items() if k != "$message_id"}
    return {**event, "context": context}


def write(tmp_path: Path, writer: str, table: pa.Table) -> Path:
    path = tmp_path / f"{writer}.parquet"
    WRITERS[writer](path, table)
    return path


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_one_export_gives_the_same_events_whatever_wrote_or_read_it(
    writer: str,
    reader: str,
    now: pd.Timestamp,
    tmp_path: Path,
    con: duckdb.DuckDBPyConnection,
) -> None:
    table = flat_export(now)
    reference = cc.events_to_wire(table, now=now)
    path = write(tmp_path, writer, table)
    got = cc.events_to_wire(readers(con)[reader](path), now=now)
    assert exact(got) == exact(reference)
    assert exact([(e["properties"], without_ids(e)["context"]) for e in got]) == exact(
        EXPECTED_FLAT
    )


def test_two_readers_of_one_export_store_each_event_once(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox, con: duckdb.DuckDBPyConnection
) -> None:
    path = write(tmp_path, "pyarrow", flat_export(now))
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    ways = readers(con)
    for reader in ("path", "pandas", "polars", "duckdb"):
        result = client.send_events(ways[reader](path), now=now)
        assert result.ok
    stored = sandbox.events()
    assert len(stored) == 4
    stats = sandbox.stats()
    assert (stats["stored"], stats["duplicates"], stats["conflicts"]) == (4, 12, 0)
    sent = cc.events_to_wire(str(path), now=now)
    assert exact(stored["properties"].tolist()) == exact([e["properties"] for e in sent])
    assert stored["message_id"].tolist() == [e["context"]["$message_id"] for e in sent]


# -- reader-invented nulls: a null member is omitted ------------------------------------


def struct_export(now: pd.Timestamp) -> pa.Table:
    """``properties`` and ``context`` as structs written from dicts with different keys:
    every dict lacks some field, which the file holds as null."""
    properties = [
        {"plan": "pro"},
        {"seats": 3, "trial": {"days": 14}},
        {"plan": "team", "seats": 5, "trial": {"ends": "2026-12-01"}},
        None,
    ]
    context = [{"source": "crm"}, {"batch": 7}, None, {"source": "web", "batch": 8}]
    return pa.table(
        {
            "external_user_id": ["u1", "u2", "u3", "u4"],
            "event_type": ["signup"] * 4,
            "occurred_at": when(now, 4),
            "properties": pa.array(properties),  # one struct type: the union of the keys
            "context": pa.array(context),
        }
    )


EXPECTED_STRUCTS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"plan": "pro"}, {"source": "crm"}),
    ({"seats": 3, "trial": {"days": 14}}, {"batch": 7}),
    ({"plan": "team", "seats": 5, "trial": {"ends": "2026-12-01"}}, {}),
    ({}, {"batch": 8, "source": "web"}),
]


def test_pandas_writes_a_struct_of_dicts_with_different_keys_with_null_fields(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    # the case of the issue, as pandas users meet it
    frame = struct_export(now).to_pandas()
    path = tmp_path / "export.parquet"
    frame.to_parquet(path)
    properties = pq.read_table(path).column("properties").to_pylist()
    assert properties[0] == {"plan": "pro", "seats": None, "trial": None}
    sent = cc.events_to_wire(str(path), now=now)
    assert [e["properties"] for e in sent] == [p for p, _ in EXPECTED_STRUCTS]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_null_fields_of_structs_are_omitted_whatever_wrote_or_read_them(
    writer: str,
    reader: str,
    now: pd.Timestamp,
    tmp_path: Path,
    con: duckdb.DuckDBPyConnection,
) -> None:
    table = struct_export(now)
    path = write(tmp_path, writer, table)
    got = cc.events_to_wire(readers(con)[reader](path), now=now)
    assert exact([(e["properties"], without_ids(e)["context"]) for e in got]) == exact(
        EXPECTED_STRUCTS
    )
    assert exact(got) == exact(cc.events_to_wire(table, now=now))


def test_structs_with_null_fields_are_stored_without_nulls(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox, con: duckdb.DuckDBPyConnection
) -> None:
    path = write(tmp_path, "pandas", struct_export(now))
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    for reader in ("pandas", "pyarrow", "polars"):
        assert client.send_events(readers(con)[reader](path), now=now).ok
    stored = sandbox.events()
    assert sandbox.stats()["conflicts"] == 0
    assert exact(list(zip(stored["properties"], stored["context"], strict=True))) == exact(
        [
            (properties, {"$message_id": mid, **context})
            for (properties, context), mid in zip(
                EXPECTED_STRUCTS, stored["message_id"], strict=True
            )
        ]
    )


@pytest.mark.parametrize("reader", ["path", "pyarrow", "polars", "duckdb", "pandas_pyarrow"])
def test_a_null_value_in_a_map_is_omitted_and_a_null_in_a_list_keeps_its_place(
    reader: str, now: pd.Timestamp, tmp_path: Path, con: duckdb.DuckDBPyConnection
) -> None:
    table = pa.table(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login", "login"],
            "occurred_at": when(now, 2),
            "context.tags": pa.array(
                [[("a", 1), ("b", None)], []], pa.map_(pa.string(), pa.int64())
            ),
            "properties": pa.array(
                [{"scores": [1, None, 3]}, {"scores": None}],
                pa.struct([("scores", pa.list_(pa.int64()))]),
            ),
        }
    )
    path = tmp_path / "maps.parquet"
    pq.write_table(table, path)
    got = cc.events_to_wire(readers(con)[reader](path), now=now)
    assert [(e["properties"], without_ids(e)["context"]) for e in got] == [
        ({"scores": [1, None, 3]}, {"tags": {"a": 1}}),
        ({}, {"tags": {}}),
    ]


def test_pandas_reads_a_null_inside_a_list_of_ints_as_nan_which_is_refused_with_its_path(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    # pandas has no null for an int inside a list but NaN, and NaN is not sent as null:
    # the row is invalid (the path, a pyarrow, polars or DuckDB reading send [1, null, 3])
    table = pa.table(
        {
            "external_user_id": ["u1"],
            "event_type": ["login"],
            "occurred_at": when(now, 1),
            "properties": pa.array([{"scores": [1, None, 3]}]),
        }
    )
    path = tmp_path / "lists.parquet"
    pq.write_table(table, path)
    report = cc.validate_events(pd.read_parquet(path), now=now)
    assert report.failures["message"].tolist() == [
        "properties.scores[1]: nan is not a JSON number (NaN/infinity)"
    ]


def test_a_nan_inside_an_arrow_list_column_is_refused_not_sent_as_null(
    now: pd.Timestamp,
) -> None:
    # pandas' pyarrow dtypes hand over Arrow lists whole: their NaN is checked like any other
    scores = pa.array([[1.0, float("nan")], [2.0]], pa.list_(pa.float64()))
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login", "login"],
            "occurred_at": [now - pd.Timedelta(hours=1)] * 2,
            "properties.scores": pd.Series(pd.arrays.ArrowExtensionArray(scores)),
        }
    )
    report = cc.validate_events(frame, now=now)
    assert report.failures["message"].tolist() == [
        "properties.scores[1]: nan is not a JSON number (NaN/infinity)"
    ]
    assert [e["properties"] for e in cc.events_to_wire(frame, now=now)] == [{"scores": [2]}]


def test_numpy_floats_in_a_dict_are_sent_as_the_floats_they_are(now: pd.Timestamp) -> None:
    # np.float64 is a float subclass orjson refuses: it made a traceback, not an event
    row = {"x": np.float64(0.5), "n": np.float64(3.0), "l": [np.float32(1.5)]}
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "event_type": ["login"],
            "occurred_at": [now - pd.Timedelta(hours=1)],
            "properties": pd.Series([row]),
        }
    )
    (event,) = cc.events_to_wire(frame, now=now)
    assert exact(event["properties"]) == exact({"l": [1.5], "n": 3, "x": 0.5})


def test_an_explicit_null_in_json_text_is_data_and_is_stored(
    now: pd.Timestamp, sandbox: cc.Sandbox
) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "event_type": ["coupon_removed"],
            "occurred_at": [now - pd.Timedelta(hours=1)],
            "properties": pd.Series(
                ['{"coupon": null, "n": 2.0, "o": {"p": null}}'], dtype="string"
            ),
            "context": pd.Series(['{"source": null}'], dtype="string"),
        }
    )
    assert cc.Client(sandbox.base_url, sandbox.api_key).send_events(frame, now=now).ok
    stored = sandbox.events().iloc[0]
    assert exact(stored["properties"]) == exact({"coupon": None, "n": 2, "o": {"p": None}})
    assert stored["context"]["source"] is None


# -- traits: a reader's null must not wipe what the API holds ----------------------------


def traits_export(rows: list[tuple[str, dict[str, Any]]]) -> pa.Table:
    return pa.table(
        {
            "external_user_id": [user for user, _ in rows],
            "traits": pa.array([traits for _, traits in rows]),
        }
    )


@pytest.mark.parametrize("reader", READERS)
def test_a_null_struct_field_does_not_wipe_a_stored_trait(
    reader: str, tmp_path: Path, sandbox: cc.Sandbox, con: duckdb.DuckDBPyConnection
) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    first = tmp_path / "first.parquet"
    traits_export([("u1", {"plan": "pro", "seats": 3})]).to_pandas().to_parquet(first)
    assert client.identify(readers(con)[reader](first)).ok
    # the next sync: u1 changed its seats only; u2 has a plan, so u1's plan is null here
    second = tmp_path / "second.parquet"
    traits_export([("u1", {"seats": 4}), ("u2", {"plan": "free"})]).to_pandas().to_parquet(second)
    assert pq.read_table(second).column("traits").to_pylist()[0] == {"plan": None, "seats": 4}
    assert client.identify(readers(con)[reader](second)).ok
    users = sandbox.users().set_index("external_user_id")["traits"]
    assert exact(users.to_dict()) == exact(
        {"u1": {"plan": "pro", "seats": 4}, "u2": {"plan": "free"}}
    )
    bodies = sandbox.identify_log()["body"].tolist()
    assert all(b"null" not in orjson.dumps(body) for body in bodies)


def test_an_explicit_null_trait_in_json_text_clears_it(sandbox: cc.Sandbox) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    assert client.identify(
        pd.DataFrame({"external_user_id": ["u1"], "traits": [{"plan": "pro"}]})
    ).ok
    clear = pd.DataFrame({"external_user_id": ["u1"], "traits": ['{"plan": null}']})
    assert client.identify(clear).ok
    assert sandbox.users()["traits"].tolist() == [{"plan": None}]


def test_a_flat_trait_read_as_float_is_sent_as_its_integer(
    tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    path = tmp_path / "flat.parquet"
    pq.write_table(
        pa.table(
            {"external_user_id": ["u1", "u2"], "traits.seats": pa.array([4, None], pa.int64())}
        ),
        path,
    )
    frame = pd.read_parquet(path)
    assert frame["traits.seats"].dtype == "float64"
    assert cc.Client(sandbox.base_url, sandbox.api_key).identify(frame).ok
    log = sandbox.identify_log().sort_values("external_user_id")
    bodies = [orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in log["body"]]
    assert bodies == [
        b'{"external_user_id":"u1","traits":{"seats":4}}',
        b'{"external_user_id":"u2"}',
    ]


def test_the_issue_example_gives_four_events_for_four_rows(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    # read by the CLI (Arrow, int64 with nulls) and by pd.read_parquet (float64)
    path = tmp_path / "seats.parquet"
    table = flat_export(now).select(
        ["external_user_id", "event_type", "occurred_at", "properties.seats"]
    )
    pq.write_table(table, path)
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    assert client.send_events(str(path), now=now).ok
    assert client.send_events(pd.read_parquet(path), now=now).ok
    assert len(sandbox.events()) == 4
    assert sandbox.stats()["conflicts"] == 0
