"""What ``HttpPoster`` posts through: the ``Pool`` protocol, and the attempts in flight.

Two pools serve it: the package's own (``connections``, urllib3 with a connection class of
ours) and the caller's ``requests.Session`` (``session``). Each attempt is a ``Flight`` while
it runs; a watchdog thread ends the flights past their deadline, and an interrupt ends them
all (``abort_all``). What a flight can end is whatever it holds *now*: the socket of its
connection from the moment that socket exists (DNS, connect, TLS handshake, the request, the
answer), or, on the session path, the answer's body. An abort and a flight's end take the
flight's own lock, so an abort never reaches a socket the flight has handed back to the pool
for another request.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from .._core import SecretHeaders

BODY_LIMIT = 64 * 1024  # only a trimmed excerpt is kept; a huge or endless body is cut off
_WATCH_EVERY = 0.1  # seconds between the watchdog's looks at requests in flight


@dataclass(frozen=True)
class Abort:
    """End an attempt that has not finished ``after`` seconds from its start, saying why."""

    after: float
    reason: str


@dataclass(frozen=True)
class Answer:
    """The server's final answer to one attempt; ``cut`` when the body was longer than
    ``BODY_LIMIT`` and only its start was read (a key may be cut in two at the end)."""

    status: int
    text: str | None
    retry_after: str | None
    cut: bool = False


class Pool(Protocol):
    """Posts one attempt; ``where`` names the API's host and port for messages."""

    where: str

    def post(self, path: str, body: bytes, headers: SecretHeaders, abort: Abort) -> Answer:
        """POST ``body``: the answer, or ``NetworkFailure`` (the abort's reason if it fired)."""
        ...

    def abort_all(self, reason: str) -> None:
        """End every attempt in flight now, and make no new ones (the run is ending)."""
        ...

    def close(self) -> None: ...


class _Ends(Protocol):
    """What a flight can end: a socket, or an answer being read (urllib3's response)."""

    def shutdown(self) -> None: ...


class Flight:
    """One attempt in flight: when it must end, what it holds, and whether it was ended.

    ``reused``: the attempt went out on a kept-alive connection; ``answered``: a byte of the
    answer arrived. Together they tell the stale keep-alive race (the server closed the idle
    connection as the request went out) from a failure of the server.
    """

    __slots__ = (
        "_held",
        "_lock",
        "aborted",
        "answered",
        "deadline",
        "done",
        "phase",
        "reason",
        "reused",
        "woken",
    )

    def __init__(self, deadline: float, reason: str) -> None:
        self.deadline = deadline
        self.reason = reason
        self.aborted: str | None = None
        self.done = False
        self.reused = False
        self.answered = False
        self.phase = "start"  # dns, connect, tls, send, answer: for messages and failures
        self.woken = threading.Event()  # set by an abort: a wait (DNS) ends at once
        self._held: socket.socket | _Ends | None = None
        self._lock = threading.Lock()

    def left(self) -> float:
        """Seconds until the deadline (not below zero)."""
        return max(0.0, self.deadline - time.monotonic())

    def hold(self, held: socket.socket | _Ends) -> None:
        """From now on an abort ends ``held``; if the flight was aborted already, at once."""
        with self._lock:
            if self.done:
                return
            self._held = held
            if self.aborted is not None:
                _end(held)

    def abort(self, reason: str) -> None:
        """End the attempt (once; a finished flight is left alone)."""
        with self._lock:
            if self.done or self.aborted is not None:
                return
            self.aborted = reason
            self.woken.set()
            if self._held is not None:
                _end(self._held)

    def finish(self) -> None:
        """The attempt is over: nothing it held may be ended by it from now on."""
        with self._lock:
            self.done = True
            self._held = None


def _end(held: socket.socket | _Ends) -> None:
    """Wake whoever is blocked on ``held``, whatever the phase (connect, TLS, send, read)."""
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        if isinstance(held, socket.socket):
            # the socket-level shutdown, also for a TLS socket: it wakes a blocked reader,
            # writer or handshake, and a connect in progress (Linux drops the SYN_SENT)
            socket.socket.shutdown(held, socket.SHUT_RDWR)
        else:
            held.shutdown()


_current = threading.local()


def current_flight() -> Flight | None:
    """The flight of the attempt this thread is making (None outside one)."""
    flight: Flight | None = getattr(_current, "flight", None)
    return flight


class Flights:
    """The attempts in flight of one pool, and the watchdog that ends the late ones."""

    def __init__(self) -> None:
        self._flights: set[Flight] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._stopped: str | None = None
        self._watchdog: threading.Thread | None = None

    @property
    def stopped(self) -> str | None:
        """Why every attempt was aborted (``abort_all``), if it was."""
        return self._stopped

    @contextlib.contextmanager
    def flying(self, abort: Abort) -> Iterator[Flight]:
        """An attempt's flight, the current one of this thread while the block runs."""
        self._start_watchdog()
        flight = Flight(time.monotonic() + abort.after, abort.reason)
        with self._lock:
            self._flights.add(flight)
            stopped = self._stopped
        if stopped is not None:
            flight.abort(stopped)
        _current.flight = flight
        try:
            yield flight
        finally:
            _current.flight = None
            flight.finish()
            with self._lock:
                self._flights.discard(flight)

    def abort_all(self, reason: str) -> None:
        with self._lock:
            self._stopped = reason
            flights = list(self._flights)
        for flight in flights:
            flight.abort(reason)  # under the flight's lock: a finished one is left alone

    def _start_watchdog(self) -> None:
        if self._watchdog is None:
            with self._lock:
                if self._watchdog is None:
                    self._watchdog = threading.Thread(
                        target=self._watch, name="churn-send-watchdog", daemon=True
                    )
                    self._watchdog.start()

    def _watch(self) -> None:
        """Abort attempts past their deadline: a trickling server never holds a run."""
        while not self._closed.wait(_WATCH_EVERY):
            now = time.monotonic()
            with self._lock:
                late = [f for f in self._flights if f.deadline <= now]
            for flight in late:
                flight.abort(flight.reason)

    def close(self) -> None:
        self._closed.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=1.0)
