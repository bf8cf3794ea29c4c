"""The watermark means the same in the three homes of a ledger (a SQLite file, PostgreSQL,
object storage), and ``churn-connector ledger syncs`` lists it, sets it and resets it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.ledger.conftest import location
from tests.ledger.servers import PG_PASSWORD
from tests.sync.sources import QUERY, SqliteSource, rows
from tests.sync.test_cursor_sync import watermark


@pytest.fixture(params=["sqlite", "postgres", "file"])
def ledger_at(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh ledger in each home; PostgreSQL's without the password (PGPASSWORD has it)."""
    url = location(request.param, request, tmp_path)
    if request.param == "postgres":
        monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
        url = url.replace(f":{PG_PASSWORD}@", "@")
    return url


def test_the_watermark_is_the_same_in_every_ledger(
    ledger_at: str, client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    source = SqliteSource(tmp_path / "source.sqlite")
    source.add(rows(0, 10, now))
    query = cc.sql(QUERY, source.connection)
    client.send_events(query, cursor="id", ledger=ledger_at, sync_name="product_events")
    source.add(rows(10, 13, now))
    again = client.send_events(query, cursor="id", ledger=ledger_at, sync_name="product_events")
    assert again.n_rows == 3
    mark = watermark(ledger_at, "product_events")
    assert mark is not None
    assert (mark.by, mark.cursor, mark.shown) == ("cursor", "id", "12")


def test_ledger_syncs_lists_sets_and_resets_a_watermark(
    ledger_at: str,
    sandbox: cc.Sandbox,
    client: cc.Client,
    now: pd.Timestamp,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = SqliteSource(tmp_path / "source.sqlite")
    source.add(rows(0, 10, now))
    query = cc.sql(QUERY, source.connection)
    client.send_events(query, cursor="id", ledger=ledger_at, sync_name="daily")
    assert main(["ledger", "syncs", ledger_at]) == 0
    listed = capsys.readouterr().out
    assert "daily" in listed and " 9 " in listed and PG_PASSWORD not in listed
    assert main(["ledger", "syncs", ledger_at, "--set", "daily=4"]) == 0
    assert "watermark 9 -> 4" in capsys.readouterr().out
    again = client.send_events(query, cursor="id", ledger=ledger_at, sync_name="daily")
    assert (again.n_rows, again.counts["skipped"]) == (5, 5)
    assert main(["ledger", "syncs", ledger_at, "--reset", "daily"]) == 0
    assert watermark(ledger_at, "daily") is None
    whole = client.send_events(query, cursor="id", ledger=ledger_at, sync_name="daily")
    assert whole.n_rows == 10


def test_ledger_syncs_set_refuses_a_value_of_another_type(
    ledger_at: str,
    client: cc.Client,
    now: pd.Timestamp,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = SqliteSource(tmp_path / "source.sqlite")
    source.add(rows(0, 3, now))
    client.send_events(
        cc.sql(QUERY, source.connection), cursor="id", ledger=ledger_at, sync_name="daily"
    )
    assert main(["ledger", "syncs", ledger_at, "--set", "daily=2026-01-01"]) == 3
    assert "not one of the integers" in capsys.readouterr().err
