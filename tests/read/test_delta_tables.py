"""Delta tables written by delta-rs, sent over real HTTP to the sandbox: the table's rows at
the version the run names, never the Parquet files of every version its folder keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._read import ReadSpec, iter_frames, pinned, row_count, unread_labels
from churn_connector._read.tables import At
from churn_connector._results.runs import HEADER
from churn_connector._validate.document import schema

from .tables import events, expected, stored

pytestmark = pytest.mark.e2e  # real HTTP throughout


def commit_times(path: Path) -> dict[int, pd.Timestamp]:
    """Each version's commit time, as its commitInfo records it."""
    times = {}
    for log in sorted((path / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info:
                times[int(log.stem)] = pd.Timestamp(info["timestamp"], unit="ms", tz="UTC")
    return times


def write_history(path: Path, now: pd.Timestamp) -> dict[int, pa.Table]:
    """Four versions, as a table lives: overwrite, append, overwrite, delete; the folder
    then holds 785 rows of Parquet for a table of 185. Returns each version's rows."""
    versions: dict[int, pa.Table] = {}
    first, second, third = events(now, 0, 200), events(now, 200, 400), events(now, 400, 600)
    write_deltalake(path, first, mode="overwrite")
    versions[0] = first
    time.sleep(0.01)  # one commit per millisecond: as_of can tell them apart
    write_deltalake(path, second, mode="append")
    versions[1] = pa.concat_tables([first, second])
    time.sleep(0.01)
    write_deltalake(path, third, mode="overwrite")
    versions[2] = third
    time.sleep(0.01)
    DeltaTable(path).delete('"properties.seq" >= 585')
    versions[3] = third.slice(0, 185)
    return versions


@pytest.fixture
def delta(tmp_path: Path, now: pd.Timestamp) -> tuple[Path, dict[int, pa.Table]]:
    path = tmp_path / "events_delta"
    return path, write_history(path, now)


def test_a_delta_table_is_sent_at_its_current_version_not_file_by_file(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, versions = delta
    on_disk = sum(pq.read_metadata(p).num_rows for p in path.glob("*.parquet"))
    assert on_disk == 785  # every version's files are still there
    result = client.send_events(path, now=now)
    assert result.counts["sent"] == 185 and result.n_rows == 185
    assert stored(sandbox) == expected(versions[3], now)


def test_version_sends_an_older_version_of_a_delta_table(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, versions = delta
    result = client.send_events(path, now=now, version=1)
    assert result.counts["sent"] == 400
    assert stored(sandbox) == expected(versions[1], now)


def test_as_of_sends_the_version_current_at_that_instant(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, versions = delta
    # delta-rs dates a version by its log file's modification time (the protocol's commit
    # time), which trails commitInfo's timestamp by more than a millisecond on a loaded
    # machine: an instant halfway between the files of versions 1 and 2
    one, two = (
        pd.Timestamp((path / "_delta_log" / f"{v:020d}.json").stat().st_mtime_ns, tz="UTC")
        for v in (1, 2)
    )
    between = (one + (two - one) / 2).floor("us")  # as far as a datetime goes
    result = client.send_events(path, now=now, as_of=between.isoformat())
    assert result.fingerprint["version"] == 1
    assert stored(sandbox) == expected(versions[1], now)


def test_as_of_before_the_table_existed_is_refused(
    now: pd.Timestamp, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, _ = delta
    before = commit_times(path)[0] - pd.Timedelta(seconds=1)
    with pytest.raises(cc.InputError, match="did not exist yet at"):
        cc.validate_events(path, now=now, as_of=before)


def test_as_of_in_the_future_is_refused(delta: tuple[Path, dict[int, pa.Table]]) -> None:
    path, _ = delta
    with pytest.raises(cc.ConfigurationError, match="is in the future"):
        cc.validate_events(path, as_of=pd.Timestamp.now(tz="UTC") + pd.Timedelta(hours=1))


def test_a_naive_as_of_is_refused(delta: tuple[Path, dict[int, pa.Table]]) -> None:
    path, _ = delta
    with pytest.raises(cc.ConfigurationError, match="as_of must be timezone-aware"):
        cc.validate_events(path, as_of="2026-11-01 00:00:00")


def test_a_version_the_delta_table_does_not_have_is_refused(
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, _ = delta
    with pytest.raises(cc.InputError, match="has no version 9: its versions run to 3"):
        cc.validate_events(path, version=9)


def test_version_and_as_of_together_are_refused(delta: tuple[Path, dict[int, pa.Table]]) -> None:
    path, _ = delta
    with pytest.raises(cc.ConfigurationError, match="version and as_of each name the version"):
        cc.validate_events(path, version=1, as_of="2026-11-01T00:00:00Z")


def test_snapshot_id_for_a_delta_table_is_refused(
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, _ = delta
    with pytest.raises(cc.ConfigurationError, match="snapshot_id: for an Iceberg table"):
        cc.validate_events(path, snapshot_id=1)


@pytest.mark.parametrize(
    "make",
    [
        lambda path, table: table.to_pandas(),
        lambda path, table: table,
        lambda path, table: pq.write_table(table, path / "e.parquet") or path / "e.parquet",
    ],
    ids=["DataFrame", "Arrow table", "Parquet file"],
)
def test_version_for_an_input_without_versions_is_refused_not_ignored(
    now: pd.Timestamp, tmp_path: Path, make: Callable[[Path, pa.Table], Any]
) -> None:
    data = make(tmp_path, events(now, 0, 3))
    with pytest.raises(cc.ConfigurationError, match="version: for a Delta or Iceberg table"):
        cc.validate_events(data, now=now, version=2)


def test_a_deltatable_object_is_sent_at_the_version_it_loaded(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, versions = delta
    result = client.send_events(DeltaTable(path, version=2), now=now)
    assert result.fingerprint["version"] == 2
    assert stored(sandbox) == expected(versions[2], now)


def test_version_with_a_deltatable_object_is_refused(
    delta: tuple[Path, dict[int, pa.Table]],
) -> None:
    path, _ = delta
    with pytest.raises(cc.ConfigurationError, match=r"dt\.load_as_version"):
        cc.validate_events(DeltaTable(path), version=1)


def test_a_partitioned_delta_table_keeps_its_partition_columns(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    table = events(now, 0, 40, **{"properties.plan": ["pro", "free"] * 20})
    write_deltalake(tmp_path / "t", table, partition_by=["event_type", "properties.plan"])
    client.send_events(tmp_path / "t", now=now)
    assert stored(sandbox) == expected(table, now)


def test_a_column_mapped_delta_table_is_read_by_its_column_names(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    # its files name the columns col-<uuid>; delta-rs's pyarrow dataset reads them as nulls
    table = events(now, 0, 30)
    write_deltalake(tmp_path / "t", table, configuration={"delta.columnMapping.mode": "name"})
    part = next((tmp_path / "t").rglob("part-*.parquet"))  # under a random prefix folder
    assert all(name.startswith("col-") for name in pq.read_schema(part).names)
    result = client.send_events(tmp_path / "t", now=now)
    assert result.counts["sent"] == 30
    assert stored(sandbox) == expected(table, now)


def test_a_delta_table_with_deletion_vectors_enabled_is_read_after_a_delete(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    table = events(now, 0, 30)
    path = tmp_path / "t"
    write_deltalake(path, table, configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(path).delete('"properties.seq" < 10')
    assert "deletionVectors" in (DeltaTable(path).protocol().reader_features or [])
    assert row_count(pinned(path)) == 20
    client.send_events(path, now=now)
    assert stored(sandbox) == expected(table.slice(10), now)


def test_a_run_reads_the_version_it_pinned_whatever_is_committed_meanwhile(
    now: pd.Timestamp, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, _ = delta
    table = pinned(path, ReadSpec())
    write_deltalake(path, events(now, 900, 950), mode="append")  # version 4, after the pin
    read = sum(len(frame) for frame in iter_frames(table))
    again = sum(len(frame) for frame in iter_frames(table))
    assert read == again == 185
    assert sum(len(frame) for frame in iter_frames(path)) == 235  # the current version: 4


def test_the_rows_of_a_delta_table_are_labelled_by_their_place(
    now: pd.Timestamp, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, _ = delta
    report = cc.validate_events(path, now=now, slice_rows=50)
    assert list(report.valid.index) == list(range(185))
    # known without reading, for the progress total and a stopped run's unread rows
    assert row_count(pinned(path, ReadSpec(at=At(version=1)))) == 400
    unread = unread_labels(pinned(path), 183)
    assert unread is not None and list(unread) == [183, 184]


def test_identities_are_sent_from_the_current_version_of_a_delta_table(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    users = pa.table({"external_user_id": ["a", "b", "c"], "traits.plan": ["pro", "free", "pro"]})
    write_deltalake(tmp_path / "users", users)
    write_deltalake(tmp_path / "users", users.slice(0, 1), mode="overwrite")
    result = client.identify(tmp_path / "users")
    assert result.counts["sent"] == 1
    assert list(sandbox.users()["external_user_id"]) == ["a"]


def test_a_resend_reads_the_version_the_first_run_read(
    sandbox: cc.Sandbox, now: pd.Timestamp, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, versions = delta
    sandbox.script_faults([cc.Fault("5xx"), cc.Fault("5xx")])
    client = cc.Client(
        sandbox.base_url,
        sandbox.api_key,
        max_concurrency=1,
        retry=cc.RetryPolicy(max_attempts=2),
    )
    first = client.send_events(path, now=now, progress=False)
    assert first.counts["failed"] > 0
    write_deltalake(path, events(now, 900, 950), mode="append")  # committed since
    again = cc.resend(first.rows, path, sandbox.base_url, sandbox.api_key, now=now)
    assert again.counts["sent"] == first.counts["failed"]
    assert stored(sandbox) == expected(versions[3], now)


def test_the_receipt_and_the_rows_file_record_the_version_read(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    delta: tuple[Path, dict[int, pa.Table]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, _ = delta
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    rows, receipts = tmp_path / "rows.parquet", tmp_path / "receipts"
    argv = ["send", "events", str(path), "--version", "1", "--base-url", sandbox.base_url]
    code = main([*argv, "--rows", str(rows), "--receipts", str(receipts), "-q"])
    assert code == 0
    receipt = json.loads((receipts / "receipts.jsonl").read_text())
    assert receipt["input"]["kind"] == "delta" and receipt["input"]["version"] == 1
    assert receipt["counts"]["sent"] == 400
    header = json.loads(pq.read_schema(rows).metadata[HEADER.encode()])
    assert header["input"] == receipt["input"]


def test_cli_refuses_a_naive_as_of_with_exit_3(
    delta: tuple[Path, dict[int, pa.Table]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = delta
    assert main(["validate", "events", str(path), "--as-of", "2026-11-01 00:00"]) == 3
    assert "--as-of must be timezone-aware" in capsys.readouterr().err


def test_without_the_delta_extra_python_raises_a_configuration_error(
    delta: tuple[Path, dict[int, pa.Table]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = delta
    monkeypatch.setitem(sys.modules, "deltalake", None)  # as if it were not installed
    with pytest.raises(cc.ConfigurationError, match=r'pip install "churn-connector\[delta\]"'):
        cc.validate_events(path)


def test_without_the_delta_extra_the_cli_exits_3_naming_the_install_and_sends_nothing(
    sandbox: cc.Sandbox, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, _ = delta
    shim = (
        "import sys\n"
        "sys.modules['deltalake'] = None  # as if the extra were not installed\n"
        "from churn_connector._cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", shim, "send", "events", str(path), "--base-url", sandbox.base_url],
        env={**os.environ, "CHURN_API_KEY": sandbox.api_key},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install "churn-connector[delta]"' in lines[0]
    assert f"{path} is a Delta table" in lines[0]
    assert sandbox.stats()["requests"] == {}  # nothing sent


def test_the_json_report_of_a_delta_table_names_its_version_and_follows_its_schema(
    now: pd.Timestamp, delta: tuple[Path, dict[int, pa.Table]]
) -> None:
    path, _ = delta
    doc = json.loads(cc.validate_events(path, now=now, version=2).to_json())
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["input"]["path"] == str(path.absolute()) and doc["input"]["files"] == []
    fingerprint = doc["input"]["fingerprint"]
    assert (fingerprint["kind"], fingerprint["version"], fingerprint["rows"]) == ("delta", 2, 200)


def test_cli_send_of_a_delta_table_exits_1_when_some_rows_are_invalid(
    sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    table = events(now, 0, 10, event_type=["login"] * 9 + ["Not Snake"])
    write_deltalake(tmp_path / "t", table)
    assert main(["send", "events", str(tmp_path / "t"), "--base-url", sandbox.base_url]) == 1
    assert sandbox.stats()["stored"] == 9


def test_cli_send_of_a_delta_table_exits_2_when_rows_are_not_delivered(
    sandbox: cc.Sandbox, delta: tuple[Path, dict[int, pa.Table]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = delta
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    sandbox.set_faults(error_rate=1.0)
    assert main(["send", "events", str(path), "--base-url", sandbox.base_url, "-q"]) == 2


@pytest.mark.parametrize(
    "given", [lambda p: p.parent, lambda p: str(p / "*.parquet")], ids=["its parent", "a glob"]
)
def test_a_folder_or_glob_reaching_into_a_delta_table_is_refused(
    delta: tuple[Path, dict[int, pa.Table]], given: Callable[[Path], Any]
) -> None:
    path, _ = delta
    with pytest.raises(cc.InputError, match=f"reaches into a Delta table, {path}:"):
        cc.validate_events(given(path))


def test_every_read_of_a_delta_version_gives_its_rows_in_the_same_order(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    # DataFusion's default spreads the files over the cores and interleaves their batches:
    # reads of one version gave their rows in different orders
    for k in range(20):
        part = events(now, 1000 * k, 1000 * k + 1000, **{"properties.day": str(k % 7)})
        write_deltalake(tmp_path / "t", part, mode="append", partition_by=["properties.day"])
    table = pinned(tmp_path / "t")
    spec = ReadSpec(rows=8192)
    orders = {
        tuple(user for frame in iter_frames(table, spec) for user in frame["external_user_id"])
        for _ in range(5)
    }
    assert len(orders) == 1
