"""The run history: ``send --history URI`` (and ``history=``) appends one row per run to a
receipts file, a SQLite or DuckDB file, a PostgreSQL table or a Parquet folder (over real
HTTP to the sandbox); ``runs list`` and ``runs show`` read it back, and the gate's
``--max-change`` compares with it."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._core import read_runs
from tests.ledger.servers import PG_PASSWORD, PostgresServer

pytestmark = pytest.mark.e2e

LOCAL: dict[str, Callable[[Path], str]] = {
    "jsonl": lambda d: str(d / "runs.jsonl"),
    "sqlite": lambda d: str(d / "runs.sqlite"),
    "duckdb": lambda d: f"duckdb://{d}/runs.duckdb",
    "parquet": lambda d: f"parquet://{d}/runs",
}


def _export(path: Path, now: pd.Timestamp, n: int, *, bad: int = 0) -> Path:
    pd.DataFrame(
        {
            "external_user_id": [f"{path.stem}_u{i}" for i in range(n)] + [""] * bad,
            "event_type": ["login"] * (n + bad),
            "occurred_at": [
                (now - pd.Timedelta(minutes=i + 1)).isoformat() for i in range(n + bad)
            ],
        }
    ).to_csv(path, index=False)
    return path


@pytest.fixture
def api(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


def _three_runs_then_read_back(
    history: str, tmp_path: Path, now: pd.Timestamp, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, object]]:
    codes = []
    for day, (n, bad) in enumerate(((40, 0), (44, 2), (36, 0))):
        sent = _export(tmp_path / f"day{day}.csv", now, n, bad=bad)
        codes.append(main(["send", "events", str(sent), "--history", history, "-q"]))
    assert codes == [0, 1, 0]
    capsys.readouterr()
    assert main(["runs", "list", history, "--json"]) == 0
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rows"] for r in runs] == [40, 46, 36]
    assert [r["exit_code"] for r in runs] == [0, 1, 0]
    assert (runs[1]["counts"]["sent"], runs[1]["counts"]["invalid"]) == (44, 2)
    return runs


@pytest.mark.parametrize("backend", sorted(LOCAL))
def test_each_send_appends_a_row_that_runs_list_reads_back(
    backend: str,
    api: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = LOCAL[backend](tmp_path)
    runs = _three_runs_then_read_back(history, tmp_path, now, capsys)
    assert main(["runs", "list", history]) == 0
    listed = capsys.readouterr().out
    assert all(str(r["run_id"]) in listed for r in runs)
    assert main(["runs", "show", history, str(runs[1]["run_id"])]) == 0
    assert json.loads(capsys.readouterr().out) == runs[1]


def test_the_gates_max_change_reads_the_history(
    api: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = f"duckdb://{tmp_path}/runs.duckdb"
    _three_runs_then_read_back(history, tmp_path, now, capsys)
    today = _export(tmp_path / "today.csv", now, 12)
    gate = ["--max-change", "50%", "--history", history]
    assert main(["validate", "events", str(today), *gate]) == 1
    assert "(the median of the last 3 events runs (40)" in capsys.readouterr().out.replace(
        "fewer than the median", "(the median"
    )
    usual = _export(tmp_path / "usual.csv", now, 41)
    assert main(["validate", "events", str(usual), *gate]) == 0


def test_a_postgresql_history_is_a_table_analysts_query(
    api: cc.Sandbox,
    postgres: PostgresServer,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not postgres.running():
        postgres.start()
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    schema = postgres.fresh_schema()
    history = postgres.url(schema, password=False)
    runs = _three_runs_then_read_back(history, tmp_path, now, capsys)
    import psycopg  # noqa: PLC0415

    with psycopg.connect(postgres.url(schema)) as conn:
        found = conn.execute(
            "SELECT run_id, rows, sent, invalid, exit_code, started_at < finished_at "
            "FROM churn_runs ORDER BY started_at"
        ).fetchall()
    assert found == [
        (r["run_id"], r["rows"], r["counts"]["sent"], r["counts"]["invalid"],  # type: ignore[index]
         r["exit_code"], True)
        for r in runs
    ]  # fmt: skip


def test_the_columns_carry_the_receipts_fields(
    client: cc.Client, events: pd.DataFrame, tmp_path: Path
) -> None:
    result = client.send_events(events, history=str(tmp_path / "runs.sqlite"))
    with sqlite3.connect(tmp_path / "runs.sqlite") as conn:
        conn.row_factory = sqlite3.Row
        [row] = conn.execute("SELECT * FROM churn_runs").fetchall()
    assert row["run_id"] == result.run_id
    assert row["input_sha256"] == result.fingerprint["sha256"]
    assert (row["rows"], row["sent"], row["requests"], row["exit_code"]) == (
        len(events),
        len(events),
        len(result.chunks),
        0,
    )
    client.send_events(events, history=f"parquet://{tmp_path}/runs")
    [file] = (tmp_path / "runs").iterdir()
    table = pq.read_table(file)
    assert str(table.schema.field("started_at").type) == "timestamp[us, tz=UTC]"
    assert table.column("sent").to_pylist() == [len(events)]
    client.send_events(events, history=f"duckdb://{tmp_path}/runs.duckdb")
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as conn:
        assert conn.execute("SELECT count(*) FROM churn_runs").fetchall() == [(1,)]


def test_a_history_url_with_a_password_is_refused_without_echoing_it(
    client: cc.Client, events: pd.DataFrame, sandbox: cc.Sandbox
) -> None:
    with pytest.raises(cc.ConfigurationError, match="PGPASSWORD") as info:
        client.send_events(events, history="postgresql://churn:s3cret_CANARY@127.0.0.1/db")
    assert "s3cret_CANARY" not in str(info.value)
    assert len(sandbox.events()) == 0  # refused before anything was sent


def test_a_history_that_cannot_be_written_is_a_warning_not_a_failed_run(
    client: cc.Client,
    events: pd.DataFrame,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        result = client.send_events(events, history=str(blocker / "runs.sqlite"))
    assert result.exit_code == 0
    assert "its row is missing from the history" in caplog.text


def test_runs_show_names_an_unknown_run(
    client: cc.Client,
    events: pd.DataFrame,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    history = str(tmp_path / "runs.sqlite")
    client.send_events(events, history=history)
    assert len(read_runs(history)) == 1
    assert main(["runs", "show", history, "nope"]) == 3
    assert "no run 'nope' in the history" in capsys.readouterr().err


def test_a_run_that_stops_part_way_has_its_row(
    sandbox: cc.Sandbox, events: pd.DataFrame, tmp_path: Path
) -> None:
    history = str(tmp_path / "runs.sqlite")
    client = cc.Client(base_url=sandbox.base_url, api_key="sk_test_wrong_key_0000000000")
    with pytest.raises(cc.AuthenticationError):
        client.send_events(events, history=history)
    [run] = read_runs(history)
    assert (run["exit_code"], run["complete"]) == (3, False)
    assert "sk_test_wrong_key" not in json.dumps(run)
