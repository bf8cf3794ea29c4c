"""One event sent now: ``client.track()`` posts to ``/v1/events/track`` and says how it ended.

The request goes through the client's ``HttpPoster``: the delivery policy's retries, 429
pause, request budget, breaker and deadline (here per call, not per client), and Ctrl-C or
SIGTERM while it waits ends the call with ``Interrupted`` (the event may or may not have
been stored: its message id makes a re-send safe). Every failure raises; nothing is
swallowed.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._core import TRACK_PATH, ClientConfig, DeliveryError, Interrupted, TransportError
from .._delivery import HttpPoster, Outcome, alone
from .._run import signal_of, sigterm_raises
from .._wire import Event

if TYPE_CHECKING:
    import requests

__all__ = ["OneOff", "TrackResult", "not_delivered", "result_of"]

log = logging.getLogger("churn_connector")

# calls in one second past which a loop is better served by send_events or a tracker
NUDGE_RATE = 20


@dataclass(frozen=True)
class TrackResult:
    """How one event was delivered: its ``message_id`` (the hash, or the one you gave), the
    HTTP ``status`` of the acknowledgement, the ``attempts`` it took (retries included) and
    the ``elapsed_s`` seconds they took."""

    message_id: str
    status: int | None
    attempts: int
    elapsed_s: float


def _close_in(pid: int, poster: HttpPoster) -> None:
    if os.getpid() == pid:  # never the parent's connections from a forked child
        poster.close()


def result_of(event: Event, outcome: Outcome) -> TrackResult:
    """How ``track()``'s one request for ``event`` ended, for the thread client and the
    async one alike: its ``TrackResult``, or the ``DeliveryError`` of an event the API
    refused (``rejected``) or that was never acknowledged (``failed``: outcome unknown, safe
    to re-send with the same id), said for the event alone (``alone``)."""
    if outcome.status != "sent":
        outcome = alone(outcome, len(event.body))
        state = "rejected" if outcome.status == "rejected" else "failed"
        raise not_delivered(event.message_id, state, outcome.error, outcome.attempts)
    return TrackResult(event.message_id, outcome.http_status, outcome.attempts, outcome.elapsed_s)


def not_delivered(message_id: str, state: str, error: str | None, attempts: int) -> DeliveryError:
    """The error of an event that ended ``state`` (a row state's label) with ``error`` (its
    row's text) after ``attempts`` attempts of the request that carried it."""
    if state == "rejected":
        text = f"the API refused event {message_id}: {error}"
    elif state == "expired":
        text = f"event {message_id} expired: {error}"
    else:
        text = (
            f"event {message_id} was not acknowledged after {attempts} attempt(s): "
            f"{error}; outcome unknown, safe to re-send with the same message id"
        )
    return DeliveryError(text, counts={state: 1})


class OneOff:
    """A client's one-off sends: one poster per process (a forked child makes its own),
    replaced after an error stopped it."""

    def __init__(self, config: ClientConfig, session: requests.Session | None) -> None:
        self.config = config
        self.session = session
        self._lock = threading.Lock()
        self._poster: HttpPoster | None = None
        self._pid = os.getpid()
        self._calls: collections.deque[float] = collections.deque(maxlen=NUDGE_RATE)
        self._nudged = False

    def poster(self) -> HttpPoster:
        with self._lock:
            if self._poster is None or self._pid != os.getpid():
                # after a fork the parent's sockets are the parent's: never shared
                poster = HttpPoster(
                    self.config, self.config.max_concurrency, session=self.session, deadline="call"
                )
                # a client dropped without close() must not leave its connections (and
                # their watchdog thread) behind
                weakref.finalize(self, _close_in, os.getpid(), poster)
                self._poster, self._pid = poster, os.getpid()
            return self._poster

    def _drop(self, poster: HttpPoster) -> None:
        with self._lock:
            if self._poster is poster:
                self._poster = None
        poster.close()

    def close(self) -> None:
        with self._lock:
            poster, self._poster = self._poster, None
        if poster is not None and self._pid == os.getpid():
            poster.close()

    def send(self, event: Event) -> TrackResult:
        """POST one event; its TrackResult, or the package's typed exception."""
        self._nudge()
        poster = self.poster()
        try:
            with sigterm_raises():
                outcome = poster.post(TRACK_PATH, event.body)
        except TransportError:
            self._drop(poster)  # it stopped itself (the key refused, the host unreachable)
            raise
        except Exception:
            raise  # the package's typed errors, or a bug of ours: shown as they are
        except BaseException as exc:  # Ctrl-C, SIGTERM
            raise Interrupted(
                f"interrupted: event {event.message_id} may or may not have been stored "
                "(outcome unknown, safe to re-send with the same message id)",
                signal=signal_of(exc) or int(signal.SIGINT),
                counts={"failed": 1},
            ) from exc
        return result_of(event, outcome)

    def _nudge(self) -> None:
        """One INFO line when track() runs many times a second: a loop wants a batch."""
        if self._nudged:
            return
        now = time.monotonic()
        calls = self._calls
        calls.append(now)
        if len(calls) == calls.maxlen and now - calls[0] < 1.0:
            self._nudged = True
            log.info(
                "client.track() was called %d times within a second: for many events, "
                "client.send_events(table) sends up to 500 per request, and client.tracker() "
                "sends them in the background in batches",
                NUDGE_RATE,
            )
