"""``cc.sql(query, connection)``: a query of PostgreSQL, SQLite or DuckDB read as Arrow
batches wherever a table is read, its aliases naming the wire fields; the password never on
the command line nor in any output."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.ledger.servers import PG_PASSWORD, PostgresServer
from tests.sync.sources import PLAIN, QUERY, PostgresSource, Source, SqliteSource, rows


def test_a_query_is_sent_with_its_aliases_naming_the_wire_fields(
    source: Source, client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    source.add(rows(0, 25, now))
    result = client.send_events(cc.sql(PLAIN, source.connection))
    assert (result.n_rows, result.counts["sent"]) == (25, 25)
    stored = sandbox.events()
    assert sorted(stored["external_user_id"].unique()) == [f"user_{i}" for i in range(7)]
    assert set(stored["properties"].map(lambda p: p["plan"])) == {"pro"}


def test_a_query_is_read_in_batches_not_whole(source: Source, now: pd.Timestamp) -> None:
    source.add(rows(0, 1_000, now))
    _, batches = cc.sql(PLAIN, source.connection).batches(100)
    sizes = [b.num_rows for b in batches]
    assert sum(sizes) == 1_000 and max(sizes) <= 100 and len(sizes) >= 10


def test_validate_events_reads_a_query_from_the_command_line(
    source: Source, now: pd.Timestamp, capsys: pytest.CaptureFixture[str]
) -> None:
    source.add(rows(0, 5, now))
    bad = f"{PLAIN} UNION ALL SELECT 'user_1', 'Bad Type!', NULL, 'pro'"
    code = main(["validate", "events", "--sql", bad, "--connection", source.connection])
    out = capsys.readouterr().out
    assert code == 1
    assert "6 rows" in out


def test_send_events_on_the_command_line_reads_a_query(
    sandbox: cc.Sandbox,
    source: Source,
    now: pd.Timestamp,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source.add(rows(0, 12, now))
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    argv = ["send", "events", "--sql", PLAIN, "--connection", source.connection]
    assert main([*argv, "--base-url", sandbox.base_url]) == 0
    assert len(sandbox.events()) == 12
    assert PG_PASSWORD not in "".join(capsys.readouterr())


def test_a_connection_url_with_a_password_is_refused_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://churn:{PG_PASSWORD}@127.0.0.1:5432/db"
    with pytest.raises(SystemExit) as stopped:
        main(["send", "events", "--sql", "SELECT 1", "--connection", url, "--dry-run"])
    assert stopped.value.code == 3
    err = capsys.readouterr().err
    assert "PGPASSWORD" in err and PG_PASSWORD not in err


def test_the_password_is_in_no_message_when_a_query_fails(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch, client: cc.Client
) -> None:
    found = PostgresSource(postgres, monkeypatch)
    with_password = postgres.url(found.schema)  # from Python, a URL may hold it
    query = cc.sql("SELECT * FROM no_such_table", with_password)
    with pytest.raises(cc.InputError) as failed:
        client.send_events(query)
    assert "no_such_table" in str(failed.value)
    assert PG_PASSWORD not in str(failed.value) + repr(failed.value) + repr(query)


def test_a_wrong_password_from_pgpassword_is_reported_without_it(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = PostgresSource(postgres, monkeypatch)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD + "x")
    code = main(["validate", "events", "--sql", PLAIN, "--connection", found.connection])
    out, err = capsys.readouterr()
    assert code == 3
    assert "authentication" in err.lower() and PG_PASSWORD not in out + err


def test_a_sql_query_and_a_file_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "events", str(tmp_path / "x.csv"), "--sql", "SELECT 1",
                 "--connection", str(tmp_path / "db.sqlite")])  # fmt: skip
    assert code == 3
    assert "one input a run" in capsys.readouterr().err


def test_postgresqls_planner_estimates_a_querys_rows_without_reading_them(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch, now: pd.Timestamp, tmp_path: Path
) -> None:
    source = PostgresSource(postgres, monkeypatch)
    source.add(rows(0, 500, now))
    source._run("ANALYZE events")
    estimate = cc.sql(QUERY, source.connection).estimated_rows()
    assert estimate is not None
    assert 400 <= estimate <= 600  # the planner's guess, after ANALYZE
    sqlite = SqliteSource(tmp_path / "x.sqlite")
    assert cc.sql(QUERY, sqlite.connection).estimated_rows() is None  # no planner's count
