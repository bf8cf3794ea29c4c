"""The run history: one row per run, the receipt's fields, appended where analysts query it.

``history`` (``--history URI``) is one of:

* a file ending ``.jsonl``, or a folder holding ``receipts.jsonl``: the receipts
  ``--receipts`` writes, one JSON line a run;
* ``sqlite:///PATH`` or a file ending ``.sqlite``, ``.sqlite3`` or ``.db``: a SQLite file;
* ``duckdb:///PATH`` or a file ending ``.duckdb``: a DuckDB file;
* ``postgresql://USER@HOST/DB`` (no password in it: ``PGPASSWORD`` or ``~/.pgpass``): a
  PostgreSQL database;
* ``parquet:///FOLDER`` or a path ending ``/``: a folder of Parquet files, one a run.

The tables are named ``churn_runs`` (a ``#name`` at the end of the URI names another) and
created on first use; their columns are :data:`COLUMNS`. Reading a history gives back the
receipts, oldest first (by ``started_at``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from .exceptions import ConfigurationError, StorageError
from .urls import shown_url
from .words import named

__all__ = [
    "COLUMNS",
    "RECEIPTS_FILE",
    "HistoryTarget",
    "append_run",
    "history_target",
    "read_runs",
    "receipts_path",
]

TABLE = "churn_runs"
RECEIPTS_FILE = "receipts.jsonl"
COLUMNS: dict[str, str] = {
    "run_id": "the run's id (as in its rows file and receipt)",
    "command": "what ran: send, resend, ...",
    "kind": "events or identities",
    "started_at": "when the run started (UTC)",
    "finished_at": "when it ended (UTC)",
    "elapsed_s": "seconds it took",
    "input_sha256": "the input's fingerprint (its digest): the same input, the same value",
    "source_version": "the table's version (Delta) or snapshot id (Iceberg), when it has one",
    "watermark": "a sync's watermark after the run, when it is one",
    "complete": "whether the whole input was read",
    "dry_run": "whether nothing was sent",
    "rows": "rows read",
    "sent": "rows the API acknowledged in this run",
    "skipped": "rows the ledger held as delivered before (not sent again)",
    "invalid": "rows that failed validation (never sent)",
    "rejected": "rows the API refused (its answer in the rows file)",
    "failed": "valid rows not delivered (retries spent, or the run stopped)",
    "expired": "rows too old for the API's window (never sent)",
    "held": "rows the ledger's re-id guard held back (never sent)",
    "requests": "HTTP requests made, retries included",
    "retries": "retries among them",
    "exit_code": "the run's exit code (0 all delivered, 1 invalid rows, 2 undelivered, 3 stopped)",
    "package_version": "churn_connector's version",
    "receipt": "the whole receipt, as JSON text (rows per state under counts)",
}
"""The history table's columns and what each holds."""

STATES = ("sent", "skipped", "invalid", "rejected", "failed", "expired", "held")
_SQL_TYPES = {
    "elapsed_s": "DOUBLE PRECISION",
    "complete": "BOOLEAN",
    "dry_run": "BOOLEAN",
    **{c: "BIGINT" for c in ("rows", *STATES, "requests", "retries")},
    "exit_code": "INTEGER",
    "started_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SQLITE = (".sqlite", ".sqlite3", ".db")


class HistoryTarget:
    """Where a history lives: its ``backend`` (``jsonl``, ``sqlite``, ``duckdb``,
    ``postgresql``, ``parquet``), its ``location`` and table."""

    def __init__(self, backend: str, location: str, table: str = TABLE) -> None:
        self.backend, self.location, self.table = backend, location, table

    def __repr__(self) -> str:
        return f"HistoryTarget({self.backend!r}, {shown_url(self.location)!r})"


def history_target(uri: str | os.PathLike[str]) -> HistoryTarget:
    """The history ``uri`` names; a ``ConfigurationError`` naming ``history`` otherwise."""
    text = os.fspath(uri)
    if not isinstance(text, str) or not text:
        raise ConfigurationError(f"{named('history')} must be a path or a URI, not {uri!r}")
    body, _, fragment = text.partition("#")
    table = fragment or TABLE
    if not _NAME.fullmatch(table):
        raise ConfigurationError(
            f"{named('history')}: the table name {table!r} after '#' must be letters, digits "
            "and underscores"
        )
    scheme = body.partition("://")[0].lower() if "://" in body else ""
    if scheme in ("postgresql", "postgres"):
        parts = urlsplit(body)
        if parts.password:
            raise ConfigurationError(
                f"{named('history')} holds a password: give it through PGPASSWORD or "
                "~/.pgpass, not in the URI (shell history and process lists keep arguments)"
            )
        return HistoryTarget("postgresql", body, table)
    if scheme in ("sqlite", "duckdb", "parquet"):
        return HistoryTarget(scheme, body.partition("://")[2] or ".", table)
    if scheme:
        raise ConfigurationError(
            f"{named('history')}: {shown_url(text)!r} is no history: give a .jsonl receipts "
            "file, sqlite:///FILE, duckdb:///FILE, postgresql://USER@HOST/DB or "
            "parquet:///FOLDER"
        )
    lowered = body.lower()
    if lowered.endswith(_SQLITE):
        return HistoryTarget("sqlite", body, table)
    if lowered.endswith(".duckdb"):
        return HistoryTarget("duckdb", body, table)
    if body.endswith(("/", os.sep)):
        return HistoryTarget("parquet", body, table)
    return HistoryTarget("jsonl", str(receipts_path(body)), table)


def receipts_path(path: str | os.PathLike[str]) -> Path:
    """``--receipts``: a file, or a folder (an existing one, or a name without a suffix),
    which then holds ``receipts.jsonl``."""
    target = Path(path)
    if target.is_dir() or (not target.exists() and not target.suffix):
        return target / RECEIPTS_FILE
    return target


def _row(receipt: Mapping[str, Any]) -> dict[str, Any]:
    fingerprint = receipt.get("input") if isinstance(receipt.get("input"), Mapping) else {}
    assert isinstance(fingerprint, Mapping)
    counts = receipt.get("counts") or {}
    sync = fingerprint.get("sync") if isinstance(fingerprint.get("sync"), Mapping) else None
    version = fingerprint.get("version", fingerprint.get("snapshot_id"))
    return {
        "run_id": receipt.get("run_id"),
        "command": receipt.get("command"),
        "kind": receipt.get("kind"),
        "started_at": _time(receipt.get("started_at")),
        "finished_at": _time(receipt.get("finished_at")),
        "elapsed_s": receipt.get("elapsed_s"),
        "input_sha256": fingerprint.get("sha256"),
        "source_version": None if version is None else str(version),
        "watermark": None if sync is None else _text(sync.get("watermark_after")),
        "complete": receipt.get("complete"),
        "dry_run": receipt.get("dry_run"),
        "rows": receipt.get("rows"),
        **{state: int(counts.get(state, 0)) for state in STATES},
        "requests": receipt.get("requests"),
        "retries": receipt.get("retries"),
        "exit_code": receipt.get("exit_code"),
        "package_version": receipt.get("package_version"),
        "receipt": json.dumps(receipt, separators=(",", ":"), default=str),
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


def append_run(uri: str | os.PathLike[str], receipt: Mapping[str, Any]) -> None:
    """Append one run's ``receipt`` to the history at ``uri``; a ``StorageError`` naming
    the history (never its password) when it cannot be written."""
    target = history_target(uri)
    row = _row(receipt)
    try:
        if target.backend == "jsonl":
            path = Path(target.location)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(receipt, separators=(",", ":")) + "\n")
        elif target.backend == "parquet":
            folder = Path(target.location)
            folder.mkdir(parents=True, exist_ok=True)
            stamp = row["started_at"].strftime("%Y%m%dT%H%M%S%fZ") if row["started_at"] else ""
            name = f"{target.table}-{stamp}-{row['run_id']}.parquet"
            table = pa.Table.from_pylist([row], schema=_arrow_schema())
            pq.write_table(table, folder / (name + ".tmp"))
            os.replace(folder / (name + ".tmp"), folder / name)
        else:
            with _connection(target) as (conn, mark):
                _create(conn, target)
                names = ", ".join(COLUMNS)
                marks = ", ".join(mark for _ in COLUMNS)
                values = [_sql_value(target, c, row[c]) for c in COLUMNS]
                # the table name is checked against _NAME, the columns are ours
                sql = f"INSERT INTO {target.table} ({names}) VALUES ({marks})"  # noqa: S608
                conn.execute(sql, values)
                if target.backend != "postgresql":
                    conn.commit()
    except ConfigurationError:
        raise
    except Exception as exc:
        shown = shown_url(os.fspath(uri))
        raise StorageError(
            f"cannot append the run to the history {shown} ({type(exc).__name__}: {_said(exc)})",
            path=shown,
        ) from None


def read_runs(uri: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The receipts of the runs in the history at ``uri``, oldest first (none: an empty
    list)."""
    target = history_target(uri)
    try:
        if target.backend == "jsonl":
            return _jsonl(Path(target.location))
        if target.backend == "parquet":
            folder = Path(target.location)
            if not folder.is_dir():
                return []
            texts = []
            for path in sorted(folder.glob(f"{target.table}-*.parquet")):
                texts += pq.read_table(path, columns=["receipt"]).column("receipt").to_pylist()
        else:
            if target.backend != "postgresql" and not Path(target.location).exists():
                return []
            with _connection(target) as (conn, _):
                _create(conn, target)
                found = conn.execute(f"SELECT receipt FROM {target.table}").fetchall()  # noqa: S608
            texts = [r[0] for r in found]
    except ConfigurationError:
        raise
    except Exception as exc:
        shown = shown_url(os.fspath(uri))
        raise StorageError(
            f"cannot read the history {shown} ({type(exc).__name__}: {_said(exc)})", path=shown
        ) from None
    runs = [json.loads(t) for t in texts]
    return sorted(runs, key=lambda r: str(r.get("started_at") or ""))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        path = path / RECEIPTS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    runs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            found = json.loads(line)
            if not isinstance(found, dict):
                raise ValueError(line)
        except ValueError:
            raise ConfigurationError(
                f"{named('history')}: line {number} of {path} is no receipt (one JSON "
                "object a line, as --receipts writes them): fix or remove that line"
            ) from None
        runs.append(found)
    return runs


def _said(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _arrow_schema() -> pa.Schema:
    kinds = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_()}
    fields = []
    for name in COLUMNS:
        sql = _SQL_TYPES.get(name, "TEXT")
        if sql == "TIMESTAMPTZ":
            kind: pa.DataType = pa.timestamp("us", tz="UTC")
        elif sql == "DOUBLE PRECISION":
            kind = pa.float64()
        else:
            kind = kinds.get(sql, pa.string())
        fields.append(pa.field(name, kind))
    return pa.schema(fields)


def _sql_value(target: HistoryTarget, column: str, value: Any) -> Any:
    if target.backend == "sqlite" and isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _create(conn: Any, target: HistoryTarget) -> None:
    types = dict(_SQL_TYPES)
    if target.backend == "sqlite":
        types = {k: "TEXT" if v == "TIMESTAMPTZ" else v for k, v in types.items()}
    columns = ", ".join(f"{c} {types.get(c, 'TEXT')}" for c in COLUMNS)
    conn.execute(f"CREATE TABLE IF NOT EXISTS {target.table} ({columns})")


@contextmanager
def _connection(target: HistoryTarget) -> Iterator[tuple[Any, str]]:
    if target.backend == "sqlite":
        Path(target.location).parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(target.location, timeout=30)) as conn:
            yield conn, "?"
    elif target.backend == "duckdb":
        import duckdb  # noqa: PLC0415

        Path(target.location).parent.mkdir(parents=True, exist_ok=True)
        with closing(duckdb.connect(target.location)) as conn:
            yield conn, "?"
    else:
        import psycopg  # noqa: PLC0415

        extra: dict[str, Any] = {"application_name": "churn_connector history"}
        if "connect_timeout" not in target.location:
            extra["connect_timeout"] = 10
        with psycopg.connect(target.location, autocommit=True, **extra) as conn:
            yield conn, "%s"
