"""A request budget shared by processes on any machine: a token bucket in PostgreSQL.

Four workers at "20 a second" each send 80; given one ``budget`` they send 20 together.
The bucket is one row of the table ``churn_budget`` per budget name (the API's host and
port unless the URL ends in ``#name``), refilled by the database server's clock (so the
workers' clocks need not agree) and taken from in small grants: one request's worth at a
time up to 50 a second, so that no process holds much of it. A grant may leave the bucket
below zero: the request then waits its turn (``-tokens / rate`` seconds), so the workers'
attempts come out evenly spaced, whoever asks. The same row holds the shared 429 pause: a
``Retry-After`` one worker sees pauses every worker (no grant is given before it ends); a
429 without one halves the shared rate (at most once a second, never below 5% of the
ceiling), which then recovers additively, by 5% of the ceiling a second.

The delivery policy (``policy.Policy``) takes its slots here instead of spacing them
itself, so batch sends, ``track()``, the trackers and the async client share one budget
alike. Each grant is one short statement; a database that cannot be reached fails soft:
one warning, then this process paces itself at the whole rate until the database answers
again (tried every ``RECONNECT`` seconds): a budget never stops a run. psycopg 3 (the
``postgres`` extra) is imported only when a budget is opened; its password comes from
``PGPASSWORD`` or ``~/.pgpass`` (or the ledger's, with ``budget="ledger"``), never from
the URL.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .._core import ClientConfig, ConfigurationError, Secret, budget_name_of, endpoint_of, named
from .._ledger import redact

__all__ = ["RECONNECT", "SharedBudget", "budget_of", "ledger_budget"]

log = logging.getLogger("churn_connector")

TABLE = "churn_budget"
RECONNECT = 10.0  # seconds before a budget that failed is tried again
_GRANT_RATE = 50.0  # up to this many requests a second, grants of one request
_FLOOR = 0.05  # the shared rate is never cut below this share of the ceiling
_RECOVER = 0.05  # share of the ceiling the shared rate recovers by each second
_LOCK_ID = 0x63686275  # pg_advisory_xact_lock: one worker creates the table at a time
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    name text PRIMARY KEY,
    ceiling double precision NOT NULL,
    rate double precision NOT NULL,
    tokens double precision NOT NULL,
    updated_at double precision NOT NULL,
    paused_until double precision NOT NULL DEFAULT 0,
    cut_at double precision NOT NULL DEFAULT 0
)"""
_NOW = "extract(epoch FROM clock_timestamp())::float8"
_NEW = f"""INSERT INTO {TABLE} (name, ceiling, rate, tokens, updated_at)
VALUES (%(name)s, %(ceiling)s, %(ceiling)s, %(burst)s, {_NOW}) ON CONFLICT (name) DO NOTHING"""  # noqa: S608
# one statement, so one row lock: refill by the time passed, recover the rate, take a grant
# (none while paused), and say what is left, the rate, the pause and the server's time
_TAKE = f"""WITH c AS (SELECT {_NOW} AS t)
UPDATE {TABLE} AS b SET
    ceiling = %(ceiling)s,
    rate = LEAST(%(ceiling)s, b.rate + %(ceiling)s * {_RECOVER} * GREATEST(0, c.t - b.updated_at)),
    tokens = LEAST(%(burst)s, b.tokens + b.rate * GREATEST(0, c.t - b.updated_at))
        - CASE WHEN b.paused_until > c.t THEN 0 ELSE %(take)s END,
    updated_at = c.t
FROM c WHERE b.name = %(name)s
RETURNING b.tokens, b.rate, b.paused_until, c.t"""  # noqa: S608
_PAUSE = f"""UPDATE {TABLE} SET paused_until = GREATEST(paused_until, {_NOW} + %(seconds)s)
WHERE name = %(name)s"""  # noqa: S608
_CUT = f"""UPDATE {TABLE} SET rate = GREATEST(ceiling * {_FLOOR}, rate * 0.5), cut_at = {_NOW}
WHERE name = %(name)s AND cut_at < {_NOW} - 1"""  # noqa: S608


class SharedBudget:
    """The budget ``name`` in the PostgreSQL database at ``url`` (see the module), for
    ``ceiling`` requests a second across every process that shares it. Thread-safe; one per
    process and budget (``budget_of``), whatever number of clients use it."""

    def __init__(
        self,
        url: Secret,
        name: str,
        ceiling: float,
        *,
        password: Secret | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.ceiling = ceiling
        self.location = redact(url.reveal().partition("#")[0])  # for messages
        self._url = url
        self._password = password
        self._clock = clock
        self._grant = max(1, int(ceiling // _GRANT_RATE))
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = os.getpid()
        self._slots: deque[float] = deque()  # a grant's slots not yet used, on our clock
        self._down_until = -math.inf  # the database failed: pace alone until then
        self._warned = False
        self._alone = 0.0  # pacing alone: the next slot
        self.rate = ceiling  # the shared rate, as the last grant said
        self.grants = 0  # statements that took from the bucket (for tests and benchmarks)

    def __repr__(self) -> str:
        return f"SharedBudget({self.location!r}, name={self.name!r}, ceiling={self.ceiling:g})"

    # -- what the policy asks --------------------------------------------------------------
    def take(self, now: float) -> tuple[float | None, float]:
        """A slot for one attempt: ``(when it may go, on the caller's clock, or None while
        the budget is paused; the pause's end)``."""
        with self._lock:
            if self._slots:
                return self._slots.popleft(), -math.inf
            answer = self._run(_TAKE, take=self._grant, burst=float(self._grant))
            if answer is None:  # the database failed: this process paces itself
                at = max(now, self._alone)
                self._alone = at + 1.0 / self.ceiling
                return at, -math.inf
            tokens, rate, paused_until, server_now = answer
            local = self._clock()
            self.rate = rate
            self.grants += 1
            if paused_until > server_now:
                return None, local + (paused_until - server_now)
            g = self._grant
            for i in range(g):
                self._slots.append(local + max(0.0, -(tokens + g - 1 - i)) / rate)
            return self._slots.popleft(), -math.inf

    def pause(self, seconds: float) -> None:
        """A ``Retry-After``: pause every process sharing the budget for ``seconds``."""
        with self._lock:
            self._slots.clear()  # granted before the pause: not to be used during it
            self._run(_PAUSE, seconds=seconds, rows=False)

    def slow_down(self) -> None:
        """A 429 without ``Retry-After``: halve the shared rate (once a second at most)."""
        with self._lock:
            self._slots.clear()
            self._run(_CUT, rows=False)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- the database ----------------------------------------------------------------------
    def _run(self, statement: str, *, rows: bool = True, **values: Any) -> tuple[Any, ...] | None:
        """Run one statement on the budget's row; its row (``rows``: it returns one), or
        None when the database cannot be used now (warned once; tried again after
        ``RECONNECT`` seconds)."""
        import psycopg  # noqa: PLC0415 - the postgres extra, only when a budget is used

        now = self._clock()
        if now < self._down_until:
            return None
        try:
            conn = self._connection()
            cursor = conn.execute(statement, {"name": self.name, "ceiling": self.ceiling, **values})
            row = cursor.fetchone() if rows else ()
        except psycopg.Error as exc:
            self._fail(exc)
            return None
        if self._warned:
            log.warning("request budget %s: reachable again, shared again", self.location)
            self._warned = False
        return None if row is None else tuple(row)

    def _connection(self) -> Any:
        import psycopg  # noqa: PLC0415

        if self._conn is not None and self._pid == os.getpid() and not self._conn.closed:
            return self._conn
        self._pid = os.getpid()  # after a fork the parent's connection is the parent's
        extra: dict[str, Any] = {"application_name": "churn_connector budget"}
        url = self._url.reveal().partition("#")[0]
        if "connect_timeout" not in url:
            extra["connect_timeout"] = 5
        if self._password is not None:
            extra["password"] = self._password.reveal()
        conn = psycopg.connect(url, autocommit=True, **extra)
        conn.execute("SET statement_timeout = 5000")
        if conn.execute("SELECT to_regclass(%s) IS NULL", [TABLE]).fetchone() == (True,):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_ID])
                conn.execute(_SCHEMA)
        conn.execute(_NEW, {"name": self.name, "ceiling": self.ceiling, "burst": self._grant})
        self._conn = conn
        return conn

    def _fail(self, exc: Exception) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._down_until = self._clock() + RECONNECT
        if not self._warned:
            self._warned = True
            log.warning(
                "request budget %s cannot be used (%s): this process paces itself at %g "
                "requests a second until it can",
                self.location,
                self._scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "error"),
                self.ceiling,
            )

    def _scrub(self, text: str) -> str:
        for secret in (self._password, self._url):
            if secret is not None:
                text = secret.scrub(text)
        return text


_OPEN: dict[tuple[str, str, str], SharedBudget] = {}
_OPEN_LOCK = threading.Lock()


def _shared(url: Secret, name: str, ceiling: float, password: Secret | None) -> SharedBudget:
    key = (url.reveal(), name, "" if password is None else password.fingerprint())
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is None or found.ceiling != ceiling:
            found = _OPEN[key] = SharedBudget(url, name, ceiling, password=password)
        return found


def _name(config: ClientConfig, url: str) -> str:
    where = endpoint_of(config.base_url)
    return budget_name_of(url) or f"{where.host}:{where.port}"


def budget_of(config: ClientConfig) -> SharedBudget | None:
    """The process's budget that ``config.budget`` names (None: none); ``"ledger"`` is a
    send's (``ledger_budget``), refused here."""
    if config.budget is None:
        return None
    if config.budget == "ledger":
        raise ConfigurationError(
            f"{named('budget')}='ledger' shares the PostgreSQL database of a send's "
            f"{named('ledger')}; here there is none: give the budget's postgresql:// URL"
        )
    assert config.max_requests_per_second is not None  # ClientConfig checks it
    return _shared(
        Secret(config.budget), _name(config, config.budget), config.max_requests_per_second, None
    )


def ledger_budget(config: ClientConfig, ledger: object) -> SharedBudget:
    """``budget="ledger"``: the budget in the database of the send's PostgreSQL ``ledger``
    (its URL and password, never shown)."""
    url = getattr(ledger, "_url", None)
    if type(ledger).__name__ != "PostgresLedger" or not isinstance(url, Secret):
        raise ConfigurationError(
            f"{named('budget')}='ledger' needs a PostgreSQL {named('ledger')} (postgresql://); "
            "give the budget's postgresql:// URL instead"
        )
    assert config.max_requests_per_second is not None
    password = getattr(ledger, "_password", None)
    return _shared(url, _name(config, ""), config.max_requests_per_second, password)
