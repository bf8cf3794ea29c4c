"""The tests' growing sources: an events table in a SQLite file, a DuckDB file and a
PostgreSQL schema of the session's server, with rows added between runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from tests.ledger.servers import PG_PASSWORD, PostgresServer

# the query the tests read: column aliases name the wire fields; QUERY has the cursor ``id``
# too (a sync's cursor column is left out of the events it sends)
PLAIN = (
    "SELECT uid AS external_user_id, et AS event_type, ts AS occurred_at, plan AS "
    '"properties.plan" FROM events'
)
QUERY = PLAIN.replace("SELECT ", "SELECT id, ", 1)
BASE = pd.Timestamp("2026-01-01", tz="UTC")


def rows(start: int, stop: int, now: pd.Timestamp) -> list[tuple[Any, ...]]:
    """Events ``start`` .. ``stop - 1``: id ``i``, one second apart, an hour or more old."""
    first = now - pd.Timedelta(hours=2)
    return [
        (i, f"user_{i % 7}", "login", (first + pd.Timedelta(seconds=i)).isoformat(), "pro")
        for i in range(start, stop)
    ]


class Source:
    """A table ``events`` (id, uid, et, ts, plan) in a database the tests add rows to."""

    connection: str  # as cc.sql takes it (without a password)

    def add(self, batch: Sequence[tuple[Any, ...]]) -> None:
        raise NotImplementedError


class SqliteSource(Source):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection = str(path)
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE events (id INTEGER, uid TEXT, et TEXT, ts TEXT, plan TEXT)")

    def add(self, batch: Sequence[tuple[Any, ...]]) -> None:
        with sqlite3.connect(self.path) as db:
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", batch)


class DuckSource(Source):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection = str(path)
        with duckdb.connect(str(path)) as db:
            db.execute(
                "CREATE TABLE events (id BIGINT, uid TEXT, et TEXT, ts TIMESTAMPTZ, plan TEXT)"
            )

    def add(self, batch: Sequence[tuple[Any, ...]]) -> None:
        with duckdb.connect(str(self.path)) as db:
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", list(batch))


class PostgresSource(Source):
    """A schema of its own in the session's server; the password only in PGPASSWORD."""

    def __init__(self, server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.server = server
        self.schema = server.fresh_schema()
        monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
        self.connection = server.url(self.schema, password=False)
        self._run("CREATE TABLE events (id BIGINT, uid TEXT, et TEXT, ts TIMESTAMPTZ, plan TEXT)")

    def _run(self, statement: str, batch: Sequence[tuple[Any, ...]] = ()) -> None:
        import psycopg  # noqa: PLC0415 - the postgres extra

        with psycopg.connect(self.server.url(self.schema), autocommit=True) as conn:
            if batch:
                conn.cursor().executemany(statement.encode(), list(batch))
            else:
                conn.execute(statement.encode())

    def add(self, batch: Sequence[tuple[Any, ...]]) -> None:
        self._run("INSERT INTO events VALUES (%s, %s, %s, %s, %s)", batch)


@pytest.fixture(params=["sqlite", "duckdb", "postgres"])
def source(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Source:
    """An empty events table in each database in turn."""
    if request.param == "sqlite":
        return SqliteSource(tmp_path / "source.sqlite")
    if request.param == "duckdb":
        return DuckSource(tmp_path / "source.duckdb")
    return PostgresSource(request.getfixturevalue("postgres"), monkeypatch)
