"""How requests land on their rows, without I/O: the book-keeping of every events sender.

Between a request built and its rows' final states lie decisions that make no request
themselves, shared by the batch sender and the trackers (thread and async) so that an
event has the same states and texts whichever way it was sent:

- just before a request goes, events that aged out of the API's 30-day window since they
  were validated are taken out of it, ``expired`` (with a margin for the time in flight);
- a request larger than the size the API accepts (configured, or learned from a 413) is
  split in halves before it goes;
- a refused batch (400, 413, 422) is split in halves and the halves sent again, isolating
  the offending events, within the run's budget of extra requests (a 413 always: a size
  problem is never a reason to refuse rows);
- an outcome sets its rows' states in the ``RowBook`` with its text, and where the answer
  names events, their own text; its record goes to the chunk log.

``Landing`` holds one book's side of it (its requests in flight, for a stop), ``Spend`` what
a run or a tracker shares (chunk numbers, the size limit, the bisection budget). The
senders are loops around it: ``deliver`` for threads, ``AsyncTracker`` for an event loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from .._core import PAST_WINDOW, ChunkStatus, RowBook, RowState, TransportError
from .answers import Outcome
from .chunking import Request, SizeLimit
from .chunklog import ChunkLog
from .progress import Progress
from .transport import Poster

# statuses that say "something in this body": splitting can isolate it
SPLIT_STATUSES = frozenset({400, 413, 422})
TOO_LARGE = 413
# an event this close to the end of the window could age out while its request is in flight
EXPIRY_MARGIN_MS = 60_000
_WINDOW_MS = int(PAST_WINDOW.total_seconds() * 1000)
_ROW_STATE = {"sent": RowState.SENT, "rejected": RowState.REJECTED, "failed": RowState.FAILED}
EXPIRED_TEXT = "aged out of the API's 30-day window before its request was sent; never sent"
OTHER_EVENTS = " (the answer named other events of the request, not this one)"

Landed = Callable[[Sequence[int], RowState, Outcome | None], None]
"""Told when rows reach their final state: their positions, the state, and the outcome of
the request that carried them (None for ``expired``: never sent)."""


class Spend:
    """What the requests of one run (or one tracker) share besides the network: chunk
    numbers in the order requests are queued, the request size the API accepts, and the
    extra requests bisection may still spend (an API that refuses everything would
    otherwise cost ~2 requests per event)."""

    def __init__(self, *, bisect: bool, split_budget: int, size_limit: SizeLimit) -> None:
        self.bisect = bisect
        self.split_budget = split_budget
        self.size_limit = size_limit
        self._next_chunk = 0
        self._lock = threading.Lock()

    def number(self) -> int:
        with self._lock:
            self._next_chunk += 1
            return self._next_chunk

    def split(self) -> bool:
        """Take the two requests of a bisection from the budget; False when it is spent."""
        with self._lock:
            if not self.bisect or self.split_budget <= 0:
                return False
            self.split_budget -= 2
            return True


class Landing:
    """One book's requests: how they go out and how their outcomes land (module docstring).

    ``chunks``: where each request's record goes (None: kept nowhere); ``progress``: told
    of rows that reached their state; ``on_landed``: told too (the ledger, a tracker's
    handles).
    """

    def __init__(
        self,
        book: RowBook,
        spend: Spend,
        *,
        chunks: ChunkLog | None = None,
        progress: Progress | None = None,
        on_landed: Landed | None = None,
    ) -> None:
        self.book = book
        self.spend = spend
        self.chunks = chunks
        self.progress = progress
        self.on_landed = on_landed
        self._started = time.monotonic()  # chunks record when they ended, from here
        self._lock = threading.Lock()
        self._active: dict[int, tuple[Request, int]] = {}  # chunk -> (request, body size)
        self._closed = False  # after a stop: late answers change nothing

    def _record(
        self, req: Request, number: int, size: int, outcome: Outcome, status: ChunkStatus
    ) -> None:
        if self.chunks is None:
            return
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

    def _done(self, rows: int) -> None:
        if self.progress is not None:
            self.progress.update(rows)

    # -- before a request goes --------------------------------------------------------------
    def unexpired(self, req: Request) -> Request | None:
        """The request without events that aged out of the 30-day window since validation
        (``expired``); None when none is left."""
        if req.times is None:
            return req
        oldest_ms = int(time.time() * 1000) - _WINDOW_MS + EXPIRY_MARGIN_MS
        times = np.asarray(req.times, dtype=np.int64)
        expired = np.flatnonzero(times < oldest_ms)
        if not len(expired):
            return req
        positions = [req.positions[i] for i in expired.tolist()]
        with self._lock:
            closed = self._closed
            if not closed:
                self.book.set(positions, RowState.EXPIRED, error=EXPIRED_TEXT)
        self._done(len(expired))
        if not closed and self.on_landed is not None:
            self.on_landed(positions, RowState.EXPIRED, None)
        if len(expired) == len(req.positions):
            return None
        kept = req.select(np.flatnonzero(times >= oldest_ms).tolist(), req.parent)
        kept.number = req.number
        return kept

    def fit(self, req: Request, size: int) -> list[Request] | None:
        """The halves of a request of several events whose ``size`` is more than the API
        accepts (it was built before the limit was learned); None when it fits."""
        if req.parts is None or len(req.parts) < 2 or self.spend.size_limit.fits(size):
            return None
        first, second = req.halves(req.parent)
        first.number = req.number
        return [first, second]

    def take_off(self, req: Request, size: int) -> int:
        """The request goes: its chunk number, and it is in flight until it lands."""
        number = req.number if req.number is not None else self.spend.number()
        with self._lock:
            self._active[number] = (req, size)
        return number

    # -- after -----------------------------------------------------------------------------
    def stopped(self, req: Request, number: int, size: int, exc: TransportError) -> None:
        """The request stopped the run: it belongs in the chunk log too (its rows stay
        pending: the run's end accounts for them)."""
        outcome = Outcome("failed", exc.status, exc.attempts or 1, 0.0, exc.message, None)
        with self._lock:
            self._active.pop(number, None)
            self._record(req, number, size, outcome, "failed")
            self.book.set_chunk(req.positions, number)

    def landed(self, req: Request, number: int, size: int, outcome: Outcome) -> list[Request]:
        """How a request ended: its halves to send (split), or none (its rows' states set)."""
        spend = self.spend
        if outcome.http_status == TOO_LARGE:
            spend.size_limit.refused(size)
        if self._splits(req, outcome):
            with self._lock:
                self._active.pop(number, None)
                if self._closed:
                    return []
                self._record(req, number, size, outcome, "split")
            return req.halves(parent=number)
        if len(req.positions) == 1:
            outcome = alone(outcome, size)
        self._finish(req, number, size, outcome)
        return []

    def _splits(self, req: Request, outcome: Outcome) -> bool:
        if req.parts is None or len(req.parts) < 2 or outcome.http_status not in SPLIT_STATUSES:
            return False
        if outcome.http_status == TOO_LARGE:
            return True  # a size problem, not a content one: never a reason to reject rows
        return self.spend.split()

    def _finish(self, req: Request, number: int, size: int, outcome: Outcome) -> None:
        """Record how a request ended and set its rows' states (unless the book was closed)."""
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
                error += OTHER_EVENTS
            self.book.set(req.positions, state, error=error, chunk=number)
            if state != RowState.SENT:  # the API's own word on some events: on their rows
                for index, said in outcome.event_errors:
                    if 0 <= index < len(req.positions):
                        self.book.set([req.positions[index]], state, error=said)
        if self.on_landed is not None:
            self.on_landed(req.positions, state, outcome)
        self._done(len(req.positions))

    # -- a stop ------------------------------------------------------------------------------
    def close(self, reason: str) -> None:
        """Late answers change nothing from now on; the requests still in flight are
        ``failed``, outcome unknown."""
        with self._lock:
            self._closed = True
            stuck = list(self._active.items())
            self._active.clear()
        for number, (req, size) in stuck:
            error = f"{reason}; outcome unknown, safe to re-send"
            self._record(req, number, size, Outcome("failed", None, 1, 0.0, error, None), "failed")
            self.book.set(req.positions, RowState.FAILED, error=error, chunk=number)


def alone(outcome: Outcome, size: int) -> Outcome:
    """The outcome of a request of one event, said for it: a 413 means that event alone is
    larger than the API accepts (nothing to split)."""
    if outcome.http_status != TOO_LARGE:
        return outcome
    return Outcome(
        outcome.status,
        outcome.http_status,
        outcome.attempts,
        outcome.elapsed_s,
        f"HTTP 413: this event alone ({size} bytes) is larger than the API accepts",
        outcome.response,
    )


def deliver(
    landing: Landing, poster: Poster, req: Request, on_post: Callable[[], None] | None = None
) -> None:
    """Send one request (and, if it is split, its halves) through ``poster``, as ``landing``
    decides; ``on_post``: told as each request goes. What stops the run raises."""
    kept = landing.unexpired(req)
    if kept is None:
        return
    payload = kept.payload()
    parts = landing.fit(kept, len(payload))
    if parts is not None:
        for part in parts:
            deliver(landing, poster, part, on_post)
        return
    number = landing.take_off(kept, len(payload))
    if on_post is not None:
        on_post()
    try:
        outcome = poster.post(kept.path, payload)
    except TransportError as exc:
        landing.stopped(kept, number, len(payload), exc)
        raise
    for half in landing.landed(kept, number, len(payload), outcome):
        deliver(landing, poster, half, on_post)
