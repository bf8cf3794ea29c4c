"""Syncs of Delta and Iceberg tables: by a cursor (the filter in the table's scan), by a
Delta table's versions (its change data feed) and by an Iceberg table's append snapshots."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

import churn_connector as cc


def _rows(start: int, stop: int, now: pd.Timestamp, *, cursor: bool = True) -> pa.Table:
    """Events ``start`` .. ``stop - 1``; with ``cursor``, their ``id`` too (a sync without
    a cursor sends every column: an ``id`` would be an unknown one)."""
    made = pa.table(
        {
            "id": pa.array(range(start, stop), pa.int64()),
            "external_user_id": [f"user_{i}" for i in range(start, stop)],
            "event_type": ["login"] * (stop - start),
            "occurred_at": pa.array(
                [now - pd.Timedelta(hours=1, seconds=i) for i in range(start, stop)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    return made if cursor else made.drop_columns(["id"])


def _users(sandbox: cc.Sandbox) -> list[str]:
    return sorted(sandbox.events()["external_user_id"])


def _expected(stop: int) -> list[str]:
    return sorted(f"user_{i}" for i in range(stop))


def _delta(path: Path, rows: pa.Table, *, cdf: bool) -> None:
    configuration = {"delta.enableChangeDataFeed": "true"} if cdf else None
    deltalake.write_deltalake(str(path), rows, mode="append", configuration=configuration)


def test_a_delta_sync_by_cursor_reads_the_new_rows_through_the_scans_filter(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    table, ledger = tmp_path / "events", str(tmp_path / "ledger.sqlite")
    _delta(table, _rows(0, 10, now), cdf=False)
    first = client.send_events(table, cursor="id", ledger=ledger)
    _delta(table, _rows(10, 15, now), cdf=False)
    second = client.send_events(table, cursor="id", ledger=ledger)
    assert (first.n_rows, second.n_rows) == (10, 5)  # read: the filter is in the scan
    assert second.fingerprint["sync"]["read"] == {"after": "9"}
    assert second.fingerprint["sync"]["watermark_after"] == "14"
    assert _users(sandbox) == _expected(15)


def test_a_delta_sync_by_versions_reads_what_the_change_data_feed_inserted(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    table, ledger = tmp_path / "events", str(tmp_path / "ledger.sqlite")
    _delta(table, _rows(0, 10, now, cursor=False), cdf=True)
    first = client.send_events(table, incremental=True, ledger=ledger)
    _delta(table, _rows(10, 14, now, cursor=False), cdf=True)
    _delta(table, _rows(14, 17, now, cursor=False), cdf=True)
    second = client.send_events(table, incremental=True, ledger=ledger)
    third = client.send_events(table, incremental=True, ledger=ledger)
    assert (first.n_rows, second.n_rows, third.n_rows) == (10, 7, 0)
    assert second.fingerprint["sync"]["watermark_after"] == "version 2"
    assert _users(sandbox) == _expected(17)


def test_a_delta_table_without_a_change_data_feed_needs_a_cursor(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    table, ledger = tmp_path / "events", str(tmp_path / "ledger.sqlite")
    _delta(table, _rows(0, 3, now, cursor=False), cdf=False)
    client.send_events(table, incremental=True, ledger=ledger)
    _delta(table, _rows(3, 5, now, cursor=False), cdf=False)
    with pytest.raises(cc.ConfigurationError, match=r"change data feed.*cursor"):
        client.send_events(table, incremental=True, ledger=ledger)


@pytest.fixture
def iceberg(tmp_path: Path, now: pd.Timestamp, request: pytest.FixtureRequest) -> Table:
    catalog = SqlCatalog(
        "local",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=(tmp_path / "warehouse").as_uri(),
    )
    catalog.create_namespace("analytics")
    cursor = "by_cursor" in request.node.name  # the table has the test's columns
    return catalog.create_table("analytics.events", schema=_rows(0, 1, now, cursor=cursor).schema)


def _metadata(table: Table) -> str:
    table.refresh()
    return str(table.metadata_location).removeprefix("file://")


def test_an_iceberg_sync_by_cursor_reads_the_new_rows_through_the_row_filter(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, iceberg: Table
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    iceberg.append(_rows(0, 10, now))
    name = "iceberg-events"  # each snapshot has a metadata file of its own: a name of ours
    first = client.send_events(_metadata(iceberg), cursor="id", ledger=ledger, sync_name=name)
    iceberg.append(_rows(10, 15, now))
    second = client.send_events(_metadata(iceberg), cursor="id", ledger=ledger, sync_name=name)
    assert (first.n_rows, second.n_rows) == (10, 5)
    assert second.fingerprint["sync"]["read"] == {"after": "9"}
    assert _users(sandbox) == _expected(15)


def test_an_iceberg_sync_by_snapshots_reads_the_appends_since_the_last(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, iceberg: Table
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    iceberg.append(_rows(0, 10, now, cursor=False))
    name = "iceberg-events"
    first = client.send_events(_metadata(iceberg), incremental=True, ledger=ledger, sync_name=name)
    iceberg.append(_rows(10, 14, now, cursor=False))
    iceberg.append(_rows(14, 17, now, cursor=False))
    second = client.send_events(_metadata(iceberg), incremental=True, ledger=ledger, sync_name=name)
    third = client.send_events(_metadata(iceberg), incremental=True, ledger=ledger, sync_name=name)
    assert (first.n_rows, second.n_rows, third.n_rows) == (10, 7, 0)
    assert second.fingerprint["sync"]["watermark_after"].startswith("snapshot ")
    assert _users(sandbox) == _expected(17)


def _loaded(start: int, stop: int, now: pd.Timestamp) -> pa.Table:
    """Events with ``loaded_at``, a timestamp cursor one second apart (UTC)."""
    rows = _rows(start, stop, now, cursor=False)
    stamps = [now - pd.Timedelta(hours=2) + pd.Timedelta(seconds=i) for i in range(start, stop)]
    return rows.append_column("loaded_at", pa.array(stamps, pa.timestamp("us", tz="UTC")))


def test_a_timestamp_cursor_narrows_delta_and_iceberg_scans_alike(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, iceberg: Table
) -> None:
    delta = tmp_path / "events"
    deltalake.write_deltalake(str(delta), _loaded(0, 6, now))
    # a table of its own in the fixture's catalog (its namespace made there)
    catalog_table = SqlCatalog(
        "local",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=(tmp_path / "warehouse").as_uri(),
    ).create_table("analytics.loaded", schema=_loaded(0, 1, now).schema)
    catalog_table.append(_loaded(0, 6, now))
    ledger = str(tmp_path / "ledger.sqlite")
    firsts = [
        client.send_events(delta, cursor="loaded_at", ledger=ledger).n_rows,
        client.send_events(
            _metadata(catalog_table), cursor="loaded_at", ledger=ledger, sync_name="ice"
        ).n_rows,
    ]
    deltalake.write_deltalake(str(delta), _loaded(6, 9, now), mode="append")
    catalog_table.append(_loaded(6, 9, now))
    seconds = [
        client.send_events(delta, cursor="loaded_at", ledger=ledger).n_rows,
        client.send_events(
            _metadata(catalog_table), cursor="loaded_at", ledger=ledger, sync_name="ice"
        ).n_rows,
    ]
    assert (firsts, seconds) == ([6, 6], [3, 3])
