"""The same sync on the other growing sources: identities by a cursor, a folder of part
files (the files not seen before), and a DataFrame (the cursor applied as a filter)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.sync.sources import QUERY, SqliteSource, rows
from tests.sync.test_cursor_sync import watermark

USERS = 'SELECT uid AS external_user_id, version, plan AS "traits.plan" FROM users'


def test_identities_sync_sends_the_users_changed_since_the_last_run(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    source = tmp_path / "users.sqlite"
    ledger = str(tmp_path / "ledger.sqlite")
    with sqlite3.connect(source) as db:
        db.execute("CREATE TABLE users (uid TEXT, version INTEGER, plan TEXT)")
        db.executemany(
            "INSERT INTO users VALUES (?, ?, ?)", [(f"u{i}", i, "free") for i in range(5)]
        )
    first = client.identify(cc.sql(USERS, source), cursor="version", ledger=ledger)
    with sqlite3.connect(source) as db:  # u1 upgrades; u2 is written again, unchanged
        db.execute("UPDATE users SET plan = 'pro', version = 5 WHERE uid = 'u1'")
        db.execute("UPDATE users SET version = 6 WHERE uid = 'u2'")
    second = client.identify(cc.sql(USERS, source), cursor="version", ledger=ledger)
    assert (first.n_rows, second.n_rows) == (5, 2)
    assert (second.counts["sent"], second.counts["skipped"]) == (1, 1)  # the digest decides
    users = sandbox.users().set_index("external_user_id")
    traits: dict[str, str] = users.loc["u1", "traits"]  # type: ignore[assignment]
    assert traits["plan"] == "pro"


def _part(folder: Path, name: str, start: int, stop: int, now: pd.Timestamp) -> None:
    pd.DataFrame(
        {
            "external_user_id": [f"user_{i}" for i in range(start, stop)],
            "event_type": "login",
            "occurred_at": [now - pd.Timedelta(hours=1, seconds=i) for i in range(start, stop)],
        }
    ).to_parquet(folder / name)


def test_a_folder_sync_reads_only_the_files_not_seen_before(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    ledger = str(tmp_path / "ledger.sqlite")
    _part(folder, "part-0.parquet", 0, 10, now)
    first = client.send_events(folder, incremental=True, ledger=ledger)
    _part(folder, "part-1.parquet", 10, 14, now)
    second = client.send_events(folder, incremental=True, ledger=ledger)
    third = client.send_events(folder, incremental=True, ledger=ledger)
    assert (first.n_rows, second.n_rows, third.n_rows) == (10, 4, 0)
    mark = watermark(ledger)
    assert mark is not None and mark.shown == "2 files"


def test_a_folder_sync_reads_a_file_again_when_it_was_rewritten(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    ledger = str(tmp_path / "ledger.sqlite")
    _part(folder, "part-0.parquet", 0, 10, now)
    client.send_events(folder, incremental=True, ledger=ledger)
    _part(folder, "part-0.parquet", 0, 12, now)  # rewritten: another size
    again = client.send_events(folder, incremental=True, ledger=ledger)
    assert (again.n_rows, again.counts["sent"], again.counts["skipped"]) == (12, 2, 10)


def test_a_dataframe_sync_applies_the_cursor_as_a_filter(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    frame = pd.DataFrame(
        {
            "external_user_id": [f"user_{i}" for i in range(8)],
            "event_type": "login",
            "occurred_at": [now - pd.Timedelta(hours=1, seconds=8 - i) for i in range(8)],
        }
    )
    first = client.send_events(
        frame.iloc[:5], cursor="occurred_at", ledger=ledger, sync_name="frame"
    )
    second = client.send_events(frame, cursor="occurred_at", ledger=ledger, sync_name="frame")
    assert (first.n_rows, second.n_rows, second.counts["sent"]) == (5, 3, 3)


def test_a_dataframe_sync_needs_a_name(client: cc.Client, tmp_path: Path) -> None:
    with pytest.raises(cc.ConfigurationError, match="sync_name"):
        client.send_events(pd.DataFrame({"x": [1]}), cursor="x", ledger=str(tmp_path / "l.sqlite"))


def test_a_single_file_is_refused_for_an_incremental_sync(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    _part(tmp_path, "one.parquet", 0, 3, now)
    with pytest.raises(cc.ConfigurationError, match="sync the folder"):
        client.send_events(
            tmp_path / "one.parquet", incremental=True, ledger=str(tmp_path / "l.sqlite")
        )


def test_a_backfill_by_since_and_until_reads_a_range_without_a_ledger(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    source = SqliteSource(tmp_path / "s.sqlite")
    source.add(rows(0, 10, now))
    result = client.send_events(cc.sql(QUERY, source.connection), cursor="id", since=3, until=7)
    assert result.n_rows == 4
