"""The ledger in PostgreSQL: one table that concurrent workers share (Airflow's mapped
tasks, Spark's tasks, two runs of one DAG at once).

Each acknowledged request is one statement, so one transaction (``INSERT … ON CONFLICT``,
keys sorted so that concurrent upserts lock rows in one order and never deadlock); each
slice is read with one query (``key = ANY(…)``) on a covering index. A scope and kind are
a small integer of their own (table ``churn_ledger_scopes``): a long scope text in every
index entry made each key's lookup several times slower. Records are committed without waiting for
the server's disk (``synchronous_commit = off``): a server crash may lose the last few,
which costs a re-send that the API de-duplicates, never a loss. Dropping a record before a
changed identity is sent waits for the disk: it must hold, or a later run could skip.

psycopg 3 (the ``postgres`` extra) is imported only when such a ledger is opened.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any, ClassVar, TypeVar
from urllib.parse import unquote

import pandas as pd
import psycopg
import pyarrow as pa
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict

from .._core import ConfigurationError, LedgerError, Secret
from .base import (
    EVENT_KINDS,
    EVENT_RETENTION_DAYS,
    Ledger,
    LedgerUnavailable,
    cutoff,
    export_batch,
    kinds_of,
    redact,
    retention_cutoff,
    secrets_in,
    stats_frame,
)
from .watchdog import StatementBound

T = TypeVar("T")
TABLE = "churn_ledger"
SCOPES = "churn_ledger_scopes"
_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {SCOPES} (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope text NOT NULL,
    kind text NOT NULL,
    UNIQUE (scope, kind)
)""",
    # the digest rides in the index: a run's reads are index-only scans
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    scope_id integer NOT NULL REFERENCES {SCOPES} (id),
    key text NOT NULL,
    digest text NOT NULL,
    acknowledged_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, key) INCLUDE (digest)
)""",
)
_LOCK_ID = 0x63687572  # pg_advisory_xact_lock: one worker creates the table at a time
_RECORD = f"""
INSERT INTO {TABLE} (scope_id, key, digest, acknowledged_at)
SELECT %s, u.key, u.digest, now() FROM unnest(%s::text[], %s::text[]) AS u(key, digest)
ON CONFLICT (scope_id, key)
DO UPDATE SET digest = EXCLUDED.digest, acknowledged_at = EXCLUDED.acknowledged_at
"""  # noqa: S608 - the table's name is ours; values are parameters
# one index probe per key, the keys sorted so that probes walk the index in its order
_KNOWN = (
    f"SELECT l.key, l.digest FROM unnest(%s::text[]) AS u(key) "  # noqa: S608
    f"JOIN {TABLE} AS l ON l.scope_id = %s AND l.key = u.key"
)
# the planner prices many probes as a scan of the whole table (or of its whole index); the
# index answers each key at once, however large the table grows
_PROBES = (
    "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', "
    "true), set_config('enable_mergejoin', 'off', true), set_config('enable_bitmapscan', "
    "'off', true), set_config('max_parallel_workers_per_gather', '0', true)"
)
_FORGET = f"DELETE FROM {TABLE} WHERE scope_id = %s AND key = ANY(%s)"  # noqa: S608
_SCOPE_ID = f"SELECT id FROM {SCOPES} WHERE scope = %s AND kind = %s"  # noqa: S608
_NEW_SCOPE = f"INSERT INTO {SCOPES} (scope, kind) VALUES (%s, %s) ON CONFLICT DO NOTHING"  # noqa: S608
_JOINED = f"{TABLE} AS l JOIN {SCOPES} AS s ON s.id = l.scope_id"
_POOL = 4  # connections at most: sender threads record at once, each on its own
_ATTEMPTS = 3  # a deadlock or serialisation failure is tried again, then reported
_EXPORT_ROWS = 100_000
# SQLSTATE classes of a failure a later try may not meet: the connection (08), resources
# (53), the operator (57: a restart), a transaction rolled back (40), a lock not available
_PASSING_CLASSES = ("08", "53", "57", "40")
_PASSING_STATES = frozenset({"55P03"})


class PostgresLedger(Ledger):
    """What the API acknowledged, in the table ``churn_ledger`` of a PostgreSQL database
    (created on first use; in the first schema of the search path, which the URL may set:
    ``?options=-csearch_path%3Dchurn``).

    ``password``: when it is not in the URL, ``PGPASSWORD`` or ``~/.pgpass`` (libpq reads
    those), e.g. from an Airflow connection. It never appears in a message or a repr.
    """

    kind_name: ClassVar[str] = "PostgreSQL table churn_ledger at"

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        read_only: bool = False,
        password: str | Secret | None = None,
        connect_timeout: int = 10,
    ) -> None:
        url = os.fspath(location)
        if not isinstance(url, str):
            raise ConfigurationError("a PostgreSQL ledger is a postgresql:// URL")
        self.location = redact(url)
        self.read_only = read_only
        self._url = Secret(url)
        self._password = Secret(password) if isinstance(password, str) else password
        # never a local of this frame: a traceback renderer that shows locals (rich,
        # Sentry) would print it from a LedgerError raised below
        self._hidden = _hidden(url, self._password)
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._opened = 0
        self._closed = False
        self._missing = False  # read-only and no table yet: nothing was ever recorded
        self._scope_ids: dict[tuple[str, str], int] = {}
        self._bound = StatementBound(self._settings())  # see watchdog.py
        try:
            conn = self._connect()
        except LedgerUnavailable as exc:
            raise LedgerError(
                f"ledger {self.location}: cannot open ({exc.message}); nothing was sent",
                path=self.location,
                retryable=exc.retryable,
            ) from None
        try:
            with self._bound.watch(conn.fileno()):
                self._prepare(conn)
        except (psycopg.Error, LedgerUnavailable) as exc:
            conn.close()
            failure = exc if isinstance(exc, LedgerUnavailable) else self._unavailable(exc, "open")
            raise LedgerError(
                f"ledger {self.location}: cannot open ({failure.message}); nothing was sent",
                path=self.location,
                retryable=failure.retryable,
            ) from None
        self._idle.append(conn)

    def _password_text(self) -> str | None:
        return None if self._password is None else self._password.reveal()

    # ---------------------------------------------------------------- connections

    def _connect(self) -> psycopg.Connection[Any]:
        url = self._url.reveal()
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise ConfigurationError(f"ledger {self.location}: {self._scrub(str(exc))}") from None
        extra: dict[str, Any] = {}
        if "application_name" not in given:
            extra["application_name"] = "churn_connector"
        if self._password is not None and "password" not in given:
            extra["password"] = self._password.reveal()
        # bounded: keepalives, tcp_user_timeout, statement_timeout, the run's deadline; and
        # records may wait for the disk (see the module's docstring; forget does not)
        extra.update(self._bound.connect_settings(given, self._connect_timeout))
        try:
            return psycopg.connect(url, autocommit=True, **extra)
        except psycopg.Error as exc:
            raise self._unavailable(exc, "connect") from None

    def _settings(self) -> list[object]:
        """libpq ``options`` texts that may set ``statement_timeout``: the URL's, PGOPTIONS."""
        try:
            given = conninfo_to_dict(self._url.reveal())
        except psycopg.Error:
            given = {}  # refused, naming it, when it connects
        return [given.get("options"), os.environ.get("PGOPTIONS")]

    def bound_by(self, deadline: float | None) -> None:
        self._bound.deadline = deadline

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        (found,) = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [TABLE]).fetchone() or (
            False,
        )
        if found:
            return
        if self.read_only:
            self._missing = True
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_ID])
            for statement in _SCHEMA:
                conn.execute(statement)

    @contextmanager
    def _connection(self, what: str, *, bounded: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool for one operation; psycopg's errors become the ledger's.
        ``bounded``: the watchdog ends an operation that outlives the statement bound (an
        export's cursor, read as its consumer goes, is bounded by the server alone)."""
        with self._lock:
            if self._closed:
                raise LedgerUnavailable(f"{what} failed: the ledger was closed", retryable=False)
            conn = self._idle.pop() if self._idle else None
            if conn is None:
                self._opened += 1
        try:
            if conn is None:
                conn = self._connect()
            elif conn.broken or conn.closed:
                conn.close()
                conn = self._connect()  # the server restarted, or dropped an idle connection
        except LedgerUnavailable:
            with self._lock:
                self._opened -= 1
            raise
        try:
            with self._bound.watch(conn.fileno(), what, enabled=bounded):
                yield conn
        except psycopg.Error as exc:
            failure = self._unavailable(exc, what)
            if conn.broken and not isinstance(failure, _Conflict):
                # the connection died under the statement (a server restart, a failover, an
                # idle connection dropped): one more try on a new one, which fails at once
                # if the server is down
                raise _Broken(failure.message, retryable=failure.retryable) from None
            raise failure from None
        finally:
            with self._lock:
                if self._closed or conn.broken or len(self._idle) >= _POOL:
                    conn.close()
                    self._opened -= 1
                else:
                    self._idle.append(conn)

    def _retrying(self, what: str, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work`` on a connection; a deadlock or serialisation failure (concurrent writers
        of the same keys) is tried again."""
        reconnected = False
        for attempt in range(_ATTEMPTS):
            try:
                with self._connection(what) as conn:
                    return work(conn)
            except _Conflict:
                if attempt == _ATTEMPTS - 1:
                    raise
            except _Broken:
                if reconnected:
                    raise
                reconnected = True
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---------------------------------------------------------------- errors

    def _scrub(self, text: str) -> str:
        """``text`` without the password (libpq quotes a URL it cannot parse)."""
        text = text.replace(self._url.reveal(), self.location)
        for hidden in self._hidden:
            for form in {hidden, unquote(hidden)}:
                text = text.replace(form, "***")
        return " ".join(text.split())

    def _unavailable(self, exc: psycopg.Error, what: str) -> LedgerUnavailable:
        state = exc.sqlstate or ""
        text = self._scrub(str(exc)) or type(exc).__name__
        if state:
            passing = state[:2] in _PASSING_CLASSES or state in _PASSING_STATES
        else:
            # a failure to connect has no SQLSTATE: a refused password or a missing database
            # needs a change; a refused connection or a time-out may pass
            lowered = text.lower()
            refused = ("authentication", "password", "does not exist", "permission", "role")
            passing = isinstance(exc, psycopg.OperationalError) and not any(
                word in lowered for word in refused
            )
        conflict = isinstance(exc, errors.DeadlockDetected | errors.SerializationFailure)
        return (_Conflict if conflict else LedgerUnavailable)(
            f"{what} failed: {text}", retryable=passing
        )

    # ---------------------------------------------------------------- what a run uses

    def known(self, scope: str, kind: str, keys: Sequence[str]) -> dict[str, str]:
        if self._missing or not keys:
            return {}
        wanted = sorted(set(keys))

        def read(conn: psycopg.Connection[Any]) -> dict[str, str]:
            scope_id = self._scope_id(conn, scope, kind, create=False)
            if scope_id is None:
                return {}
            with conn.transaction():
                conn.execute(_PROBES)  # for this transaction only
                rows = conn.execute(_KNOWN, [wanted, scope_id], binary=True).fetchall()
            return dict(rows)

        return self._retrying("read", read)

    def _scope_id(
        self, conn: psycopg.Connection[Any], scope: str, kind: str, *, create: bool
    ) -> int | None:
        """The number of ``scope`` and ``kind`` (made on first write); None before any."""
        known = self._scope_ids.get((scope, kind))
        if known is not None:
            return known
        if create:
            conn.execute(_NEW_SCOPE, [scope, kind])
        row = conn.execute(_SCOPE_ID, [scope, kind]).fetchone()
        if row is None:
            return None
        with self._lock:
            self._scope_ids[(scope, kind)] = int(row[0])
        return int(row[0])

    def record(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        if self.read_only:
            return
        # one row per key, in key order: concurrent upserts then lock rows in one order
        latest = dict(entries)
        if not latest:
            return
        keys = sorted(latest)
        digests = [latest[k] for k in keys]

        def write(conn: psycopg.Connection[Any]) -> None:
            scope_id = self._scope_id(conn, scope, kind, create=True)
            conn.execute(_RECORD, [scope_id, keys, digests])

        self._retrying("write", write)

    def forget(self, scope: str, kind: str, keys: Iterable[str]) -> None:
        if self.read_only:
            return
        wanted = sorted(set(keys))
        if not wanted:
            return

        def delete(conn: psycopg.Connection[Any]) -> None:
            scope_id = self._scope_id(conn, scope, kind, create=False)
            if scope_id is None:
                return
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit TO on")  # see the docstring
                conn.execute(_FORGET, [scope_id, wanted])

        self._retrying("write", delete)

    # ---------------------------------------------------------------- operations

    def _operate(self, what: str, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """An operation's work; a failure is a LedgerError naming the ledger."""
        try:
            return self._retrying(what, work)
        except LedgerUnavailable as exc:
            raise LedgerError(
                f"ledger {self.location}: {exc.message}",
                path=self.location,
                retryable=exc.retryable,
            ) from None

    def stats(self) -> pd.DataFrame:
        if self._missing:
            return stats_frame([])
        rows = self._operate(
            "read",
            lambda conn: conn.execute(
                f"SELECT s.scope, s.kind, count(*), max(l.acknowledged_at) FROM {_JOINED} "  # noqa: S608
                "GROUP BY s.scope, s.kind"
            ).fetchall(),
        )
        return stats_frame(rows)

    def drop(
        self, scope: str, *, kind: str | None = None, before: datetime | date | None = None
    ) -> int:
        self._writable()
        sql = (
            f"DELETE FROM {TABLE} AS l USING {SCOPES} AS s "  # noqa: S608
            "WHERE s.id = l.scope_id AND s.scope = %s"
        )
        args: list[Any] = [scope]
        kinds = kinds_of(kind)
        if kinds is not None:
            sql, args = sql + " AND s.kind = ANY(%s)", [*args, list(kinds)]
        moment = cutoff(before)
        if moment is not None:
            sql, args = sql + " AND l.acknowledged_at < %s", [*args, moment]
        return int(self._operate("write", lambda conn: conn.execute(sql, args).rowcount))

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self._missing:
            return
        try:
            with (
                self._connection("read", bounded=False) as conn,
                conn.transaction(),
                # a cursor on the server: the export streams in flat memory
                conn.cursor(name="churn_ledger_export") as cursor,
            ):
                cursor.execute(
                    f"SELECT s.scope, s.kind, l.key, l.digest, l.acknowledged_at FROM {_JOINED} "  # noqa: S608
                    "ORDER BY s.scope, s.kind, l.key"
                )
                while chunk := cursor.fetchmany(_EXPORT_ROWS):
                    yield export_batch(chunk)
        except LedgerUnavailable as exc:
            raise LedgerError(
                f"ledger {self.location}: {exc.message}",
                path=self.location,
                retryable=exc.retryable,
            ) from None

    def compact(self, *, keep_events_days: int = EVENT_RETENTION_DAYS) -> str:
        self._writable()
        old = retention_cutoff(keep_events_days)
        dropped = self._operate(
            "write",
            lambda conn: (
                conn.execute(
                    f"DELETE FROM {TABLE} AS l USING {SCOPES} AS s "  # noqa: S608
                    "WHERE s.id = l.scope_id AND s.kind = ANY(%s) AND l.acknowledged_at < %s",
                    [list(EVENT_KINDS), old],
                ).rowcount
            ),
        )
        return (
            f"dropped {dropped:,} event records acknowledged before {old:%Y-%m-%d} (older "
            f"than {keep_events_days} days); PostgreSQL's autovacuum reuses the space"
        )

    def _writable(self) -> None:
        if self.read_only:
            raise ConfigurationError(f"ledger {self.location} was opened read-only")
        if self._missing:  # pragma: no cover - read-only, refused above
            raise ConfigurationError(f"ledger {self.location} holds no {TABLE} table yet")


def _hidden(url: str, password: Secret | None) -> list[str]:
    """The texts no message may show: the URL's passwords, the one given apart."""
    given = None if password is None else password.reveal()
    return [*secrets_in(url), *([given] if given else [])]


class _Conflict(LedgerUnavailable):
    """Concurrent writers of the same keys met (a deadlock, a serialisation failure): the
    statement is tried again."""


class _Broken(LedgerUnavailable):
    """The connection died under a statement: tried once more on a new connection
    (every statement of the ledger may run twice: upserts and deletes of the same keys)."""
