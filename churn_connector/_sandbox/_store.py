"""SQLite storage for the sandbox: events, users, channels, logs and counters.

One connection (``check_same_thread=False``) guarded by one lock: the server's handler threads
take turns, which keeps every request's writes atomic and the code simple. Rows are
partitioned by ``app``, a hash of the API key, so a database file never holds a raw key.

A batch of events is one transaction: one ``executemany`` of ``INSERT ... ON CONFLICT DO
NOTHING`` on the unique (app, message id) index, which is the deduplication. Only when some
rows were not inserted are they looked at one by one (re-sends: duplicates or conflicts,
against the stored event). Nothing per event is kept in Python, and a file database
(``--db``) runs in WAL mode with a bounded page cache, so memory stays flat however many
events it holds.

In memory, one transaction stays open for the store's life, never committed: SQLite's commit
of an in-memory database scans its whole page cache (which, in memory, is the whole
database), so a commit per request cost more the more was stored (0.6 µs an event at 100k
stored, 8.6 at 1.8M). Nobody else can read a private in-memory database, so the open
transaction hides nothing. A request's writes are a savepoint of it (``ROLLBACK TO`` undoes a
failed one whole), except a batch of events, which is undone by deleting its rows (see
``_events_tx``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

# 2: events no longer keep a canonical copy of themselves (re-sends are compared with the
# stored columns), and name their app by a number (apps): the deduplication index holds
# (number, message id), a third smaller and faster than (32-digit app, message id). A
# version 1 file is upgraded in place when opened.
SCHEMA_VERSION: Final = 2
# a file database's page cache, in KiB: bounded, so memory stays flat as the file grows
CACHE_KIB: Final = 32 * 1024
WAL_PAGES: Final = 10_000  # pages of WAL between checkpoints (~40 MB at 4 KiB a page)

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS apps (
    id INTEGER PRIMARY KEY,
    app TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app_no INTEGER NOT NULL REFERENCES apps (id),
    message_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    properties TEXT NOT NULL,
    context TEXT NOT NULL,
    received_at TEXT NOT NULL,
    UNIQUE (app_no, message_id)
);
CREATE TABLE IF NOT EXISTS users (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    traits TEXT NOT NULL,
    preferred_channel TEXT,
    UNIQUE (app, external_user_id)
);
CREATE TABLE IF NOT EXISTS channels (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    opted_in INTEGER NOT NULL,
    verified INTEGER,
    UNIQUE (app, external_user_id, channel, address)
);
CREATE TABLE IF NOT EXISTS identify_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    body TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status INTEGER,
    fault TEXT,
    headers TEXT NOT NULL,
    body_len INTEGER NOT NULL,
    body_sha256 TEXT NOT NULL,
    received_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    app TEXT NOT NULL,
    name TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (app, name)
);
"""

REJECTION_STATUSES: Final = (400, 411, 413, 415)


def app_id(api_key: str) -> str:
    """The partition id of a key: a digest, so stored files never contain the key itself."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:32]


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: equal content gives equal text (for conflict detection)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dumps_exact(value: Any) -> str:
    """For values orjson read from a body it writes back byte for byte (see ``_rules``)."""
    return orjson.dumps(value).decode("utf-8")


_INSERT_EVENT: Final = (
    "INSERT INTO events (app_no, message_id, external_user_id, event_type, occurred_at, "
    "properties, context, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (app_no, message_id) DO NOTHING"
)
_LAST_SEQ: Final = "SELECT coalesce(max(seq), 0) FROM events"
_BUMP_TWO: Final = (
    "INSERT INTO counters (app, name, value) VALUES (?, ?, ?), (?, ?, ?) "
    "ON CONFLICT (app, name) DO UPDATE SET value = value + excluded.value"
)
_UPGRADE_FROM_1: Final = """
CREATE TABLE apps (id INTEGER PRIMARY KEY, app TEXT NOT NULL UNIQUE);
INSERT INTO apps (app) SELECT DISTINCT app FROM events ORDER BY app;
CREATE TABLE events_2 (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app_no INTEGER NOT NULL REFERENCES apps (id),
    message_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    properties TEXT NOT NULL,
    context TEXT NOT NULL,
    received_at TEXT NOT NULL,
    UNIQUE (app_no, message_id)
);
INSERT INTO events_2 (seq, app_no, message_id, external_user_id, event_type, occurred_at,
    properties, context, received_at)
SELECT e.seq, a.id, e.message_id, e.external_user_id, e.event_type, e.occurred_at,
    e.properties, e.context, e.received_at
FROM events AS e JOIN apps AS a ON a.app = e.app ORDER BY e.seq;
DROP TABLE events;
ALTER TABLE events_2 RENAME TO events;
"""


@dataclass(frozen=True)
class BatchOutcome:
    """What happened to the events of one request."""

    accepted: int
    duplicates: int
    conflicts: int


@dataclass(frozen=True)
class RequestRecord:
    """One row of the request log."""

    app: str | None
    method: str
    path: str
    status: int | None  # None: the connection was dropped without a response
    fault: str | None
    headers: dict[str, str]
    body_len: int
    body_sha256: str
    received_at: datetime


class Store:
    """The sandbox database (in memory when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        target = ":memory:" if path is None else os.fspath(path)
        # autocommit mode; a request's writes are one transaction, or one savepoint (see _tx)
        self._conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        self._closed = False
        self._in_memory = path is None
        self._app_numbers: dict[str, int] = {}  # app -> its number in apps
        with self._lock:
            self._conn.execute("PRAGMA busy_timeout = 5000")
            if path is not None:
                # WAL: a commit appends, and readers (a notebook, sqlite3) never block
                # writes. No fsync at all (synchronous OFF): the data outlives the sandbox's
                # process, not the machine's crash, which suits a test double; the fsyncs
                # of checkpoints took half the time of a batch. Checkpoints every ~40 MB of
                # WAL: the unique index takes random inserts (message ids are hashes), so a
                # batch dirties about one page per event, and a page written to the WAL
                # several times between checkpoints is copied to the file once.
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = OFF")
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
                self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            (version,) = self._conn.execute("PRAGMA user_version").fetchone()
            if version == 1:
                self._upgrade_from_1(target)
            elif version not in (0, SCHEMA_VERSION):
                self._conn.close()
                raise ValueError(f"{target}: sandbox schema version {version} is not supported")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            if self._in_memory:
                self._conn.execute("BEGIN")  # for the store's life: see the module docstring

    def _upgrade_from_1(self, target: str) -> None:
        """Schema 1 -> 2 in one transaction: events copied with app numbers, in order."""
        try:
            self._conn.executescript(f"BEGIN IMMEDIATE;{_UPGRADE_FROM_1}COMMIT;")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            self._conn.close()
            raise ValueError(
                f"{target}: a sandbox file of schema version 1 could not be upgraded ({exc}); "
                "use a new file"
            ) from None

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One request's writes, all or nothing: a transaction in a file, a savepoint of the
        open transaction in memory."""
        with self._lock:
            if not self._in_memory:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return
            if not self._conn.in_transaction:
                # SQLite ends a transaction itself on a few errors (out of memory, ...)
                self._conn.execute("BEGIN")
            self._conn.execute("SAVEPOINT request")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK TO request")
                    self._conn.execute("RELEASE request")
                raise
            self._conn.execute("RELEASE request")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    # ----------------------------------------------------------------------- writes

    def store_events(
        self, app: str, events: list[dict[str, Any]], received_at: datetime, *, exact: bool = False
    ) -> BatchOutcome:
        """Store events, first message id wins; count identical re-sends and conflicts.

        ``exact``: the events were parsed by orjson from bytes it writes back unchanged, so
        it may write their ``properties`` and ``context`` too.
        """
        dumps = _dumps_exact if exact else _dumps
        received = received_at.isoformat()
        app_no = self._app_no(app)
        rows = [
            (
                app_no,
                event["context"]["$message_id"],
                event["external_user_id"],
                event["event_type"],
                event["occurred_at"],
                dumps(event["properties"]),
                dumps(event["context"]),
                received,
            )
            for event in events
        ]
        with self._events_tx() as (conn, last):
            before = conn.total_changes
            conn.executemany(_INSERT_EVENT, rows)
            accepted = conn.total_changes - before
            duplicates = conflicts = 0
            if accepted < len(rows):
                duplicates, conflicts = self._resends(conn, app_no, events, last)
            # one statement, the last write: it changes both counters or neither
            conn.execute(_BUMP_TWO, (app, "duplicates", duplicates, app, "conflicts", conflicts))
        return BatchOutcome(accepted, duplicates, conflicts)

    @contextmanager
    def _events_tx(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A request's events, all or nothing; yields the last ``seq`` stored before them.

        In a file, a transaction. In memory, neither a commit (see the module docstring) nor
        a savepoint, which would first copy to its journal every index page the batch
        touches (~3 µs an event at 1.5M stored): with the lock held, the request's rows are
        exactly those after ``last``, so a failure deletes them, and the counters are its
        last write, one statement.
        """
        if not self._in_memory:
            with self._tx() as conn:
                (last,) = conn.execute(_LAST_SEQ).fetchone()
                yield conn, last
            return
        with self._lock:
            conn = self._conn
            if not conn.in_transaction:
                conn.execute("BEGIN")  # SQLite ends a transaction itself on a few errors
            (last,) = conn.execute(_LAST_SEQ).fetchone()
            try:
                yield conn, last
            except BaseException:
                if conn.in_transaction:
                    conn.execute("DELETE FROM events WHERE seq > ?", (last,))
                raise

    def _app_no(self, app: str) -> int:
        """The number of ``app`` in ``apps``, given on first use."""
        number = self._app_numbers.get(app)
        if number is None:
            with self._lock:
                self._conn.execute(
                    "INSERT INTO apps (app) VALUES (?) ON CONFLICT (app) DO NOTHING", (app,)
                )
                (number,) = self._conn.execute(
                    "SELECT id FROM apps WHERE app = ?", (app,)
                ).fetchone()
            self._app_numbers[app] = number
        return number

    @staticmethod
    def _resends(
        conn: sqlite3.Connection, app_no: int, events: list[dict[str, Any]], last: int
    ) -> tuple[int, int]:
        """(duplicates, conflicts) among the events of a batch that were not inserted: each
        is compared with the stored event of its message id (an earlier one of the batch, or
        of an earlier request)."""
        inserted = {
            message_id
            for (message_id,) in conn.execute(
                "SELECT message_id FROM events WHERE seq > ? AND app_no = ?", (last, app_no)
            )
        }
        first: set[str] = set()
        stored: dict[str, str] = {}
        duplicates = conflicts = 0
        for event in events:
            message_id = event["context"]["$message_id"]
            if message_id in inserted and message_id not in first:
                first.add(message_id)  # this one was stored
                continue
            if message_id not in stored:
                user, kind, occurred, properties, context = conn.execute(
                    "SELECT external_user_id, event_type, occurred_at, properties, context "
                    "FROM events WHERE app_no = ? AND message_id = ?",
                    (app_no, message_id),
                ).fetchone()
                stored[message_id] = canonical_json(
                    {
                        "external_user_id": user,
                        "event_type": kind,
                        "occurred_at": occurred,
                        "properties": json.loads(properties),
                        "context": json.loads(context),
                    }
                )
            if canonical_json(event) == stored[message_id]:
                duplicates += 1
            else:
                conflicts += 1
        return duplicates, conflicts

    def apply_identify(
        self, app: str, body: dict[str, Any], started_at: datetime, finished_at: datetime
    ) -> bool:
        """Merge traits, upsert channel items, log the call; True when anything changed."""
        user = body["external_user_id"]
        changed = False
        with self._tx() as conn:
            row = conn.execute(
                "SELECT traits, preferred_channel FROM users "
                "WHERE app = ? AND external_user_id = ?",
                (app, user),
            ).fetchone()
            old_traits: dict[str, Any] = {} if row is None else json.loads(row[0])
            old_channel: str | None = None if row is None else row[1]
            traits = {**old_traits, **body.get("traits", {})}  # shallow: later wins per key
            preferred = body.get("preferred_channel", old_channel)
            if row is None:
                conn.execute(
                    "INSERT INTO users (app, external_user_id, traits, preferred_channel) "
                    "VALUES (?, ?, ?, ?)",
                    (app, user, _dumps(traits), preferred),
                )
                changed = True
            elif canonical_json(traits) != canonical_json(old_traits) or preferred != old_channel:
                conn.execute(
                    "UPDATE users SET traits = ?, preferred_channel = ? "
                    "WHERE app = ? AND external_user_id = ?",
                    (_dumps(traits), preferred, app, user),
                )
                changed = True
            for item in body.get("channels", []):
                changed |= self._upsert_channel(conn, app, user, item)
            conn.execute(
                "INSERT INTO identify_log (app, external_user_id, body, started_at, finished_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (app, user, _dumps(body), started_at.isoformat(), finished_at.isoformat()),
            )
        return changed

    @staticmethod
    def _upsert_channel(
        conn: sqlite3.Connection, app: str, user: str, item: dict[str, Any]
    ) -> bool:
        key = (app, user, item["channel"], item["address"])
        row = conn.execute(
            "SELECT opted_in, verified FROM channels "
            "WHERE app = ? AND external_user_id = ? AND channel = ? AND address = ?",
            key,
        ).fetchone()
        if row is None:
            verified = item.get("verified")
            conn.execute(
                "INSERT INTO channels (app, external_user_id, channel, address, opted_in, verified)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    int(item.get("opted_in", True)),
                    None if verified is None else int(verified),
                ),
            )
            return True
        # absent fields keep the stored value; present ones win
        opted_in = int(item["opted_in"]) if "opted_in" in item else row[0]
        verified_now = int(item["verified"]) if "verified" in item else row[1]
        if (opted_in, verified_now) == tuple(row):
            return False
        conn.execute(
            "UPDATE channels SET opted_in = ?, verified = ? "
            "WHERE app = ? AND external_user_id = ? AND channel = ? AND address = ?",
            (opted_in, verified_now, *key),
        )
        return True

    def raise_max_concurrency(self, app: str, value: int) -> None:
        """Record a new in-flight identify maximum for one user (kept as a running max)."""
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO counters (app, name, value) VALUES (?, 'max_concurrent_identify', ?) "
                "ON CONFLICT (app, name) DO UPDATE SET value = max(value, excluded.value)",
                (app, value),
            )

    def log_request(self, record: RequestRecord) -> None:
        """Append one request to the log."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO requests (app, method, path, status, fault, headers, body_len, "
                "body_sha256, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.app,
                    record.method,
                    record.path,
                    record.status,
                    record.fault,
                    _dumps(record.headers),
                    record.body_len,
                    record.body_sha256,
                    record.received_at.isoformat(),
                ),
            )

    # ----------------------------------------------------------------------- reads

    def events(self, app: str) -> list[dict[str, Any]]:
        """Stored events of one app in arrival order."""
        rows = self._query(
            "SELECT external_user_id, event_type, occurred_at, properties, context, message_id, "
            "received_at FROM events WHERE app_no = (SELECT id FROM apps WHERE app = ?) "
            "ORDER BY seq",
            (app,),
        )
        return [
            {
                "external_user_id": r[0],
                "event_type": r[1],
                "occurred_at": r[2],
                "properties": json.loads(r[3]),
                "context": json.loads(r[4]),
                "message_id": r[5],
                "received_at": r[6],
            }
            for r in rows
        ]

    def users(self, app: str) -> list[dict[str, Any]]:
        """Users of one app in first-identify order, with their merged channel items."""
        items: dict[str, list[dict[str, Any]]] = {}
        for user, channel, address, opted_in, verified in self._query(
            "SELECT external_user_id, channel, address, opted_in, verified FROM channels "
            "WHERE app = ? ORDER BY seq",
            (app,),
        ):
            item: dict[str, Any] = {
                "channel": channel,
                "address": address,
                "opted_in": bool(opted_in),
            }
            if verified is not None:
                item["verified"] = bool(verified)
            items.setdefault(user, []).append(item)
        rows = self._query(
            "SELECT external_user_id, traits, preferred_channel FROM users "
            "WHERE app = ? ORDER BY seq",
            (app,),
        )
        return [
            {
                "external_user_id": user,
                "traits": json.loads(traits),
                "preferred_channel": preferred,
                "channels": items.get(user, []),
            }
            for user, traits, preferred in rows
        ]

    def identify_log(self, app: str) -> list[dict[str, Any]]:
        """Accepted identify calls of one app in arrival order."""
        rows = self._query(
            "SELECT seq, external_user_id, body, started_at, finished_at FROM identify_log "
            "WHERE app = ? ORDER BY seq",
            (app,),
        )
        return [
            {
                "seq": r[0],
                "external_user_id": r[1],
                "body": json.loads(r[2]),
                "started_at": r[3],
                "finished_at": r[4],
            }
            for r in rows
        ]

    def requests(self) -> list[dict[str, Any]]:
        """Every request, all apps, in arrival order."""
        rows = self._query(
            "SELECT seq, method, path, status, fault, headers, body_len, body_sha256, "
            "received_at FROM requests ORDER BY seq"
        )
        return [
            {
                "seq": r[0],
                "method": r[1],
                "path": r[2],
                "status": r[3],
                "fault": r[4],
                "headers": json.loads(r[5]),
                "body_len": r[6],
                "body_sha256": r[7],
                "received_at": r[8],
            }
            for r in rows
        ]

    def stats(self, app: str) -> dict[str, Any]:
        """Counters of one app; see ``Sandbox.stats``."""
        requests: dict[str, int] = {}
        for method, path, status, n in self._query(
            "SELECT method, path, status, count(*) FROM requests WHERE app = ? "
            "GROUP BY method, path, status ORDER BY min(seq)",
            (app,),
        ):
            requests[f"{method} {path} {'dropped' if status is None else status}"] = n
        counters = dict(self._query("SELECT name, value FROM counters WHERE app = ?", (app,)))
        marks = ",".join("?" * len(REJECTION_STATUSES))
        ((rejected,),) = self._query(
            f"SELECT count(*) FROM requests WHERE app = ? AND status IN ({marks})",  # noqa: S608
            (app, *REJECTION_STATUSES),
        )
        ((stored,),) = self._query(
            "SELECT count(*) FROM events WHERE app_no = (SELECT id FROM apps WHERE app = ?)",
            (app,),
        )
        ((users,),) = self._query("SELECT count(*) FROM users WHERE app = ?", (app,))
        ((identifies,),) = self._query("SELECT count(*) FROM identify_log WHERE app = ?", (app,))
        return {
            "requests": requests,
            "stored": stored,
            "duplicates": counters.get("duplicates", 0),
            "conflicts": counters.get("conflicts", 0),
            "identifies": identifies,
            "users": users,
            "max_concurrent_identify_same_user": counters.get("max_concurrent_identify", 0),
            "rejected": rejected,
        }
