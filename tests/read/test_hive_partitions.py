"""Hive-partitioned folders written by pyarrow, sent over real HTTP to the sandbox: each
``key=value`` folder gives its column back to the rows of its files, as text, URL-decoded,
``__HIVE_DEFAULT_PARTITION__`` as null; a file that disagrees with its folder is refused
row by row."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main

from .tables import events, expected, stored

pytestmark = pytest.mark.e2e  # real HTTP throughout


@pytest.fixture
def planned(now: pd.Timestamp) -> pa.Table:
    return events(now, 0, 40, **{"properties.plan": ["pro", "free", "pro", None] * 10})


def test_hive_partition_folders_restore_their_columns_when_sent(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["event_type", "properties.plan"])
    assert "event_type" not in pq.read_schema(next((tmp_path / "t").rglob("*.parquet"))).names
    result = client.send_events(tmp_path / "t", now=now)
    assert result.counts["sent"] == 40
    # the same ids as the flat table's: text in, text sent
    assert stored(sandbox) == expected(planned, now)


def test_the_hive_default_partition_is_a_null(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["properties.plan"])
    assert (tmp_path / "t" / "properties.plan=__HIVE_DEFAULT_PARTITION__").is_dir()
    client.send_events(tmp_path / "t", now=now)
    assert stored(sandbox) == expected(planned, now)
    plans = sorted(str(p.get("plan")) for p in sandbox.events()["properties"])
    assert plans == ["None"] * 10 + ["free"] * 10 + ["pro"] * 20  # null: the key is omitted


def test_url_encoded_partition_values_are_decoded(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    odd = ["a b", "50%/off", "x=y", "ünï", "1+1"]
    table = events(now, 0, 5, **{"properties.campaign": odd})
    schema = pa.schema([("properties.campaign", pa.string())])
    ds.write_dataset(
        table,
        tmp_path / "t",
        format="parquet",
        partitioning=ds.partitioning(schema, flavor="hive"),
    )
    assert (tmp_path / "t" / "properties.campaign=50%25%2Foff").is_dir()
    client.send_events(tmp_path / "t", now=now)
    assert stored(sandbox) == expected(table, now)


def test_restored_values_are_text_as_the_folder_names_hold_them(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    table = events(now, 0, 4, **{"properties.bucket": ["7", "7", "02134", "02134"]})
    pq.write_to_dataset(table, tmp_path / "t", partition_cols=["properties.bucket"])
    wire = cc.events_to_wire(tmp_path / "t", now=now)
    assert sorted(w["properties"]["bucket"] for w in wire) == ["02134", "02134", "7", "7"]


def test_dtypes_types_a_restored_column(now: pd.Timestamp, tmp_path: Path) -> None:
    table = events(now, 0, 4, **{"properties.bucket": ["7", "7", "12", "12"]})
    pq.write_to_dataset(table, tmp_path / "t", partition_cols=["properties.bucket"])
    wire = cc.events_to_wire(tmp_path / "t", now=now, dtypes={"properties.bucket": "int64"})
    assert sorted(w["properties"]["bucket"] for w in wire) == [7, 7, 12, 12]


def test_dtypes_for_a_column_the_files_carry_is_refused(
    now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["properties.plan"])
    with pytest.raises(cc.InputError, match=r"'properties\.seq': it types text"):
        cc.validate_events(tmp_path / "t", now=now, dtypes={"properties.seq": "int64"})


def test_a_file_value_that_disagrees_with_its_folder_makes_the_row_invalid(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    # a file moved into the wrong folder by hand: the column is in the file and the path
    folder = tmp_path / "t" / "event_type=login"
    folder.mkdir(parents=True)
    table = events(now, 0, 4)  # event types page_view, login, page_view, login
    pq.write_table(table, folder / "part-0.parquet")
    result = client.send_events(tmp_path / "t", now=now)
    assert result.counts["sent"] == 2 and result.counts["invalid"] == 2
    failures = result.rows[result.rows["status"] == "invalid"]
    assert list(failures.index) == [
        "event_type=login/part-0.parquet:0",
        "event_type=login/part-0.parquet:2",
    ]
    assert failures["error"].str.contains("partition_mismatch").all()
    assert (
        failures["error"]
        .str.contains("event_type: the folder event_type=login says 'login', the file")
        .all()
    )
    assert sorted(stored(sandbox)) == expected(table.filter(pa.array([False, True] * 2)), now)


@pytest.mark.parametrize(("folder", "agrees"), [("7", True), ("07", True), ("8", False)])
def test_a_typed_file_column_is_compared_as_its_type(
    now: pd.Timestamp, tmp_path: Path, folder: str, *, agrees: bool
) -> None:
    path = tmp_path / "t" / f"properties.bucket={folder}"
    path.mkdir(parents=True)
    pq.write_table(events(now, 0, 2, **{"properties.bucket": 7}), path / "part-0.parquet")
    report = cc.validate_events(tmp_path / "t", now=now)
    assert report.ok is agrees
    assert set(report.failures["check"]) == (set() if agrees else {"partition_mismatch"})


def test_partitioning_none_reads_the_files_own_columns_only(
    now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["properties.plan"])
    report = cc.validate_events(tmp_path / "t", now=now, partitioning=None)
    assert report.ok and "properties.plan" not in report.valid.columns


def test_cli_partitioning_none_turns_restoring_off(
    now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["event_type"])
    assert main(["validate", "events", str(tmp_path / "t"), "-q"]) == 0
    # without the folders' event_type every row lacks it
    assert main(["validate", "events", str(tmp_path / "t"), "--partitioning", "none", "-q"]) == 1


def test_files_under_different_partition_keys_are_refused(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    for sub in ("event_type=login", "day=2026-11-01"):
        (tmp_path / "t" / sub).mkdir(parents=True)
        pq.write_table(events(now, 0, 2), tmp_path / "t" / sub / "part-0.parquet")
    with pytest.raises(cc.InputError, match="one layout per folder"):
        cc.validate_events(tmp_path / "t", now=now)


def test_a_glob_below_partition_folders_restores_their_columns(
    now: pd.Timestamp, planned: pa.Table, tmp_path: Path
) -> None:
    pq.write_to_dataset(planned, tmp_path / "t", partition_cols=["event_type", "properties.plan"])
    wire = cc.events_to_wire(str(tmp_path / "t" / "**" / "*.parquet"), now=now)
    assert sorted(map(str, wire)) == sorted(map(str, cc.events_to_wire(planned, now=now)))
