"""The ledger on SQLite, the default: a re-run skips what the API acknowledged, with the
ledger given as a path; what the file holds on disk, a dry run that creates no file, paths
that cannot be used. What every backend does alike (only acknowledged requests recorded,
identify re-sending only changed users, dry runs, one ledger per API and key) is
tests/ledger/test_backends.py's, SQLite included."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._ledger.sqlite import SqliteLedger
from tests.conftest import MakeEvents


def test_a_rerun_with_a_ledger_sends_nothing_already_acknowledged(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    first = client.send_events(events, now=now, ledger=ledger)
    assert first.counts["sent"] == len(events)
    again = client.send_events(events, now=now, ledger=ledger)
    assert again.counts == {
        "sent": 0,
        "invalid": 0,
        "rejected": 0,
        "failed": 0,
        "skipped": len(events),
        "expired": 0,
        "held": 0,
    }
    assert set(again.rows["error"]) == {"already delivered (ledger)"}
    assert len(sandbox.requests_log()) == 1  # only the first run's single batch


def ledger_bytes(path: Path) -> bytes:
    """Every byte the ledger left on disk: the file, and its WAL or journal if one is left."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def test_the_ledger_holds_keys_and_digests_only(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    client.send_events(events, now=now, ledger=ledger)
    blob = ledger_bytes(ledger)
    assert b"user_0" not in blob  # no user ids or values from events
    assert b"page_view" not in blob


def test_the_search_for_values_in_the_ledger_finds_what_is_written(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    # the positive control of the test above: the same search, on the same kind of run,
    # finds what the ledger does record (every message id and the API's address), so
    # "user_0 is not found" means it is not there, not that the search looks elsewhere
    ledger = tmp_path / "ledger.sqlite"
    result = client.send_events(events, now=now, ledger=ledger)
    blob = ledger_bytes(ledger)
    ids = result.rows["message_id"].tolist()
    assert len(ids) == len(events)
    assert all(mid.encode() in blob for mid in ids)
    assert client.config.base_url.encode() in blob


def test_cli_send_with_ledger_skips_on_rerun(
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    assert main(["send", "events", str(path), "--ledger", str(ledger)]) == 0
    assert main(["send", "events", str(path), "--ledger", str(ledger)]) == 0
    assert "skipped 10" in capsys.readouterr().out


def test_a_dry_run_creates_no_ledger_file(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    client.send_events(events, now=now, dry_run=True, ledger=ledger)
    assert not ledger.exists()


def test_an_unusable_ledger_path_is_a_configuration_error(
    client: cc.Client, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    (tmp_path / "notadb.sqlite").write_text("hello")
    with pytest.raises(cc.ConfigurationError, match="ledger"):
        client.send_events(events, now=now, ledger=tmp_path / "notadb.sqlite")


class _BrokenDatabase:
    """A database whose every statement fails, as a full disk or broken file would."""

    in_transaction = False

    def execute(self, *args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    executemany = execute


def test_a_ledger_that_cannot_be_written_stops_the_run_naming_the_file(
    client: cc.Client,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = make_events(now, n=30)
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    real, reader = ledger._db, ledger._reader
    ledger._db = ledger._reader = _BrokenDatabase()  # type: ignore[assignment]
    with (
        caplog.at_level(logging.WARNING, logger="churn_connector"),
        pytest.raises(cc.LedgerError, match=r"ledger\.sqlite") as info,
    ):
        client.send_events(events, now=now, ledger=ledger, batch_size=10, max_concurrency=1)
    ledger._db, ledger._reader = real, reader
    ledger.close()
    assert "ledger read failed" in caplog.text  # reads fail soft: sending is safe
    error = info.value
    assert error.path == str(tmp_path / "ledger.sqlite")
    assert sum(error.counts.values()) == len(events)
    # stopped at the first failed write (the re-id guard's, before any request left), not
    # 40 warnings later
    assert error.counts["sent"] == 0
    assert len(sandbox.events()) == 0


def test_a_corrupt_ledger_fails_the_cli_with_exit_3_and_a_rerun_stores_nothing_twice(
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    ledger = tmp_path / "ledger.sqlite"
    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    make_events(now, n=300).iloc[:150].to_parquet(first)
    make_events(now, n=300).iloc[150:].to_parquet(second)
    base = ["send", "events", "--base-url", sandbox.base_url, "--ledger", str(ledger)]
    assert main([*base[:2], str(first), *base[2:]]) == 0
    with sqlite3.connect(ledger) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(ledger.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # every page but the header page
    ledger.write_bytes(bytes(data))
    rows = tmp_path / "rows.csv"
    code = main([*base[:2], str(second), *base[2:], "--rows", str(rows)])
    assert code == 3
    assert str(ledger) in capsys.readouterr().err
    assert len(pd.read_csv(rows)) == 150
    ledger.unlink()
    assert main([*base[:2], str(second), *base[2:]]) == 0
    assert sandbox.stats()["stored"] == 300


def _rows_in(path: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return set(db.execute("SELECT key, digest FROM acknowledged"))


def test_buffered_acknowledgements_are_known_before_they_are_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record("s", "events", [("a", "1")])  # the first: written at once
        ledger.record("s", "events", [("b", "2"), ("a", "3")])  # buffered
        assert _rows_in(path) == {("a", "1")}
        assert ledger.known("s", "events", ["a", "b", "c"]) == {"a": "3", "b": "2"}
        assert ledger.known("s", "identities", ["a"]) == {}
        ledger.flush()
        assert _rows_in(path) == {("a", "3"), ("b", "2")}


def test_a_forgotten_key_leaves_no_buffered_record_behind(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record("s", "identities", [("u1", "old")])
        ledger.record("s", "identities", [("u2", "old")])  # buffered
        ledger.forget("s", "identities", ["u2"])
        assert ledger.known("s", "identities", ["u1", "u2"]) == {"u1": "old"}
    assert _rows_in(path) == {("u1", "old")}


def test_closing_writes_what_was_buffered(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    ledger = SqliteLedger(path)
    ledger.record("s", "events", [("a", "1")])
    ledger.record("s", "events", [("b", "2")])
    ledger.close()
    assert _rows_in(path) == {("a", "1"), ("b", "2")}
