"""A query of a database as an input: ``cc.sql(query, connection)``, read as Arrow batches.

The query runs when the input is read, once (an identities input is read twice: the first
read is spooled, like any one-shot source), on the connection ``databases`` opens; its
rows stream in batches (ADBC's PostgreSQL driver copies them out as the server sends them;
DuckDB and SQLite hand over a reader), so memory holds a batch or two, never the result.
Column aliases name the wire fields, as a file's header would (``plan AS
"properties.plan"``). Rows are labelled by their 0-based row number.

A sync narrows the query (``Query.narrowed``) without touching its text: the query becomes
a subquery, filtered on the cursor column with bound parameters (never values written into
the text) and ordered by it, so the database reads only the new rows and a run that stops
part way knows that every row below the last one read was read::

    SELECT * FROM (
    <the query>
    ) AS churn_source
    WHERE ("loaded_at" > $1) OR "loaded_at" IS NULL
    ORDER BY "loaded_at"

The fingerprint is the query's identity, not its rows: its text, the connection (without
its password) and the range a sync read.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .._core import ConfigurationError, InputError, Secret
from .databases import Database, open_database, password_of, redacted

__all__ = ["Bound", "Query", "sql"]

_SHOWN = 60  # characters of the query that messages show
_BATCH_BYTES = 4 << 20  # ADBC PostgreSQL's batch size hint (its default: 16 MB)


@dataclass(frozen=True)
class Bound:
    """The rows a sync reads: ``column`` above ``lower`` (exclusive) or from ``since``
    (inclusive), below ``until`` (exclusive); rows whose cursor is null are read too (the
    sync reports them). ``order``: ordered by the column."""

    column: str
    lower: Any = None
    since: Any = None
    until: Any = None
    order: bool = True

    def described(self) -> dict[str, Any]:
        named = (("after", self.lower), ("since", self.since), ("until", self.until))
        return {k: str(v) for k, v in named if v is not None}


class Query:
    """A query of a database, read as Arrow batches (see the module); made by :func:`sql`."""

    def __init__(
        self, text: str, connection: Any, *, bound: Bound | None = None, label: str | None = None
    ) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ConfigurationError("sql: the query is empty: give the SELECT to read")
        self.text = text.strip().rstrip(";").rstrip()
        if isinstance(connection, os.PathLike):
            connection = os.fspath(connection)
        self.connection = connection
        # a URL's password stays in a Secret: this object's repr and messages never hold it
        self._secret: Secret | None = None
        if isinstance(connection, str):
            self._secret = Secret(connection)
            self.connection = redacted(connection)
            self._password = password_of(connection)
        else:
            self._password = None
        self.bound = bound
        self.label = label  # how messages name a connection given as an object

    def __repr__(self) -> str:
        return f"cc.sql({self.shown!r}, {self.where!r})"

    @property
    def shown(self) -> str:
        """The query's start, as messages show it."""
        flat = " ".join(self.text.split())
        return flat if len(flat) <= _SHOWN else flat[: _SHOWN - 1] + "…"

    @property
    def where(self) -> str:
        """The connection as messages name it (a URL without its password)."""
        if isinstance(self.connection, str):
            return self.connection
        if self.label:
            return self.label
        kind = type(self.connection)
        return f"{kind.__module__.split('.')[0]} {kind.__name__}"

    @property
    def described(self) -> str:
        return f"the query {self.shown!r} on {self.where}"

    def narrowed(self, bound: Bound) -> Query:
        """The same query, reading only the rows ``bound`` says (see the module)."""
        made = object.__new__(Query)
        made.__dict__.update(self.__dict__)
        made.bound = bound
        return made

    def statement(self, database: Database) -> tuple[str, list[Any]]:
        """The SQL to run and its parameters."""
        if self.bound is None:
            return self.text, []
        column = database.quote(self.bound.column)
        values: list[Any] = []
        tests: list[str] = []
        for op, value in (
            (">", self.bound.lower),
            (">=", self.bound.since),
            ("<", self.bound.until),
        ):
            if value is not None:
                values.append(value)
                tests.append(f"{column} {op} {database.placeholder(len(values))}")
        # the caller's own query, wrapped; the bounds are bound parameters, never text
        text = f"SELECT * FROM (\n{self.text}\n) AS churn_source"  # noqa: S608
        if tests:
            text += f"\nWHERE ({' AND '.join(tests)}) OR {column} IS NULL"
        if self.bound.order:
            text += f"\nORDER BY {column}"
        return text, values

    def batches(self, rows: int) -> tuple[pa.Schema | None, Iterator[pa.RecordBatch]]:
        """Run the query: its schema, and its rows in batches of at most ``rows``."""
        database = self._open()
        try:
            text, values = self.statement(database)
            reader = self._execute(database, text, database.parameters(values), rows)
        except BaseException as exc:
            database.close()
            if isinstance(exc, Exception):
                raise self.failed(exc) from None
            raise
        return reader.schema, _streamed(reader, rows, database)

    def estimated_rows(self) -> int | None:
        """The rows the database expects the query to give (PostgreSQL's planner, by
        ``EXPLAIN``: no row is read), or None. Never a count a run may rely on: it sizes
        the run's index of message ids up front (a 10M-row query then holds them in 2.5
        bytes each, as a file of known length does), and nothing else."""
        if self.bound is None and not isinstance(self.connection, str):
            return None  # a connection of the caller's: not opened for a guess
        try:
            database = self._open()
        except Exception:  # a guess: the run's own read says what is wrong
            return None
        try:
            if database.style != "dollar" or database.engine != "adbc":
                return None
            text, values = self.statement(database)
            cursor = database.connection.cursor()
            try:
                # ADBC copies a result out (COPY (...) TO STDOUT), which EXPLAIN cannot be
                cursor.adbc_statement.set_options(**{"adbc.postgresql.use_copy": "false"})
                explain = f"EXPLAIN (FORMAT JSON) {text}"
                cursor.execute(explain, values) if values else cursor.execute(explain)
                found = cursor.fetchone()
            finally:
                cursor.close()
            plan = json.loads(found[0]) if found and isinstance(found[0], str) else found[0]
            return int(plan[0]["Plan"]["Plan Rows"])
        except Exception:  # any driver's, any plan's shape: no guess
            return None
        finally:
            database.close()

    def _open(self) -> Database:
        try:
            return open_database(self.connection, self._secret)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise self.failed(exc) from None

    def _execute(self, database: Database, text: str, params: Any, rows: int) -> Any:
        conn = database.connection
        if database.engine == "duckdb":
            return conn.sql(text, params=params or None).to_arrow_reader(rows)
        if database.engine == "sqlalchemy":
            return _sqlalchemy_reader(conn, text, params, rows)
        # the cursor lives as long as its rows are read: ADBC closes the stream with it
        cursor = database.cursor = conn.cursor()
        if database.style == "dollar" and database.engine == "adbc":
            # PostgreSQL's batches of about a slice, not the driver's 16 MB: fewer rows held
            # between the server and the slices (memory of a 10M-row query: syncs.py)
            with contextlib.suppress(Exception):  # an older driver: its default
                cursor.adbc_statement.set_options(
                    **{"adbc.postgresql.batch_size_hint_bytes": str(_BATCH_BYTES)}
                )
        cursor.execute(text, params) if params else cursor.execute(text)
        if hasattr(cursor, "fetch_record_batch"):  # ADBC: Arrow from the driver
            return cursor.fetch_record_batch()
        return _rows_reader(cursor, rows)

    def failed(self, exc: BaseException) -> Exception:
        """What the database said, as an error of ours, without the password."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        if self._secret is not None:
            text = text.replace(self._secret.reveal(), self.where)
        if self._password:
            text = text.replace(self._password, "***")
        name = type(exc).__name__
        return InputError(f"{self.described}: {name}: {text}", retryable=_passing(exc))

    def fingerprint(self, rows: int) -> dict[str, Any]:
        """The query's identity (see the module)."""
        bound = {} if self.bound is None else self.bound.described()
        digest = hashlib.sha256(
            f"query\n{self.text}\n{self.where}\n{sorted(bound.items())}".encode()
        )
        return {
            "kind": "query",
            "query": self.text,
            "connection": self.where,
            **({"range": bound} if bound else {}),
            "size": None,
            "rows": rows,
            "sha256": digest.hexdigest(),
        }


def _passing(exc: BaseException) -> bool:
    """A failure a later try may not meet: the server unreachable, a connection dropped."""
    name = type(exc).__name__
    text = str(exc).lower()
    if any(
        w in text for w in ("authentication", "password", "does not exist", "permission", "syntax")
    ):
        return False
    return name in ("OperationalError", "InterfaceError") or "connect" in text


def _streamed(reader: Any, rows: int, database: Database) -> Iterator[pa.RecordBatch]:
    """The reader's batches, at most ``rows`` each; the connection closed at the end."""
    try:
        for batch in reader:
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)
            del batch
            _trim()
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # a reader cut short: the connection goes next
                close()
        database.close()


def _load_trim() -> Any:
    """glibc's ``malloc_trim``, where the C library is glibc (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl, or no glibc: nothing to trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _load_trim()


def _trim() -> None:
    """Give the heap's free pages back after each of the driver's batches: a driver's
    buffers (libpq's, ADBC's) freed in the C heap are otherwise kept, and a 4M-row query
    read ~60 MB more than the same rows from a file (measured: benchmarks/syncs.py). A
    walk of the heap each batch of megabytes: nothing beside the batch's reading."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _rows_reader(cursor: Any, rows: int) -> pa.RecordBatchReader:
    """A DB-API cursor's rows as Arrow batches (a Python step a row: slower than ADBC)."""
    names = [d[0] for d in cursor.description or ()]

    def batches() -> Iterator[pa.RecordBatch]:
        while chunk := cursor.fetchmany(rows):
            yield pa.RecordBatch.from_pydict(
                dict(zip(names, zip(*chunk, strict=True), strict=True))
            )

    return _reader(names, batches())


def _sqlalchemy_reader(conn: Any, text: str, params: Any, rows: int) -> pa.RecordBatchReader:
    import sqlalchemy  # noqa: PLC0415 - only for such a connection

    result = conn.execution_options(stream_results=True, yield_per=rows).execute(
        sqlalchemy.text(text), params or {}
    )
    names = list(result.keys())

    def batches() -> Iterator[pa.RecordBatch]:
        for chunk in result.partitions(rows):
            yield pa.RecordBatch.from_pydict(
                dict(zip(names, zip(*chunk, strict=True), strict=True))
            )

    return _reader(names, batches())


def _reader(names: Sequence[str], batches: Iterator[pa.RecordBatch]) -> Any:
    """Batches whose types each batch infers (a Python step gives no schema up front)."""

    class Reader:
        schema = None

        def __iter__(self) -> Iterator[pa.RecordBatch]:
            return batches

    return Reader()


def sql(query: str, connection: Any) -> Query:
    """A query of a database, as an input of ``send_events``, ``identify`` and the
    ``validate_*`` calls (``churn-connector send events --sql QUERY --connection URL``).

    ``connection``: ``postgresql://user@host/db`` (the password from ``PGPASSWORD`` or
    ``~/.pgpass`` when the URL has none), ``sqlite:///path`` or a ``.sqlite``/``.db`` path,
    ``duckdb:///path`` or a ``.duckdb`` path (files are opened read-only), another
    SQLAlchemy URL; or an open ADBC, DuckDB, SQLAlchemy or DB-API connection (left open),
    or a function that opens one. Rows stream as Arrow batches, labelled by their row
    number; column aliases name the wire fields (``plan AS "properties.plan"``). With
    ``cursor=`` and a ledger, only the rows past the sync's watermark are read: the query
    is filtered in the database (``docs/guides/incremental-syncs.md``).
    """
    return Query(query, connection)
