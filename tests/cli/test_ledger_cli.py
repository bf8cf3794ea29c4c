"""``churn-connector ledger``: stats, forget (retention), export, compact, on every backend;
``--ledger`` and the ledger commands take URLs but never a password."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._ledger import scope_of
from tests.ledger.conftest import location
from tests.ledger.servers import PG_PASSWORD, PostgresServer

SCOPE = "https://api.example.com#0123456789abcdef"
OTHER = "https://staging.example.com#fedcba9876543210"


def filled(url: str) -> None:
    """Records of two scopes and both kinds."""
    with cc.Ledger(url) as ledger:
        ledger.record(SCOPE, "events", [(f"e{i}", "d") for i in range(5)])
        ledger.record(SCOPE, "identities", [("u1", "d"), ("u2", "d")])
        ledger.record(OTHER, "events", [("e0", "d")])


@pytest.fixture(params=["sqlite", "postgres", "file"])
def cli_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ledger as the command line names it: for PostgreSQL without the password, which
    comes from PGPASSWORD."""
    url = location(request.param, request, tmp_path)
    if request.param == "postgres":
        monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
        url = url.replace(f":{PG_PASSWORD}@", "@")
    return url


def test_ledger_stats_shows_records_per_scope_and_kind(
    cli_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(cli_url)
    assert main(["ledger", "stats", cli_url]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith(("events", "ident"))]
    assert sorted(rows) == [["events", "1"], ["events", "5"], ["identities", "2"]]
    assert out.count("https://api.example.com#0123456789abcdef") == 2
    assert PG_PASSWORD not in out


def test_ledger_forget_drops_one_scopes_records_of_one_kind(
    cli_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(cli_url)
    assert main(["ledger", "forget", cli_url, "--scope", SCOPE, "--kind", "events"]) == 0
    assert "forgot 5 records" in capsys.readouterr().out
    with cc.Ledger(cli_url) as ledger:
        assert ledger.known(SCOPE, "events", ["e0", "e1"]) == {}
        assert ledger.known(SCOPE, "identities", ["u1"]) == {"u1": "d"}
        assert ledger.known(OTHER, "events", ["e0"]) == {"e0": "d"}


def test_ledger_forget_before_a_date_keeps_younger_records(cli_url: str) -> None:
    filled(cli_url)
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert main(["ledger", "forget", cli_url, "--scope", SCOPE, "--before", yesterday]) == 0
    with cc.Ledger(cli_url) as ledger:
        assert ledger.count("events") == 6
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert main(["ledger", "forget", cli_url, "--scope", SCOPE, "--before", tomorrow]) == 0
    with cc.Ledger(cli_url) as ledger:
        assert (ledger.count("events"), ledger.count("identities")) == (1, 0)


def test_ledger_export_writes_every_record_to_parquet(cli_url: str, tmp_path: Path) -> None:
    filled(cli_url)
    out = tmp_path / "out" / "ledger.parquet"
    assert main(["ledger", "export", cli_url, str(out)]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["scope", "kind", "key", "digest", "acknowledged_at"]
    assert len(frame) == 8
    assert frame["acknowledged_at"].dt.tz is not None


def test_ledger_compact_keeps_every_live_record(
    cli_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(cli_url)
    with cc.Ledger(cli_url) as ledger:
        ledger.forget(SCOPE, "identities", ["u2"])
        before = {
            (s, k): ledger.known(s, k, ["e0", "e4", "u1", "u2"])
            for s in (SCOPE, OTHER)
            for k in ("events", "identities")
        }
    assert main(["ledger", "compact", cli_url]) == 0
    assert "dropped 0 event records" in capsys.readouterr().out
    with cc.Ledger(cli_url) as ledger:
        after = {
            (s, k): ledger.known(s, k, ["e0", "e4", "u1", "u2"])
            for s in (SCOPE, OTHER)
            for k in ("events", "identities")
        }
    assert after == before


def test_compact_merges_segments_into_one(tmp_path: Path) -> None:
    folder = tmp_path / "segments"
    url = folder.as_uri() + "/"
    for n in range(3):
        with cc.Ledger(url) as ledger:
            ledger.record(SCOPE, "events", [(f"e{n}", "d")])
    assert len(list(folder.glob("*.parquet"))) == 3
    assert main(["ledger", "compact", url]) == 0
    (merged,) = folder.glob("*.parquet")
    assert sorted(pq.read_table(merged)["key"].to_pylist()) == ["e0", "e1", "e2"]


def test_compact_drops_event_records_older_than_the_retention_default(
    postgres: PostgresServer, pg_url: str
) -> None:
    with cc.Ledger(pg_url) as ledger:
        ledger.record(SCOPE, "events", [("old", "d"), ("new", "d")])
        ledger.record(SCOPE, "identities", [("user", "d")])
    schema = pg_url.split("%3D")[-1]
    postgres.admin(
        f"UPDATE {schema}.churn_ledger SET acknowledged_at = now() - interval '40 days' "
        "WHERE key IN ('old', 'user')",
        database="ledger",
    )
    with cc.Ledger(pg_url) as ledger:
        assert "dropped 1 event records" in ledger.compact()
        assert ledger.known(SCOPE, "events", ["old", "new"]) == {"new": "d"}
        assert ledger.known(SCOPE, "identities", ["user"]) == {"user": "d"}  # kept


def test_a_retention_shorter_than_the_apis_window_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(tmp_path / "ledger.sqlite")
    filled(url)
    assert main(["ledger", "compact", url, "--keep-events-days", "7"]) == 3
    assert "at least 31" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "stats", "{url}"],
        ["send", "events", "data.parquet", "--ledger", "{url}", "--dry-run"],
    ],
    ids=["ledger stats", "send --ledger"],
)
def test_a_password_on_the_command_line_is_refused_without_echoing_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql://churn:{PG_PASSWORD}@127.0.0.1:5432/ledger"
    with pytest.raises(SystemExit) as info:
        main([a.format(url=url) for a in argv])
    assert info.value.code == 3
    captured = capsys.readouterr()
    assert "PGPASSWORD" in captured.err
    assert PG_PASSWORD not in captured.out + captured.err


def test_cli_send_with_a_postgres_ledger_skips_on_rerun(
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    tmp_path: Path,
    postgres: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    url = postgres.url(postgres.fresh_schema(), password=False)
    assert main(["send", "events", str(path), "--ledger", url]) == 0
    assert main(["send", "events", str(path), "--ledger", url, "-v"]) == 0
    captured = capsys.readouterr()
    assert "skipped 10" in captured.out
    assert PG_PASSWORD not in captured.out + captured.err
    with cc.Ledger(url) as ledger:
        scope = scope_of(sandbox.base_url, cc.Secret(sandbox.api_key))
        assert set(ledger.stats()["scope"]) == {scope}
