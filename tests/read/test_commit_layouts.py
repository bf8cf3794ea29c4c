"""Folders as Spark and Databricks jobs leave them, sent over real HTTP to the sandbox: only
what the job committed is read, whether the folder or a glob names the files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc

from .tables import events, expected, stored

pytestmark = pytest.mark.e2e  # real HTTP throughout


def spark_folder(root: Path, now: pd.Timestamp) -> pa.Table:
    """A Spark job's output while a retried task's attempt is still in _temporary/ (the
    committed output: rows 0..19)."""
    attempt = root / "_temporary" / "0" / "_temporary" / "attempt_202611201030_0001_m_000001_1"
    attempt.mkdir(parents=True)
    pq.write_table(events(now, 0, 10), root / "part-00000-a1.c000.snappy.parquet")
    pq.write_table(events(now, 10, 20), root / "part-00001-a1.c000.snappy.parquet")
    # a speculative attempt of task 1, still running: not the rows its commit holds
    pq.write_table(events(now, 500, 505), attempt / "part-00001-a1.c000.snappy.parquet")
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".part-00000-a1.c000.snappy.parquet.crc").write_bytes(b"crc\x00")
    return events(now, 0, 20)


def test_a_double_star_glob_never_descends_into_temporary_folders(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    committed = spark_folder(tmp_path / "out", now)
    result = client.send_events(str(tmp_path / "out" / "**" / "*.parquet"), now=now)
    assert result.n_rows == 20
    assert stored(sandbox) == expected(committed, now)


def test_a_spark_folder_is_read_without_its_temporary_attempts_and_markers(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    committed = spark_folder(tmp_path / "out", now)
    result = client.send_events(tmp_path / "out", now=now)
    assert result.n_rows == 20
    assert stored(sandbox) == expected(committed, now)


TID = "5734290785441950343"


def databricks_folder(root: Path, now: pd.Timestamp) -> pa.Table:
    """A Databricks job's output: two committed parts, and the part of a task attempt that
    failed and was retried, listed in no _committed_<tid> (the committed rows: 0..19)."""
    root.mkdir(parents=True)
    parts = [f"part-0000{i}-tid-{TID}-{u}-c000.snappy.parquet" for i, u in ((0, "aa"), (1, "bb"))]
    pq.write_table(events(now, 0, 10), root / parts[0])
    pq.write_table(events(now, 10, 20), root / parts[1])
    # the failed attempt of task 1 got part way, with rows of its own (a job that is not
    # deterministic: sampling, now(), an unordered limit)
    pq.write_table(events(now, 500, 505), root / f"part-00001-tid-{TID}-cc-c000.snappy.parquet")
    (root / f"_started_{TID}").write_bytes(b"")
    (root / f"_committed_{TID}").write_text(json.dumps({"added": parts, "removed": []}))
    (root / "_SUCCESS").write_bytes(b"")
    return events(now, 0, 20)


def test_a_databricks_folder_is_read_as_its_commit_markers_list_it(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    committed = databricks_folder(tmp_path / "out", now)
    result = client.send_events(tmp_path / "out", now=now)
    assert result.n_rows == 20
    assert stored(sandbox) == expected(committed, now)


def test_a_glob_of_a_databricks_folder_reads_only_its_committed_parts(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    committed = databricks_folder(tmp_path / "out", now)
    result = client.send_events(str(tmp_path / "out" / "part-*.parquet"), now=now)
    assert result.n_rows == 20
    assert stored(sandbox) == expected(committed, now)


def test_files_a_later_transaction_removed_are_not_read(now: pd.Timestamp, tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    old, new = "part-00000-tid-1-a-c000.parquet", "part-00000-tid-2-b-c000.parquet"
    pq.write_table(events(now, 0, 10), root / old)
    pq.write_table(events(now, 10, 15), root / new)
    (root / "_committed_1").write_text(json.dumps({"added": [old], "removed": []}))
    # an overwrite: its transaction removed the old part (still listed by the store)
    (root / "_committed_2").write_text(json.dumps({"added": [new], "removed": [old]}))
    report = cc.validate_events(root, now=now)
    assert report.n_rows == 5


def test_databricks_markers_count_per_partition_folder(now: pd.Timestamp, tmp_path: Path) -> None:
    for day in ("2026-11-01", "2026-11-02"):
        folder = tmp_path / "out" / f"properties.day={day}"
        databricks_folder(folder, now)  # each partition: its own markers and aborted part
    report = cc.validate_events(tmp_path / "out", now=now)
    assert report.n_rows == 40
    assert set(report.valid["properties.day"]) == {"2026-11-01", "2026-11-02"}


def test_a_databricks_folder_whose_job_has_not_committed_is_refused(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    root = tmp_path / "out"
    databricks_folder(root, now)
    (root / f"_committed_{TID}").unlink()
    with pytest.raises(cc.InputError, match="has not committed"):
        cc.validate_events(root, now=now)


def test_an_unreadable_commit_marker_is_an_input_error(now: pd.Timestamp, tmp_path: Path) -> None:
    root = tmp_path / "out"
    databricks_folder(root, now)
    (root / f"_committed_{TID}").write_text('{"added": ["part-0')
    with pytest.raises(cc.InputError, match=f"_committed_{TID}: a Databricks commit marker"):
        cc.validate_events(root, now=now)
