"""A bound on the time a database session may take to answer, kept on the client.

The server's own ``statement_timeout`` ends a statement it is running; TCP keepalives and
``tcp_user_timeout`` end a connection whose peer is gone. Neither ends a wait for a session
that stopped answering while its connection stays open (a stalled firewall or proxy, a
paused VM, a server stuck in I/O): there the client would wait for ever. The watchdog, one
thread for every ledger of the process, shuts the socket of an operation that outlived its
bound, so the blocked call fails at once, as for a dropped connection.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .base import LedgerUnavailable

__all__ = [
    "KEEPALIVES",
    "STATEMENT_SECONDS",
    "WATCHDOG",
    "StatementBound",
    "Watchdog",
    "shut_socket",
    "statement_bound",
]

# libpq's TCP settings: a connection whose peer is gone is closed within ~25 s of silence
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
_TIMEOUT_SETTING = re.compile(
    r"(?:^|\s)-c\s*statement_timeout\s*=\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?(?=\s|$)", re.I
)
_UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}


def statement_bound(options: list[object], default: float) -> tuple[float, bool]:
    """(seconds a statement may take, whether the session's ``statement_timeout`` is ours
    to set), from libpq ``options`` texts that may set it (``-c statement_timeout=30s``):
    the first that does wins; 0 turns the server's bound off, the client's stays at
    ``default``."""
    for text in options:
        found = _TIMEOUT_SETTING.search(str(text or ""))
        if found is not None:
            number, unit = found.groups()
            seconds = float(number) * _UNITS[(unit or "ms").lower()]
            return (seconds or default), False
    return default, True


def shut_socket(fileno: int) -> None:
    """Shut both directions of the socket behind ``fileno`` (a duplicate of it is shut, so
    the owner's descriptor stays its own to close)."""
    try:
        dup = socket.socket(fileno=os.dup(fileno))
    except OSError:
        return
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        dup.close()


class Watchdog:
    """Calls ``fire`` of an armed operation once its time is up, unless it was disarmed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Callable[[], None]] = {}
        self._fired: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fire: Callable[[], None]) -> int:
        """Arm for ``seconds``; the token disarms."""
        with self._cond:
            token = next(self._ids)
            self._armed[token] = fire
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._watch, name="churn-ledger-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Disarm; True when it had fired already."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _watch(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # disarmed in time
                if not self._heap:
                    self._cond.wait()
                    continue
                due, token = self._heap[0]
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                fire = self._armed.pop(token)
                self._fired.add(token)
                fire()  # under the lock: the operation cannot end and reuse the socket meanwhile


WATCHDOG = Watchdog()


# a session's statements: the session's statement_timeout (this, unless the URL's options
# or PGOPTIONS set one); the watchdog a little after it; during a run the run's deadline
STATEMENT_SECONDS = 60.0
_GRACE = 2.0  # the watchdog fires after the server's own timeout had its chance
_AFTER_DEADLINE = 5.0  # what a statement still gets once the run's deadline passed


class StatementBound:
    """How long one operation of a PostgreSQL ledger may take, and the watch that ends it.

    ``options``: libpq ``options`` texts that may set ``statement_timeout`` (the URL's,
    ``PGOPTIONS``); ``deadline``: a run's, on ``time.monotonic()``'s clock (None: none)."""

    def __init__(self, options: list[object]) -> None:
        self.seconds, self.ours = statement_bound(options, STATEMENT_SECONDS)
        self.deadline: float | None = None

    def window(self) -> tuple[float, float]:
        """(seconds the watchdog gives the next operation, the bound a message names)."""
        if self.deadline is not None:
            left = max(self.deadline - time.monotonic(), _AFTER_DEADLINE)
            if left < self.seconds:
                return left, left
        return self.seconds + _GRACE, self.seconds

    def connect_settings(self, given: Mapping[str, Any], connect_timeout: int) -> dict[str, Any]:
        """libpq parameters for a new session, beside those the URL ``given`` sets itself:
        the connect timeout (within the deadline; libpq takes 2 s at least), keepalives,
        ``tcp_user_timeout`` and, as the session starts (no statement of its own to wait
        for), ``synchronous_commit=off`` and the ``statement_timeout``."""
        extra: dict[str, Any] = {}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = max(2, min(connect_timeout, math.ceil(self.window()[1])))
        for name, value in KEEPALIVES.items():
            if name not in given:
                extra[name] = value
        if "tcp_user_timeout" not in given:  # milliseconds unacknowledged before a close
            extra["tcp_user_timeout"] = int(self.seconds * 1000)
        settings = "-c synchronous_commit=off"
        if self.ours:
            settings += f" -c statement_timeout={int(self.seconds * 1000)}"
        extra["options"] = f"{given.get('options') or ''} {settings}".strip()
        return extra

    @contextmanager
    def watch(self, fileno: int, what: str = "open", *, enabled: bool = True) -> Iterator[None]:
        """The block's statements on the socket ``fileno``, the watchdog armed: past the
        window the socket is shut and the block's error becomes a LedgerUnavailable saying
        the server did not answer (retryable)."""
        if not enabled:
            yield
            return
        seconds, named = self.window()
        token = WATCHDOG.arm(seconds, lambda: shut_socket(fileno))
        try:
            yield
        except Exception:
            if WATCHDOG.disarm(token):
                raise LedgerUnavailable(
                    f"{what} failed: the ledger's server did not answer within {named:g} s "
                    "(the session stopped answering: a network stall, a hung or paused "
                    "server, a failover); the connection was closed",
                    retryable=True,
                ) from None
            raise
        finally:
            WATCHDOG.disarm(token)
