"""``cursor=`` with a ledger: each run reads only the rows past the sync's watermark (the
filter pushed into the query), a lookback re-reads a window for late rows at no request's
cost, and the watermark never passes a row that was not delivered or settled for good."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._read import Bound
from churn_connector._read.databases import open_database
from churn_connector._sync import SYNC_KIND, Watermark
from tests.ledger.servers import PostgresServer
from tests.sync.sources import PLAIN, QUERY, PostgresSource, Source, rows


def watermark(ledger: str, name: str | None = None) -> Watermark | None:
    """The one sync the ledger holds (or ``name``), read back."""
    with cc.Ledger(ledger) as opened:
        found = [
            (key, value)
            for batch in opened.batches()
            for kind, key, value in zip(
                batch.column("kind").to_pylist(),
                batch.column("key").to_pylist(),
                batch.column("digest").to_pylist(),
                strict=True,
            )
            if kind == SYNC_KIND and (name is None or key == name)
        ]
    assert len(found) <= 1
    return Watermark.parse(*found[0]) if found else None


def test_each_run_reads_only_the_rows_past_the_watermark(
    source: Source, client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    source.add(rows(0, 10, now))
    first = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    source.add(rows(10, 15, now))
    second = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    assert (first.n_rows, second.n_rows) == (10, 5)
    assert second.fingerprint["sync"]["read"] == {"after": "9"}
    assert second.fingerprint["sync"]["watermark_after"] == "14"
    assert len(sandbox.events()) == 15


def test_the_filter_is_pushed_into_the_query_with_bound_parameters(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    path.touch()
    query = cc.sql("SELECT * FROM events", path).narrowed(Bound("id", lower=9))
    database = open_database(str(path))
    try:
        text, values = query.statement(database)
    finally:
        database.close()
    assert 'WHERE ("id" > ?) OR "id" IS NULL' in text and 'ORDER BY "id"' in text
    assert values == [9] and "9" not in text


def test_a_late_row_inside_the_lookback_is_sent_and_the_rows_read_again_cost_no_request(
    source: Source, client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    source.add(rows(0, 10, now))
    client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    late = rows(7, 8, now)[0]
    source.add([(late[0], "user_late", *late[2:])])  # committed after the run, cursor 7
    again = client.send_events(
        cc.sql(QUERY, source.connection), cursor="id", lookback=5, ledger=ledger
    )
    assert again.fingerprint["sync"]["read"] == {"after": "4"}
    assert (again.counts["sent"], again.counts["skipped"]) == (1, 5)
    assert len(again.chunks) == 1
    assert "user_late" in set(sandbox.events()["external_user_id"])


def test_a_timestamp_cursor_with_a_duration_lookback(
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    client: cc.Client,
    now: pd.Timestamp,
    tmp_path: Path,
) -> None:
    source = PostgresSource(postgres, monkeypatch)
    ledger = str(tmp_path / "ledger.sqlite")
    query = PLAIN.replace("ts AS occurred_at", "ts AS occurred_at, ts AS loaded_at")
    source.add(rows(0, 10, now))
    client.send_events(cc.sql(query, source.connection), cursor="loaded_at", ledger=ledger)
    mark = watermark(ledger)
    assert mark is not None and mark.value is not None and mark.value.type == "timestamp"
    source.add(rows(10, 12, now))
    again = client.send_events(
        cc.sql(query, source.connection), cursor="loaded_at", lookback="5s", ledger=ledger
    )
    # rows 5..9 (the five seconds before the watermark) again, skipped; 10 and 11 sent
    assert (again.counts["sent"], again.counts["skipped"]) == (2, 5)


def test_rows_that_failed_hold_the_watermark_back_until_they_are_delivered(
    sandbox: cc.Sandbox, source: Source, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    client = cc.Client(
        sandbox.base_url, sandbox.api_key, batch_size=5, max_concurrency=1,
        retry=cc.RetryPolicy(max_attempts=1),
    )  # fmt: skip
    source.add(rows(0, 10, now))
    sandbox.script_faults([cc.Fault("5xx")])  # the first request (rows 0-4) fails
    first = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    assert (first.counts["failed"], first.counts["sent"]) == (5, 5)
    assert watermark(ledger) is None  # row 0 is not delivered: nothing below it to pass
    second = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    assert (second.counts["sent"], second.counts["skipped"]) == (5, 5)
    mark = watermark(ledger)
    assert mark is not None and mark.shown == "9"


def test_invalid_rows_are_settled_and_let_the_watermark_pass(
    client: cc.Client, source: Source, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    batch = rows(0, 6, now)
    batch[2] = (2, "user_2", "Not A Type!", *batch[2][3:])
    source.add(batch)
    result = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    assert result.counts["invalid"] == 1
    mark = watermark(ledger)
    assert mark is not None and mark.shown == "5"


def test_a_full_refresh_reads_everything_and_the_ledger_still_skips_it(
    client: cc.Client, source: Source, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    source.add(rows(0, 8, now))
    client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    again = client.send_events(
        cc.sql(QUERY, source.connection), cursor="id", full_refresh=True, ledger=ledger
    )
    assert (again.n_rows, again.counts["skipped"]) == (8, 8)
    assert again.fingerprint["sync"]["read"] == {}


def test_a_sync_without_a_ledger_is_refused(client: cc.Client, tmp_path: Path) -> None:
    with pytest.raises(cc.ConfigurationError, match="keeps its watermark in the ledger"):
        client.send_events(cc.sql("SELECT 1", tmp_path / "x.sqlite"), cursor="id")


def test_a_text_cursor_is_refused_naming_the_cast(
    client: cc.Client, source: Source, now: pd.Timestamp, tmp_path: Path
) -> None:
    source.add(rows(0, 3, now))
    query = QUERY.replace("SELECT id,", "SELECT CAST(id AS TEXT) AS id,")
    with pytest.raises(cc.ChurnConnectorError, match="CAST"):
        client.send_events(
            cc.sql(query, source.connection), cursor="id", ledger=str(tmp_path / "l.sqlite")
        )


def test_a_row_whose_cursor_is_null_is_reported_and_does_not_stop_the_watermark(
    client: cc.Client, source: Source, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    batch = rows(0, 4, now)
    batch.append((None, *batch[0][1:]))
    source.add(batch)
    result = client.send_events(cc.sql(QUERY, source.connection), cursor="id", ledger=ledger)
    assert result.counts["invalid"] == 1
    assert "cursor is null" in result.failures["error"].iloc[0]
    mark = watermark(ledger)
    assert mark is not None and mark.shown == "3"
