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
import os
import socket
import threading
import time
from collections.abc import Callable

__all__ = ["WATCHDOG", "Watchdog", "shut_socket"]


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
