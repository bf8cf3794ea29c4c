"""Delivery: post requests with bounded concurrency through a Poster, keep the books.

Requests are built on a thread of their own (``prefetch``), at most ``8 × concurrency``
ahead of the network, so sending never waits for a slice to be built and memory stays flat
however long the input. How each request goes and lands (expiry, a size learned from 413s,
bisecting a refused batch, its rows' states) is ``landing``'s, as for the trackers. Workers
are daemon threads, so an interrupt ends the process at once even while a request hangs.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._core import RowBook, RowState
from .answers import Outcome
from .chunking import Request, SizeLimit
from .chunklog import ChunkLog
from .landing import Landed, Landing, Spend, deliver
from .prefetch import DeadlinePassed, Handoff, Prefetch, get_feeding
from .progress import Progress
from .transport import Poster

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
        self.spend = Spend(
            bisect=bisect, split_budget=split_budget, size_limit=size_limit or SizeLimit(None)
        )
        self.chunks = ChunkLog(book.labels)  # one record per request, column-wise
        acknowledged = None if on_sent is None else _sent_to(on_sent)
        self.landing = Landing(
            book, self.spend, chunks=self.chunks, progress=progress, on_landed=acknowledged
        )
        self._lock = threading.Lock()
        # set once every worker has posted its first request: the builder waits for it
        # (``Prefetch``'s warm-up) while enough requests are ready
        self._warm = threading.Event()
        self._posted = 0
        self._stopping = threading.Event()  # a worker hit an error that ends the run

    def deliver(self, req: Request) -> None:
        """Send one request (and, if it is split, its halves); set every row's state."""
        deliver(self.landing, self.poster, req, self._posting)

    def _posting(self) -> None:
        with self._lock:
            self._posted += 1
            if self._posted >= self.concurrency:
                self._warm.set()

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
                    req.number = self.spend.number()  # chunks numbered in input order
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
        self.landing.close(reason)


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


def _sent_to(acknowledged: Callable[[Sequence[int]], None]) -> Landed:
    def landed(positions: Sequence[int], state: RowState, outcome: Outcome | None) -> None:
        if state == RowState.SENT:
            acknowledged(positions)

    return landed


def _reason_of(exc: BaseException) -> str:
    if isinstance(exc, Exception) and not isinstance(exc, KeyboardInterrupt):
        message = getattr(exc, "message", None) or type(exc).__name__
        return f"the run was stopped ({message})"
    return "interrupted"
