"""Delivery: post requests with bounded concurrency through a Poster, keep the books.

Requests are built on a thread of their own (``prefetch``), at most ``8 × concurrency``
ahead of the network, so sending never waits for a slice to be built and memory stays flat
however long the input. A batch whose content the API refused (400, 422) is split in halves
and the halves are sent again, isolating the offending events and delivering the rest; a 413
teaches the run a smaller request size. Just before a request is sent, events that aged out
of the API's 30-day window are taken out of it (``expired``). Workers are daemon threads, so
an interrupt ends the process at once even while a request hangs.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._core import PAST_WINDOW, ChunkStatus, RowBook, RowState, TransportError
from .chunking import Request, SizeLimit
from .chunklog import ChunkLog
from .prefetch import DeadlinePassed, Handoff, Prefetch, get_feeding
from .progress import Progress
from .transport import Outcome, Poster

# statuses that say "something in this body": splitting can isolate it
SPLIT_STATUSES = frozenset({400, 413, 422})
TOO_LARGE = 413
# an event this close to the end of the window could age out while its request is in flight
EXPIRY_MARGIN_MS = 60_000
_WINDOW_MS = int(PAST_WINDOW.total_seconds() * 1000)
_ROW_STATE = {"sent": RowState.SENT, "rejected": RowState.REJECTED, "failed": RowState.FAILED}
_DRAIN_SECONDS = 1.0  # after a stop: how long to wait for requests in flight to report
# requests built ahead, in rounds of ``concurrency``: at 16 in flight, 128 requests (64k
# events) cover the time it takes to build the next slice
_AHEAD_ROUNDS = 8


@dataclass
class _Work:
    """One request handed to a worker, and how it ended (an exception stops the run)."""

    request: Request
    error: BaseException | None = None


class Sender:
    """Posts requests concurrently through one Poster and keeps the books."""

    def __init__(
        self,
        poster: Poster,
        book: RowBook,
        progress: Progress,
        *,
        concurrency: int,
        bisect: bool,
        split_budget: int = 1000,
        size_limit: SizeLimit | None = None,
        on_sent: Callable[[Sequence[int]], None] | None = None,
        deadline: float | None = None,
        ahead: int = 0,
    ) -> None:
        self.poster = poster
        # requests built ahead beyond ``_AHEAD_ROUNDS`` rounds: an identify run's requests
        # are single rows, so it builds a slice's worth ahead, or the workers idle while the
        # next slice is validated
        self.ahead = ahead
        # the run's deadline (time.monotonic()): then no more of the input is read or sent
        self.deadline = deadline
        self.read_to_end = False  # the input was read to its end (not cut by the deadline)
        self.book = book
        self.concurrency = concurrency
        self.bisect = bisect
        # an API that refuses everything would otherwise cost ~2 requests per event
        self.split_budget = split_budget
        self.size_limit = size_limit or SizeLimit(None)
        self.on_sent = on_sent
        self.progress = progress
        self.chunks = ChunkLog(book.labels)  # one record per request, column-wise
        self._started = time.monotonic()  # chunks record when they ended, from here
        self._lock = threading.Lock()
        self._next_chunk = 0
        self._active: dict[int, tuple[Request, int]] = {}  # chunk -> (request, body size)
        self._closed = False  # after a stop: late answers change nothing
        # set once every worker has posted its first request: the builder waits for it
        # (``Prefetch``'s warm-up) while enough requests are ready
        self._warm = threading.Event()
        self._posted = 0
        self._stopping = threading.Event()  # a worker hit an error that ends the run

    def _new_chunk_number(self) -> int:
        with self._lock:
            self._next_chunk += 1
            return self._next_chunk

    def _record(
        self, req: Request, number: int, size: int, outcome: Outcome, status: ChunkStatus
    ) -> None:
        self.chunks.append(
            chunk=number,
            parent_chunk=req.parent,
            endpoint=req.path,
            events=len(req.positions),
            first=req.positions[0],
            last=req.positions[-1],
            status=status,
            http_status=outcome.http_status,
            attempts=outcome.attempts,
            elapsed_s=round(outcome.elapsed_s, 4),
            finished_s=round(time.monotonic() - self._started, 4),
            bytes=size,
            error=outcome.error,
            response=outcome.response,
        )

    def _finish(self, req: Request, number: int, size: int, outcome: Outcome) -> None:
        """Record how a request ended and set its rows' states (unless the run was closed)."""
        with self._lock:
            self._active.pop(number, None)
            if self._closed:
                return
            if outcome.status == "dry_run":
                self._record(req, number, size, outcome, "dry_run")
                self.book.set_chunk(req.positions, number)  # the rows stay pending
                return
            self._record(req, number, size, outcome, outcome.status)
            state = _ROW_STATE[outcome.status]
            error = None if state == RowState.SENT else outcome.error
            if error is not None and outcome.event_errors:
                error += " (the answer named other events of the request, not this one)"
            self.book.set(req.positions, state, error=error, chunk=number)
            if state != RowState.SENT:  # the API's own word on some events: on their rows
                for index, said in outcome.event_errors:
                    if 0 <= index < len(req.positions):
                        self.book.set([req.positions[index]], state, error=said)
        if state == RowState.SENT and self.on_sent is not None:
            self.on_sent(req.positions)
        self.progress.update(len(req.positions))

    def deliver(self, req: Request) -> None:
        """Send one request (and, if it is rejected, its halves); set every row's state."""
        req = self._without_expired(req)
        if not req.positions:
            return
        payload = req.payload()
        if req.parts is not None and len(req.parts) > 1 and not self.size_limit.fits(len(payload)):
            first, second = req.halves(req.parent)  # built before the API's limit was learned
            first.number = req.number
            self.deliver(first)
            self.deliver(second)
            return
        number = req.number if req.number is not None else self._new_chunk_number()
        with self._lock:
            self._active[number] = (req, len(payload))
            self._posted += 1
            if self._posted >= self.concurrency:
                self._warm.set()
        try:
            outcome = self.poster.post(req.path, payload)
        except TransportError as exc:
            # the request that stopped the run belongs in the chunk frame too
            stopped = Outcome("failed", exc.status, exc.attempts or 1, 0.0, exc.message, None)
            with self._lock:
                self._active.pop(number, None)
                self._record(req, number, len(payload), stopped, "failed")
                self.book.set_chunk(req.positions, number)
            raise
        if outcome.http_status == TOO_LARGE:
            self.size_limit.refused(len(payload))
        if self._should_split(req, outcome):
            with self._lock:
                self._active.pop(number, None)
                if self._closed:
                    return
                self._record(req, number, len(payload), outcome, "split")
            for half in req.halves(parent=number):
                self.deliver(half)
            return
        if outcome.http_status == TOO_LARGE and len(req.positions) == 1:
            outcome = Outcome(
                outcome.status,
                outcome.http_status,
                outcome.attempts,
                outcome.elapsed_s,
                f"HTTP 413: this event alone ({len(payload)} bytes) is larger than the API accepts",
                outcome.response,
            )
        self._finish(req, number, len(payload), outcome)

    def _should_split(self, req: Request, outcome: Outcome) -> bool:
        if req.parts is None or len(req.parts) < 2 or outcome.http_status not in SPLIT_STATUSES:
            return False
        if outcome.http_status == TOO_LARGE:
            return True  # a size problem, not a content one: never a reason to reject rows
        return self.bisect and self._spend_split()

    def _spend_split(self) -> bool:
        with self._lock:
            if self.split_budget <= 0:
                return False
            self.split_budget -= 2
            return True

    def _without_expired(self, req: Request) -> Request:
        """The request without events that aged out of the 30-day window since validation."""
        if req.times is None:
            return req
        oldest_ms = int(time.time() * 1000) - _WINDOW_MS + EXPIRY_MARGIN_MS
        times = np.asarray(req.times, dtype=np.int64)
        expired = np.flatnonzero(times < oldest_ms)
        if not len(expired):
            return req
        with self._lock:
            if not self._closed:
                self.book.set(
                    [req.positions[i] for i in expired.tolist()],
                    RowState.EXPIRED,
                    error="aged out of the API's 30-day window before its request was sent; "
                    "never sent",
                )
        self.progress.update(len(expired))
        kept = req.select(np.flatnonzero(times >= oldest_ms).tolist(), req.parent)
        kept.number = req.number
        return kept

    # -- running -------------------------------------------------------------------------
    def _work(self, inbox: queue.SimpleQueue[_Work | None], done: queue.SimpleQueue[_Work]) -> None:
        while (item := inbox.get()) is not None:
            if not self._stopping.is_set():
                try:
                    self.deliver(item.request)
                except BaseException as exc:
                    # handed to the main thread; requests queued behind it are not sent
                    self._stopping.set()
                    self.poster.stop(_reason_of(exc))
                    item.error = exc
            done.put(item)

    def run(self, requests: Iterable[Request], feed: Handoff[Any] | None = None) -> None:
        """Deliver all requests with at most ``concurrency`` in flight.

        Requests that share a ``key`` (one user's identifies) are never in flight together
        and go out in their input order; a held request waits while others overtake it.
        When the source of requests fails (a file breaking part way), the requests in flight
        finish first, so what was delivered is known; on any other exception (an interrupt
        included) the poster is stopped, requests in flight are abandoned, and the exception
        propagates. ``feed``: the caller's source the requests are built from, read here,
        on this (the caller's) thread, while it waits (``prefetch``).
        """
        inbox: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        done: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        workers = [
            threading.Thread(
                # a copy of the caller's context each: messages speak as the caller does
                target=contextvars.copy_context().run,
                args=(self._work, inbox, done),
                name=f"churn-send-{i}",
                daemon=True,
            )
            for i in range(self.concurrency)
        ]
        for worker in workers:
            worker.start()
        # two rounds of requests queue for the workers; a slice's worth is built ahead
        ahead = Prefetch(
            requests,
            _AHEAD_ROUNDS * self.concurrency + self.ahead,
            feed,
            warm=(self._warm, 2 * self.concurrency),
        )
        feeder = _Feeder(ahead, 4 * self.concurrency)
        in_flight = 0
        source_failed: Exception | None = None
        late = False  # the deadline passed: nothing more is read or sent
        try:
            while True:
                while not late and source_failed is None and in_flight < 2 * self.concurrency:
                    try:
                        req = feeder.take(self.deadline)
                    except DeadlinePassed:
                        late = True
                        break
                    except Exception as exc:  # the input broke: let what is in flight land
                        source_failed = exc
                        break
                    if req is None:
                        break
                    req.number = self._new_chunk_number()  # chunks numbered in input order
                    inbox.put(_Work(req))
                    in_flight += 1
                if not in_flight:
                    break
                try:
                    # requests in flight end by the deadline themselves (the poster's abort)
                    item = get_feeding(done, None if late else feed, self.deadline)
                except DeadlinePassed:  # the caller's source was cut short
                    late = True
                    continue
                in_flight -= 1
                feeder.release(item.request)
                if item.error is not None:
                    raise item.error
            self.read_to_end = ahead.read_all
            if source_failed is not None:
                raise source_failed
        except BaseException as exc:
            self.poster.stop(_reason_of(exc))
            ahead.close()
            self.abandon(_reason_of(exc), done, in_flight)
            raise
        finally:
            # from here on only this thread changes the book: a builder blocked on its input
            # (left behind by ``ahead.close``) adds nothing after the accounting
            self.book.close()
            self._warm.set()
            ahead.close()
            for _ in workers:
                inbox.put(None)

    def abandon(self, reason: str, done: queue.SimpleQueue[_Work], in_flight: int) -> None:
        """Stop: abort what is in flight, give it a moment to report, close the books on it."""
        self._stopping.set()
        self.poster.stop(reason)
        deadline = time.monotonic() + _DRAIN_SECONDS
        while in_flight and (left := deadline - time.monotonic()) > 0:
            try:
                done.get(timeout=left)
            except queue.Empty:
                break
            in_flight -= 1
        with self._lock:
            self._closed = True
            stuck = list(self._active.items())
            self._active.clear()
        for number, (req, size) in stuck:
            error = f"{reason}; outcome unknown, safe to re-send"
            self._record(req, number, size, Outcome("failed", None, 1, 0.0, error, None), "failed")
            self.book.set(req.positions, RowState.FAILED, error=error, chunk=number)


class _Feeder:
    """Hands out requests in input order, holding back one whose key is busy."""

    def __init__(self, requests: Prefetch[Request], hold: int) -> None:
        self._source = requests
        self._hold = hold
        self._held: list[Request] = []
        self._busy: set[str] = set()
        self._exhausted = False

    def take(self, deadline: float | None = None) -> Request | None:
        req = self._next_free(deadline)
        if req is not None and req.key is not None:
            self._busy.add(req.key)
        return req

    def release(self, req: Request) -> None:
        if req.key is not None:
            self._busy.discard(req.key)

    def _next_free(self, deadline: float | None) -> Request | None:
        for k, cand in enumerate(self._held):
            if cand.key is None or cand.key not in self._busy:
                return self._held.pop(k)
        while not self._exhausted and len(self._held) < self._hold:
            nxt = self._source.take(deadline)
            if nxt is None:
                self._exhausted = True
            elif (nxt.key is None or nxt.key not in self._busy) and not any(
                h.key == nxt.key for h in self._held if h.key
            ):
                return nxt
            else:
                self._held.append(nxt)
        return None


def _reason_of(exc: BaseException) -> str:
    if isinstance(exc, Exception) and not isinstance(exc, KeyboardInterrupt):
        message = getattr(exc, "message", None) or type(exc).__name__
        return f"the run was stopped ({message})"
    return "interrupted"
