"""Iceberg tables written by pyiceberg (its SQL catalog on SQLite), sent over real HTTP to
the sandbox: the table's rows at the snapshot the run names, found by metadata file, table
folder or catalog URL, never its metadata JSON read as NDJSON."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import churn_connector as cc
from churn_connector._cli import main

from .tables import events, expected, stored

pytestmark = pytest.mark.e2e  # real HTTP throughout


class Iceberg(NamedTuple):
    table: Table  # as the catalog loads it now
    folder: Path  # the table's folder (data/, metadata/)
    snapshots: list[int]  # every snapshot id, oldest first
    rows: dict[int, pa.Table]  # each snapshot's rows
    catalog: dict[str, str]  # the catalog's properties


def snapshot_rows(table: Table) -> dict[int, pa.Table]:
    """Each snapshot's rows, as pyiceberg reads them (the oracle)."""
    return {
        s.snapshot_id: table.scan(snapshot_id=s.snapshot_id).to_arrow() for s in table.snapshots()
    }


@pytest.fixture
def iceberg(tmp_path: Path, now: pd.Timestamp) -> Iceberg:
    """append, append, overwrite, delete: a table of 185 rows whose folder holds 785."""
    properties = {
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": (tmp_path / "warehouse").as_uri(),
    }
    catalog = SqlCatalog("local", **properties)
    catalog.create_namespace("analytics")
    first = events(now, 0, 200)
    table = catalog.create_table("analytics.events", schema=first.schema)
    for rows in (first, events(now, 200, 400)):
        table.append(rows)
        time.sleep(0.01)  # one snapshot per millisecond: as_of can tell them apart
    table.overwrite(events(now, 400, 600))
    time.sleep(0.01)
    deleted = ", ".join(f"'u{i}'" for i in range(585, 600))
    table.delete(f"external_user_id in ({deleted})")
    table = catalog.load_table("analytics.events")
    folder = Path(str(table.location()).removeprefix("file://"))
    return Iceberg(
        table,
        folder,
        [s.snapshot_id for s in table.snapshots()],
        snapshot_rows(table),
        {**properties, "type": "sql"},
    )


def metadata_file(iceberg: Iceberg) -> Path:
    return Path(str(iceberg.table.metadata_location).removeprefix("file://"))


def test_an_iceberg_table_is_sent_at_its_current_snapshot_by_its_metadata_file(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, iceberg: Iceberg
) -> None:
    assert sum(1 for _ in (iceberg.folder / "data").glob("*.parquet")) > 1
    result = client.send_events(metadata_file(iceberg), now=now)
    assert result.counts["sent"] == 185
    assert stored(sandbox) == expected(iceberg.rows[iceberg.snapshots[-1]], now)


def test_an_iceberg_table_folder_is_read_at_its_newest_metadata(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, iceberg: Iceberg
) -> None:
    result = client.send_events(iceberg.folder, now=now)
    assert result.fingerprint["snapshot_id"] == iceberg.snapshots[-1]
    assert stored(sandbox) == expected(iceberg.rows[iceberg.snapshots[-1]], now)


def test_an_iceberg_catalog_url_is_read_through_pyicebergs_configuration(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    iceberg: Iceberg,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in iceberg.catalog.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LOCAL__{key.upper()}", value)
    result = client.send_events("iceberg://local/analytics.events", now=now)
    assert result.fingerprint["table"] == "iceberg://local/analytics.events"
    assert stored(sandbox) == expected(iceberg.rows[iceberg.snapshots[-1]], now)


def test_snapshot_id_sends_an_older_snapshot(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, iceberg: Iceberg
) -> None:
    second = iceberg.snapshots[1]
    result = client.send_events(iceberg.folder, now=now, snapshot_id=second)
    assert result.counts["sent"] == 400
    assert stored(sandbox) == expected(iceberg.rows[second], now)


def test_as_of_sends_the_snapshot_current_at_that_instant(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, iceberg: Iceberg
) -> None:
    first = iceberg.table.snapshot_by_id(iceberg.snapshots[0])
    assert first is not None
    then = pd.Timestamp(first.timestamp_ms, unit="ms", tz="UTC") + pd.Timedelta(microseconds=500)
    result = client.send_events(iceberg.folder, now=now, as_of=then)
    assert result.fingerprint["snapshot_id"] == iceberg.snapshots[0]
    assert stored(sandbox) == expected(iceberg.rows[iceberg.snapshots[0]], now)


def test_a_pyiceberg_table_object_is_sent_at_its_current_snapshot(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, iceberg: Iceberg
) -> None:
    client.send_events(iceberg.table, now=now)
    assert stored(sandbox) == expected(iceberg.rows[iceberg.snapshots[-1]], now)


def test_the_metadata_a_version_hint_names_is_read(now: pd.Timestamp, iceberg: Iceberg) -> None:
    metadata = iceberg.folder / "metadata"
    first = sorted(metadata.glob("00001-*.metadata.json"))[0]  # the first append's
    shutil.copy(first, metadata / "v1.metadata.json")  # as a file-system table names it
    (metadata / "version-hint.text").write_text("1\n")
    report = cc.validate_events(iceberg.folder, now=now)
    assert report.fingerprint["snapshot_id"] == iceberg.snapshots[0]
    assert report.n_rows == 200


def test_a_folder_whose_newest_metadata_is_ambiguous_is_refused_naming_the_candidates(
    iceberg: Iceberg,
) -> None:
    newest = metadata_file(iceberg)
    version = newest.name.split("-")[0]
    rival = newest.with_name(f"{version}-00000000-0000-0000-0000-000000000000.metadata.json")
    shutil.copy(newest, rival)
    with pytest.raises(cc.InputError, match="2 metadata files claim version") as info:
        cc.validate_events(iceberg.folder)
    assert newest.name in str(info.value) and rival.name in str(info.value)


def test_an_unknown_snapshot_is_refused(iceberg: Iceberg) -> None:
    with pytest.raises(cc.InputError, match="has no snapshot 12345"):
        cc.validate_events(iceberg.folder, snapshot_id=12345)


def test_version_for_an_iceberg_table_is_refused(iceberg: Iceberg) -> None:
    with pytest.raises(cc.ConfigurationError, match="version: for a Delta table"):
        cc.validate_events(iceberg.folder, version=1)


def test_an_unconfigured_catalog_is_refused_naming_its_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no .pyiceberg.yaml there
    with pytest.raises(cc.ConfigurationError, match="PYICEBERG_CATALOG__NOWHERE__URI"):
        cc.validate_events("iceberg://nowhere/analytics.events")


def test_a_table_the_catalog_does_not_hold_is_an_input_error(
    iceberg: Iceberg, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in iceberg.catalog.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LOCAL__{key.upper()}", value)
    with pytest.raises(cc.InputError, match=r"catalog 'local' has no table analytics\.nope"):
        cc.validate_events("iceberg://local/analytics.nope")


def test_an_iceberg_table_without_a_snapshot_holds_no_rows(tmp_path: Path) -> None:
    catalog = SqlCatalog(
        "local",
        uri=f"sqlite:///{tmp_path / 'c.db'}",
        warehouse=(tmp_path / "wh").as_uri(),
    )
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.empty", schema=pa.schema([("external_user_id", pa.string())]))
    report = cc.validate_identities(table)
    assert report.n_rows == 0 and report.ok
    assert report.fingerprint["snapshot_id"] is None


def test_without_the_iceberg_extra_python_raises_a_configuration_error(
    iceberg: Iceberg, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyiceberg", None)  # as if it were not installed
    with pytest.raises(cc.ConfigurationError, match=r'pip install "churn-connector\[iceberg\]"'):
        cc.validate_events(iceberg.folder)


def test_cli_send_of_an_iceberg_catalog_url_takes_snapshot_id_and_records_it(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    iceberg: Iceberg,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in iceberg.catalog.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LOCAL__{key.upper()}", value)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    second, receipts = iceberg.snapshots[1], tmp_path / "receipts"
    argv = ["send", "events", "iceberg://local/analytics.events", "--snapshot-id", str(second)]
    code = main([*argv, "--base-url", sandbox.base_url, "--receipts", str(receipts), "-q"])
    assert code == 0
    receipt = json.loads((receipts / "receipts.jsonl").read_text())
    assert receipt["input"]["kind"] == "iceberg" and receipt["input"]["snapshot_id"] == second
    assert stored(sandbox) == expected(iceberg.rows[second], now)
