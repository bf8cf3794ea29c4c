"""Avro exports (BigQuery EXPORT DATA, Kafka Connect's S3 sink) written by fastavro and
polars: types keep their meaning (timestamp-micros stays a UTC instant), rows are stored
exactly over real HTTP, parts and row counts are read as for Parquet, and what cannot be
read is refused with its reason."""

from __future__ import annotations

import datetime as dt
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pandas as pd
import polars as pl
import pytest

import churn_connector as cc
from churn_connector._read import row_count

# BigQuery's Avro export of an events table: TIMESTAMP -> long/timestamp-micros, nullable
# columns -> unions with null, STRUCT -> a record, NUMERIC -> bytes/decimal(38, 9)
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Root",
    "fields": [
        {"name": "external_user_id", "type": "string"},
        {"name": "event_type", "type": "string"},
        {"name": "occurred_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {
            "name": "properties",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "properties",
                    "namespace": "root",
                    "fields": [
                        {"name": "plan", "type": ["null", "string"]},
                        {"name": "seats", "type": ["null", "long"]},
                        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
                    ],
                },
            ],
        },
    ],
}


def records(now: pd.Timestamp, n: int) -> list[dict[str, Any]]:
    base = now.to_pydatetime() - dt.timedelta(hours=1)
    return [
        {
            "external_user_id": f"u{i}",
            "event_type": "order_placed",
            # microseconds survive: the wire keeps milliseconds, so the id must see them
            "occurred_at": base - dt.timedelta(minutes=i, microseconds=123_456),
            "properties": None
            if i == 1
            else {"plan": None if i == 2 else "pro", "seats": i, "day": dt.date(2026, 1, 2)},
        }
        for i in range(n)
    ]


def write(path: Path, rows: list[dict[str, Any]], schema: dict[str, Any] = SCHEMA) -> Path:
    with path.open("wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(schema), rows, codec="deflate", sync_interval=64)
    return path


def test_an_avro_export_is_stored_exactly_with_its_timestamps(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    rows = records(now, 3)
    path = write(tmp_path / "events.avro", rows)
    result = client.send_events(path, now=now)
    assert result.counts["sent"] == 3
    frame = sandbox.events().sort_values("external_user_id")
    assert [dict(p or {}) for p in frame["properties"]] == [
        {"plan": "pro", "seats": 0, "day": "2026-01-02"},
        {},
        {"seats": 2, "day": "2026-01-02"},
    ]
    expected = [
        r["occurred_at"]
        .astimezone(dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
        for r in rows
    ]
    wire = cc.events_to_wire(path, now=now)
    assert [w["occurred_at"] for w in wire] == expected


def test_avro_values_keep_their_types(now: pd.Timestamp, tmp_path: Path) -> None:
    path = write(tmp_path / "events.avro", records(now, 3))
    wire = cc.events_to_wire(path, now=now)
    # a null field of the record is omitted, as for any struct column (message ids v2);
    # a null record is an empty properties object
    assert [w.get("properties") for w in wire] == [
        {"plan": "pro", "seats": 0, "day": "2026-01-02"},
        {},
        {"seats": 2, "day": "2026-01-02"},
    ]


def test_a_folder_of_avro_parts_is_read_in_order_with_part_labels(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    rows = records(now, 5)
    rows[3]["event_type"] = "Not Snake"
    write(folder / "000000000000.avro", rows[:2])
    write(folder / "000000000001.avro", rows[2:])
    (folder / "_SUCCESS").write_bytes(b"")
    report = cc.validate_events(folder, now=now)
    assert report.n_rows == 5
    assert report.failures["row"].tolist() == ["000000000001.avro:1"]


def test_row_count_comes_from_the_block_headers(now: pd.Timestamp, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    write(folder / "a.avro", records(now, 40))  # sync_interval=64: many blocks
    write(folder / "b.avro", records(now, 7))
    write(folder / "c.avro", [])
    with (folder / "a.avro").open("rb") as fh:
        assert len(list(fastavro.block_reader(fh))) > 1
    assert row_count(folder) == 47
    assert row_count(folder / "c.avro") == 0


def test_small_slices_of_a_long_file_keep_every_row(now: pd.Timestamp, tmp_path: Path) -> None:
    path = write(tmp_path / "events.avro", records(now, 25))
    report = cc.validate_events(path, now=now, slice_rows=4)
    assert report.n_rows == 25 and report.ok


def test_decimals_are_refused_by_default_and_sent_as_asked(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    schema = {
        "type": "record",
        "name": "Root",
        "fields": [
            {"name": "external_user_id", "type": "string"},
            {"name": "event_type", "type": "string"},
            {"name": "occurred_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "properties.amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9},
            },
        ],
    }
    row = {
        "external_user_id": "u1",
        "event_type": "order_placed",
        "occurred_at": now.to_pydatetime() - dt.timedelta(minutes=5),
        "properties.amount": Decimal("12.500000000"),
    }
    path = write(tmp_path / "e.avro", [row], schema)
    assert not cc.validate_events(path, now=now).ok
    wire = cc.events_to_wire(path, now=now, decimals="str")
    assert wire[0]["properties"] == {"amount": "12.500000000"}


def test_polars_avro_local_timestamps_need_their_zone(now: pd.Timestamp, tmp_path: Path) -> None:
    path = tmp_path / "events.avro"
    local = (now - pd.Timedelta(minutes=1)).tz_convert("Europe/Paris").tz_localize(None)
    # microseconds said outright: pandas 2 makes a Timestamp nanoseconds, which polars
    # cannot write to Avro ("not yet implemented")
    pl.DataFrame(
        {"external_user_id": ["u1"], "event_type": ["signup"], "occurred_at": [local]},
        schema_overrides={"occurred_at": pl.Datetime("us")},
    ).write_avro(path)  # polars writes local-timestamp-micros: a wall-clock time, no zone
    assert not cc.validate_events(path, now=now).ok
    wire = cc.events_to_wire(path, now=now, naive_timezone="Europe/Paris")
    expected = (now - pd.Timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert [(w["external_user_id"], w["occurred_at"]) for w in wire] == [("u1", expected)]


def test_a_union_of_two_types_is_refused_naming_the_column(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "Root",
        "fields": [{"name": "properties.v", "type": ["null", "string", "long"]}],
    }
    path = write(tmp_path / "e.avro", [{"properties.v": "a"}], schema)
    with pytest.raises(cc.InputError, match=r"column 'properties.v' has no single type"):
        cc.validate_events(path)


def test_without_the_extra_the_message_names_the_install(
    now: pd.Timestamp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "e.avro", records(now, 1))
    monkeypatch.setitem(sys.modules, "fastavro", None)  # as if it were not installed
    with pytest.raises(cc.InputError, match=r'pip install "churn-connector\[avro\]"'):
        cc.validate_events(path, now=now)


def test_a_broken_avro_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "e.avro"
    path.write_bytes(b"not avro at all")
    with pytest.raises(cc.InputError, match=r"e\.avro is not a readable Avro file"):
        cc.validate_events(path)


def test_text_options_for_an_avro_file_are_refused(now: pd.Timestamp, tmp_path: Path) -> None:
    path = write(tmp_path / "e.avro", records(now, 1))
    with pytest.raises(cc.InputError, match=r"null= \(--null\): for CSV/TSV files; e.avro is"):
        cc.validate_events(path, now=now, null="\\N")


def test_identities_from_avro_are_read_twice_the_same_way(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "Root",
        "fields": [{"name": "USER_ID", "type": "string"}, {"name": "email", "type": "string"}],
    }
    rows = [{"USER_ID": "u1", "email": "a@example.com"}, {"USER_ID": "u1", "email": "b@x.io"}]
    path = write(tmp_path / "users.avro", rows, schema)
    report = cc.validate_identities(path, rename={"USER_ID": "external_user_id"})
    assert report.failures["row"].tolist() == [0, 1]  # two rows for one user
    kept = cc.identities_to_wire(
        path, rename={"USER_ID": "external_user_id"}, duplicates="keep_last"
    )
    assert [b["channels"][0]["address"] for b in kept] == ["b@x.io"]
