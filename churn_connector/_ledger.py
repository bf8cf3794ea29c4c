"""The ledger: an opt-in local SQLite record of what the API acknowledged.

With a ledger, a re-run skips events whose message id was already acknowledged, and
identify sends only users whose body changed since their last acknowledgement. Only keys
and digests are stored (message ids, user ids, hashes of bodies), never the data itself.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS acknowledged (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    digest TEXT NOT NULL,
    acknowledged_at TEXT NOT NULL,
    PRIMARY KEY (kind, key)
)
"""
_BATCH = 500  # SQLite's bound-parameter limit is 999 on old builds


def digest(body: bytes) -> str:
    """The digest recorded for a request body (SHA-256, 128 bits in hex)."""
    return hashlib.sha256(body).hexdigest()[:32]


class Ledger:
    """What the API acknowledged, by kind (``events``/``identities``) and key."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        # sender threads record acknowledgements; every access holds the lock
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def known(self, kind: str, keys: Sequence[str]) -> dict[str, str]:
        """The recorded digest of each of ``keys`` that was acknowledged before."""
        found: dict[str, str] = {}
        with self._lock:
            for lo in range(0, len(keys), _BATCH):
                part = list(keys[lo : lo + _BATCH])
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, digest FROM acknowledged WHERE kind = ? AND key IN ({marks})",  # noqa: S608 (placeholders only)
                    [kind, *part],
                )
                found.update(rows.fetchall())
        return found

    def record(self, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        """Record acknowledged (key, digest) pairs; a later acknowledgement replaces one."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        rows = [(kind, key, dig, now) for key, dig in entries]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO acknowledged VALUES (?, ?, ?, ?)", rows)

    def count(self, kind: str) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM acknowledged WHERE kind = ?", [kind]
            ).fetchone()
        return int(n)


def open_ledger(ledger: str | os.PathLike[str] | Ledger | None) -> tuple[Ledger | None, bool]:
    """A Ledger for the option, and whether the caller opened it (and so must close it)."""
    if ledger is None or isinstance(ledger, Ledger):
        return ledger, False
    return Ledger(ledger), True
