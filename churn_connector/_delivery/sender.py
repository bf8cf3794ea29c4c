"""Delivery: post requests with bounded concurrency through a Poster, keep the books.

At most ``2 × concurrency`` requests are built ahead of the network, so memory stays flat
however long the input. A batch whose content the API refused (400, 413, 422) is split in
halves and the halves are sent again, isolating the offending events and delivering the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import numpy as np

from .._exceptions import TransportError
from .._rows import RowBook
from .._types import ChunkStatus, RowState
from .progress import Progress
from .requests import Request
from .results import ChunkRecord, SendResult
from .transport import Outcome, Poster

# statuses that say "something in this body": splitting can isolate it
SPLIT_STATUSES = frozenset({400, 413, 422})
_ROW_STATE = {"sent": RowState.SENT, "rejected": RowState.REJECTED, "failed": RowState.FAILED}


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
        on_sent: Callable[[Sequence[int]], None] | None = None,
    ) -> None:
        self.poster = poster
        self.book = book
        self.concurrency = concurrency
        self.bisect = bisect
        # an API that refuses everything would otherwise cost ~2 requests per event
        self.split_budget = split_budget
        self.on_sent = on_sent
        self.progress = progress
        self.chunks: list[ChunkRecord] = []
        self._lock = threading.Lock()
        self._next_chunk = 0

    def _new_chunk_number(self) -> int:
        with self._lock:
            self._next_chunk += 1
            return self._next_chunk

    def _record(
        self, req: Request, number: int, size: int, outcome: Outcome, status: ChunkStatus
    ) -> None:
        labels = self.book.labels
        record = ChunkRecord(
            chunk=number,
            parent_chunk=req.parent,
            endpoint=req.path,
            events=len(req.positions),
            first_row=labels[req.positions[0]],
            last_row=labels[req.positions[-1]],
            status=status,
            http_status=outcome.http_status,
            attempts=outcome.attempts,
            elapsed_s=round(outcome.elapsed_s, 4),
            bytes=size,
            error=outcome.error,
            response=outcome.response,
        )
        with self._lock:
            self.chunks.append(record)

    def deliver(self, req: Request) -> None:
        """Send one request (and, if it is rejected, its halves); set every row's state."""
        number = self._new_chunk_number()
        payload = req.payload()
        try:
            outcome = self.poster.post(req.path, payload)
        except TransportError as exc:
            # the request that stopped the run belongs in the chunk frame too
            stopped = Outcome("failed", exc.status, exc.attempts or 1, 0.0, exc.message, None)
            self._record(req, number, len(payload), stopped, "failed")
            self.book.set_chunk(req.positions, number)
            raise
        if outcome.status == "dry_run":
            self._record(req, number, len(payload), outcome, "dry_run")
            self.book.set_chunk(req.positions, number)  # the rows stay pending: would send
            return
        splittable = req.parts is not None and len(req.parts) > 1
        content_refused = outcome.http_status in SPLIT_STATUSES
        if content_refused and self.bisect and splittable and self._spend_split():
            self._record(req, number, len(payload), outcome, "split")
            for half in req.halves(parent=number):
                self.deliver(half)
            return
        self._record(req, number, len(payload), outcome, outcome.status)
        state = _ROW_STATE[outcome.status]
        error = None
        if state != RowState.SENT:
            error = f"{outcome.error}: {outcome.response or ''}".rstrip(": ")
        self.book.set(req.positions, state, error=error, chunk=number)
        if state == RowState.SENT and self.on_sent is not None:
            self.on_sent(req.positions)
        self.progress.update(len(req.positions))

    def _spend_split(self) -> bool:
        with self._lock:
            if self.split_budget <= 0:
                return False
            self.split_budget -= 2
            return True

    def run(self, requests: Iterable[Request]) -> None:
        """Deliver all requests with at most ``concurrency`` in flight.

        Requests that share a ``key`` (one user's identifies) are never in flight together
        and go out in their input order; a held request waits while others overtake it.
        """
        in_flight: dict[Future[None], Request] = {}
        busy: set[str] = set()
        held: list[Request] = []
        source = iter(requests)
        exhausted = False
        error: BaseException | None = None

        def free(req: Request) -> bool:
            return req.key is None or req.key not in busy

        def take() -> Request | None:
            nonlocal exhausted
            for k, cand in enumerate(held):
                if free(cand):
                    return held.pop(k)
            while not exhausted and len(held) < 4 * self.concurrency:
                nxt = next(source, None)
                if nxt is None:
                    exhausted = True
                elif free(nxt) and not any(h.key == nxt.key for h in held if h.key):
                    return nxt
                else:
                    held.append(nxt)
            return None

        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="churn-send") as pool:
            try:
                while True:
                    while len(in_flight) < 2 * self.concurrency:
                        req = take()
                        if req is None:
                            break
                        if req.key is not None:
                            busy.add(req.key)
                        in_flight[pool.submit(self.deliver, req)] = req
                    if not in_flight:
                        break
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for fut in done:
                        req = in_flight.pop(fut)
                        if req.key is not None:
                            busy.discard(req.key)
                        fut.result()
            except BaseException as exc:
                error = exc
                self.poster.stop()
                for fut in in_flight:
                    fut.cancel()
        if error is not None:
            raise error


def stopped_error(exc: TransportError, book: RowBook, chunks: list[ChunkRecord]) -> TransportError:
    """Mark every undecided row failed; attach counts and the partial result frames."""
    pending = np.flatnonzero(book.status == RowState.PENDING)
    book.set(pending, RowState.FAILED, error=f"not sent: the run stopped ({exc.message})")
    partial = SendResult("stopped", book, chunks, 0.0)
    return exc.with_results(dict(partial.counts), partial.rows, partial.chunks)
