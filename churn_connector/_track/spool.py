"""A tracker's durable spool: a SQLite file holding every event until the API acknowledges it.

Each event is committed before ``track`` returns (WAL journal, ``synchronous=FULL``: the
commit is on disk, so ``kill -9`` or a power cut loses nothing that ``track`` returned for).
Rows hold the event's wire JSON as text, never a pickle: a spool is data, readable with any
SQLite client, and opening one never runs code. Acknowledged, rejected and expired events
leave it; events that failed stay for the next tracker opened on it, which sends them first.

One process owns a spool at a time. Its stamp (host, boot id, pid and the pid's start time)
is written when a tracker opens it and removed when it closes; a tracker finding the stamp of
a live process refuses the spool (two senders would deliver each event twice and delete each
other's rows). A stamp whose process is gone (killed, or the machine rebooted: another boot
id) is taken over. A stamp from another host cannot be checked and is refused.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .._core import ConfigurationError, LedgerError

__all__ = ["Owner", "Row", "Spool"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    occurred_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    tracked_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS owner (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    host TEXT NOT NULL,
    boot_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TEXT NOT NULL,
    since REAL NOT NULL
);
"""
# a forked child keeps the parent's connection object alive and unused: closing it there
# would run SQLite's last-connection cleanup on a database the parent still writes
_inherited: list[sqlite3.Connection] = []
_UNSTAMP = "DELETE FROM owner"
_open_here: set[str] = set()  # spools open in this process (a second tracker is refused)
_open_lock = threading.Lock()


@dataclass(frozen=True)
class Owner:
    """Who holds a spool: enough to tell whether that process still runs."""

    host: str
    boot_id: str
    pid: int
    started: str

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), _boot_id(), pid, _started(pid))

    def alive(self) -> bool:
        """Whether the stamped process still runs (another host's: assumed so)."""
        if self.host != socket.gethostname():
            return True
        if self.boot_id != _boot_id():
            return False  # the machine rebooted since
        return _started(self.pid) == self.started and self.started != ""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""  # not Linux: the pid and its start time decide


def _started(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat), which tells a reused pid
    apart; "" when the process does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ""
        except PermissionError:
            pass
        return "?"  # no /proc: the pid exists, its start time is unknown
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass(frozen=True)
class Row:
    """One spooled event."""

    seq: int
    message_id: str
    ms: int
    body: bytes


class Spool:
    """The SQLite spool of one tracker (thread-safe; see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(Path(path).resolve())
        with _open_lock:
            if self.path in _open_here:
                raise ConfigurationError(
                    f"the spool {self.path} is open in another tracker of this process: "
                    "one tracker per spool"
                )
            _open_here.add(self.path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self.owner = self._claim()
        except sqlite3.Error as exc:
            self._forget()
            raise LedgerError(f"cannot open the spool {self.path}: {exc}", path=self.path) from None
        except BaseException:
            self._forget()
            raise

    def _forget(self) -> None:
        with _open_lock:
            _open_here.discard(self.path)

    def _claim(self) -> Owner:
        me = Owner.me()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT host, boot_id, pid, started FROM owner").fetchone()
            if row is not None:
                held = Owner(*row)
                if held != me and held.alive():
                    raise ConfigurationError(
                        f"the spool {self.path} belongs to a running process (pid {held.pid} "
                        f"on {held.host}): give each process its own spool. If that process "
                        "is gone (another host cannot be checked), remove its stamp: "
                        f"sqlite3 {self.path} {_UNSTAMP!r}"
                    )
            db.execute(
                "INSERT OR REPLACE INTO owner VALUES (1, ?, ?, ?, ?, ?)",
                (me.host, me.boot_id, me.pid, me.started, time.time()),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return me

    def _fail(self, doing: str, exc: sqlite3.Error) -> LedgerError:
        full = "full" in str(exc) or "locked" in str(exc)
        return LedgerError(
            f"the spool {self.path} could not {doing}: {exc}", path=self.path, retryable=full
        )

    def add(self, message_id: str, ms: int, body: bytes) -> int:
        """Commit one event to disk; its sequence number."""
        with self._lock:
            try:
                cursor = self._db.execute(
                    "INSERT INTO events (message_id, occurred_ms, body, tracked_at) "
                    "VALUES (?, ?, ?, ?)",
                    (message_id, ms, body.decode("utf-8"), time.time()),
                )
            except sqlite3.Error as exc:
                raise self._fail("store the event", exc) from None
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def remove(self, seqs: Iterable[int]) -> None:
        """Delete events that need no more sending (acknowledged, rejected, expired)."""
        seqs = list(seqs)
        if not seqs:
            return
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany("DELETE FROM events WHERE seq = ?", [(s,) for s in seqs])
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise self._fail("remove acknowledged events", exc) from None

    def after(self, seq: int, limit: int) -> list[Row]:
        """Up to ``limit`` events after ``seq``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, message_id, occurred_ms, body FROM events WHERE seq > ? "
                "ORDER BY seq LIMIT ?",
                (seq, limit),
            ).fetchall()
        return [Row(s, m, ms, body.encode("utf-8")) for s, m, ms, body in rows]

    def count(self, after: int = 0) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT count(*) FROM events WHERE seq > ?", (after,)
            ).fetchone()
        return int(n)

    def ids(self, after: int = 0) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT message_id FROM events WHERE seq > ? ORDER BY seq", (after,)
            ).fetchall()
        return [m for (m,) in rows]

    def close(self) -> None:
        """Remove our stamp and close (the events that remain stay)."""
        with self._lock:
            try:
                self._db.execute("DELETE FROM owner WHERE pid = ?", (self.owner.pid,))
                self._db.close()
            except sqlite3.Error:
                pass  # the stamp of a dead process is taken over anyway
        self._forget()

    def abandon(self) -> None:
        """In a forked child: never touch the parent's spool (its connection neither)."""
        _inherited.append(self._db)
        self._forget()
