"""The ledger in a local SQLite file: the default, for one machine that outlives its runs.

Several processes of one machine may share the file (SQLite's locks); its write-ahead log
does not work over NFS or SMB: shared state between machines belongs in PostgreSQL or an
object store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa

from .._core import ConfigurationError
from .base import (
    EVENT_KINDS,
    EVENT_RETENTION_DAYS,
    Ledger,
    LedgerUnavailable,
    cutoff,
    export_batch,
    kinds_of,
    retention_cutoff,
    stats_frame,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS acknowledged (
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    digest TEXT NOT NULL,
    acknowledged_at TEXT NOT NULL,
    PRIMARY KEY (scope, kind, key)
)
"""
_BATCH = 500  # SQLite's bound-parameter limit is 999 on old builds
# acknowledgements are written in groups: a transaction of 500 random keys rewrote ~500
# pages of the key index (1M records: 120 s of disk writes), one of 50,000 far fewer each
FLUSH_ROWS = 50_000
FLUSH_SECONDS = 1.0
_OPEN_SECONDS = 30.0
_EXPORT_ROWS = 100_000


def _iso(moment: datetime) -> str:
    """The text form of a time in the file (ISO 8601, UTC, milliseconds): it sorts as time."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


class SqliteLedger(Ledger):
    """What the API acknowledged, in a SQLite file (``read_only``: opened without changing
    it, for dry runs).

    Acknowledgements are buffered and written in one transaction every ``FLUSH_SECONDS``
    or ``FLUSH_ROWS`` records (the first at once, so that a file that cannot be written
    stops the run early), at ``flush``, at ``close`` and before any ``forget``. A crash
    loses at most the buffered records: those rows are sent again by the next run, and the
    API de-duplicates them. ``known`` sees the buffer.
    """

    kind_name: ClassVar[str] = "SQLite file"

    def __init__(
        self, location: str | os.PathLike[str], *, read_only: bool = False, **options: Any
    ) -> None:
        if options:
            raise TypeError(f"a SQLite ledger takes no options {sorted(options)}")
        text = os.fspath(location)
        if isinstance(text, str) and text.lower().startswith("sqlite://"):
            text = text[len("sqlite://") :]  # sqlite:///abs/path -> /abs/path
        self.path = Path(text)
        self.location = str(self.path)
        self.read_only = read_only
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one flush at a time, in order
        self._pending: list[tuple[str, str, str, str, str]] = []
        self._pending_keys: dict[tuple[str, str], dict[str, str]] = {}  # for known()
        self._writing: dict[tuple[str, str], dict[str, str]] = {}  # being written
        self._first_pending = 0.0
        self._wrote = False
        # the buffer under _lock; each connection under its own lock: a run's reads (one
        # query a slice) go on while a sender thread writes a group (WAL: readers see the
        # last commit and never wait for a writer)
        self._db_lock = threading.Lock()
        uri = f"file:{self.path}?mode={'ro' if read_only else 'rwc'}"
        # opening beside another process may find the file locked without SQLite's busy
        # wait (switching to WAL, or while another connection recovers the log): try again
        # within the same 30 s a locked write waits
        deadline = time.monotonic() + _OPEN_SECONDS
        while True:
            try:
                self._open(uri)
                return
            except sqlite3.Error as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise ConfigurationError(f"ledger {self.path}: {exc}") from None
                time.sleep(0.05)

    def _open(self, uri: str) -> None:
        self._db = _connect(uri)
        try:
            if not self.read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                # a crash may lose the last records: that costs a re-send, which the API
                # de-duplicates, not a loss; a full fsync per request would cost 3x
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(_SCHEMA)
                self._reader, self._read_lock = _connect(uri), threading.Lock()
            else:
                self._db.execute("SELECT 1 FROM acknowledged LIMIT 1")
                self._reader, self._read_lock = self._db, self._db_lock
        except sqlite3.Error:
            self._db.close()
            raise

    def close(self) -> None:
        """Write what is buffered and close the SQLite file (a ledger given by path is
        closed after each run, which flushed before, loudly)."""
        with contextlib.suppress(LedgerUnavailable):
            self.flush()
        with self._read_lock:
            self._reader.close()
        with self._db_lock:
            self._db.close()

    def known(self, scope: str, kind: str, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._lock:
            buffered = dict(self._writing.get((scope, kind), {}))
            buffered.update(self._pending_keys.get((scope, kind), {}))
        with self._read_lock, _failing("read"):
            for lo in range(0, len(keys), _BATCH):
                part = list(keys[lo : lo + _BATCH])
                marks = ",".join("?" * len(part))
                rows = self._reader.execute(
                    "SELECT key, digest FROM acknowledged "  # noqa: S608 (placeholders only)
                    f"WHERE scope = ? AND kind = ? AND key IN ({marks})",
                    [scope, kind, *part],
                )
                found.update(rows.fetchall())
        if buffered:  # acknowledged since the last write: newer than the file
            found.update((key, buffered[key]) for key in keys if key in buffered)
        return found

    def record(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        if self.read_only:
            return
        now = _iso(datetime.now(UTC))
        rows = [(scope, kind, key, dig, now) for key, dig in entries]
        if not rows:
            return
        with self._lock:
            if not self._pending:
                self._first_pending = time.monotonic()
            self._pending.extend(rows)
            self._pending_keys.setdefault((scope, kind), {}).update(
                (key, dig) for _, _, key, dig, _ in rows
            )
            due = (
                not self._wrote
                or len(self._pending) >= FLUSH_ROWS
                or time.monotonic() - self._first_pending >= FLUSH_SECONDS
            )
        if due and self._write_lock.acquire(blocking=False):
            # a sender thread that finds a group being written leaves its records to the
            # next one: waiting for the writer (~0.5 s for 50,000 keys) stalled every
            # sender of the run behind it
            try:
                self._flush_held()
            finally:
                self._write_lock.release()

    def record_now(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        """One transaction of these records alone: the acknowledgements buffered meanwhile
        are the senders' to write (written here too, they put every acknowledgement of the
        run on the path of the thread that must wait for these)."""
        if self.read_only:
            return
        now = _iso(datetime.now(UTC))
        rows = sorted((scope, kind, key, dig, now) for key, dig in entries)
        self._write("INSERT OR REPLACE INTO acknowledged VALUES (?, ?, ?, ?, ?)", rows)
        self._wrote = True

    def forget(self, scope: str, kind: str, keys: Iterable[str]) -> None:
        rows = [(scope, kind, key) for key in keys]
        if not rows:
            return
        self.flush()  # so that no buffered record of these keys is written after
        self._write("DELETE FROM acknowledged WHERE scope = ? AND kind = ? AND key = ?", rows)

    def flush(self) -> None:
        """Write the buffered acknowledgements in one transaction."""
        if self.read_only:
            return
        with self._write_lock:
            self._flush_held()

    def _flush_held(self) -> None:
        """``flush``, with the write lock held."""
        with self._lock:
            rows, self._pending = self._pending, []
            self._writing, self._pending_keys = self._pending_keys, {}
        if not rows:
            return
        # in key order, for locality in the index (a stable sort: a later record of
        # the same key still replaces an earlier one)
        rows.sort(key=lambda row: (row[0], row[1], row[2]))
        try:
            self._write("INSERT OR REPLACE INTO acknowledged VALUES (?, ?, ?, ?, ?)", rows)
        finally:
            with self._lock:
                self._writing = {}
        self._wrote = True

    def _write(self, sql: str, rows: Sequence[tuple[str, ...]]) -> None:
        """One transaction for all ``rows`` (a flushed group, or the keys of a forget)."""
        if self.read_only or not rows:
            return
        with self._db_lock, _failing("write"):
            self._transaction(lambda db: db.executemany(sql, rows))

    def _transaction(self, work: Any) -> Any:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            done = work(self._db)
            self._db.execute("COMMIT")
            return done
        except sqlite3.Error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    # ---------------------------------------------------------------- operations

    def stats(self) -> pd.DataFrame:
        self.flush()
        with self._db_lock, _failing("read"):
            rows = self._db.execute(
                "SELECT scope, kind, COUNT(*), MAX(acknowledged_at) FROM acknowledged "
                "GROUP BY scope, kind"
            ).fetchall()
        return stats_frame(rows)

    def drop(
        self, scope: str, *, kind: str | None = None, before: datetime | date | None = None
    ) -> int:
        self._writable()
        self.flush()
        sql, args = "DELETE FROM acknowledged WHERE scope = ?", [scope]
        kinds = kinds_of(kind)
        if kinds is not None:
            sql = sql + f" AND kind IN ({','.join('?' * len(kinds))})"
            args = [*args, *kinds]
        moment = cutoff(before)
        if moment is not None:
            sql, args = sql + " AND acknowledged_at < ?", [*args, _iso(moment)]
        with self._db_lock, _failing("write"):
            return int(self._transaction(lambda db: db.execute(sql, args).rowcount))

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.flush()
        with self._db_lock, _failing("read"):
            rows = self._db.execute(
                "SELECT scope, kind, key, digest, acknowledged_at FROM acknowledged "
                "ORDER BY scope, kind, key"
            )
            while chunk := rows.fetchmany(_EXPORT_ROWS):
                yield export_batch(chunk)

    def compact(self, *, keep_events_days: int = EVENT_RETENTION_DAYS) -> str:
        self._writable()
        self.flush()
        old = _iso(retention_cutoff(keep_events_days))
        with self._db_lock, _failing("write"):
            dropped = self._transaction(
                lambda db: (
                    db.execute(
                        "DELETE FROM acknowledged WHERE kind IN (?, ?) AND acknowledged_at < ?",
                        [*EVENT_KINDS, old],
                    ).rowcount
                )
            )
            self._db.execute("VACUUM")  # hands the freed pages back to the file system
        return (
            f"dropped {dropped:,} event records acknowledged before {old[:10]} "
            f"(older than {keep_events_days} days); the file was vacuumed"
        )

    def _writable(self) -> None:
        if self.read_only:
            raise ConfigurationError(f"ledger {self.location} was opened read-only")


def _connect(uri: str) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30)


@contextmanager
def _failing(what: str) -> Iterator[None]:
    """SQLite's errors as the ledger's own (``LedgerUnavailable``), judging whether a later
    try may succeed."""
    try:
        yield
    except sqlite3.Error as exc:
        raise LedgerUnavailable(f"{what} failed: {exc}", retryable=_may_heal(exc)) from None


# SQLite's primary result codes of a write that a later run may find possible: the file
# locked by another process, the disk full or failing for now (not: read-only, corrupt)
_PASSING = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR}
)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _may_heal(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _PASSING
