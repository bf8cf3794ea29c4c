"""Delivery: chunk the stream, post with bounded concurrency, record every request and row.

At most ``2 × concurrency`` requests are built ahead of the network, so memory stays flat
however long the input. A rejected batch (a 4xx other than 401/403, or 413) is split in
halves and the halves are sent again, isolating the offending events and delivering the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from ._exceptions import TransportError
from ._progress import Progress
from ._results import FAILED, PENDING, REJECTED, SENT, ChunkRecord, RowBook, SendResult
from ._transport import Outcome, Transport
from ._wire import batch_body

EVENTS_PATH = "/v1/events/batch"
# statuses that say "something in this body": splitting can isolate it
SPLIT_STATUSES = frozenset({400, 413, 422})
IDENTIFY_PATH = "/v1/identify"


@dataclass
class Request:
    """One request to make: its rows (positions) and either event parts or a whole body."""

    path: str
    positions: list[int]
    parts: list[bytes] | None = None  # events: one serialised event per position
    body: bytes | None = None  # identify: the whole body
    parent: int | None = None
    key: str | None = None  # requests with one key are sent one at a time, in order

    def payload(self) -> bytes:
        return self.body if self.body is not None else batch_body(self.parts or [])


def chunk_events(
    stream: Iterable[list[tuple[int, bytes]]], batch_size: int, max_bytes: int | None
) -> Iterator[Request]:
    """Group (position, event bytes) items into batch requests of at most ``batch_size``."""
    positions: list[int] = []
    parts: list[bytes] = []
    size = len(batch_body([]))
    for items in stream:
        for pos, row in items:
            too_big = max_bytes is not None and parts and size + len(row) + 1 > max_bytes
            if len(parts) >= batch_size or too_big:
                yield Request(EVENTS_PATH, positions, parts)
                positions, parts, size = [], [], len(batch_body([]))
            positions.append(pos)
            parts.append(row)
            size += len(row) + 1
    if parts:
        yield Request(EVENTS_PATH, positions, parts)


class Sender:
    """Posts requests concurrently over one Transport and keeps the books."""

    def __init__(
        self,
        transport: Transport | None,
        book: RowBook,
        concurrency: int,
        bisect: bool,
        progress: Progress,
        split_budget: int = 1000,
        on_sent: Callable[[Request], None] | None = None,
    ) -> None:
        self.transport = transport
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

    def _record(self, req: Request, number: int, outcome: Outcome, status: str) -> None:
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
            bytes=len(req.payload()),
            error=outcome.error,
            response=outcome.response,
        )
        with self._lock:
            self.chunks.append(record)

    def deliver(self, req: Request) -> None:
        """Send one request (and, if it is rejected, its halves); set every row's state."""
        assert self.transport is not None
        number = self._new_chunk_number()
        try:
            outcome = self.transport.post(req.path, req.payload())
        except TransportError as exc:
            # the request that stopped the run belongs in the chunk frame too
            status = exc.details.get("status")
            stopped = Outcome(
                "failed", status, exc.details.get("attempts", 1), 0.0, exc.message, None
            )
            self._record(req, number, stopped, "failed")
            raise
        splittable = req.parts is not None and len(req.parts) > 1
        content_refused = outcome.http_status in SPLIT_STATUSES
        if content_refused and self.bisect and splittable and self._spend_split():
            self._record(req, number, outcome, "split")
            assert req.parts is not None
            half = len(req.parts) // 2
            for lo, hi in ((0, half), (half, len(req.parts))):
                self.deliver(
                    Request(req.path, req.positions[lo:hi], req.parts[lo:hi], parent=number)
                )
            return
        self._record(req, number, outcome, outcome.status)
        code = {"sent": SENT, "rejected": REJECTED, "failed": FAILED}[outcome.status]
        error = None if code == SENT else f"{outcome.error}: {outcome.response or ''}".rstrip(": ")
        self.book.set(req.positions, code, error=error, chunk=number)
        if code == SENT and self.on_sent is not None:
            self.on_sent(req)
        self.progress.update(len(req.positions))

    def _spend_split(self) -> bool:
        with self._lock:
            if self.split_budget <= 0:
                return False
            self.split_budget -= 2
            return True

    def dry_run(self, requests: Iterable[Request]) -> None:
        """Build every request without sending; record them with status ``dry_run``."""
        empty = Outcome("dry_run", None, 0, 0.0, None, None)
        for req in requests:
            number = self._new_chunk_number()
            self._record(req, number, empty, "dry_run")
            self.book.set_chunk(req.positions, number)

    def run(self, requests: Iterable[Request]) -> None:
        """Deliver all requests with at most ``concurrency`` in flight.

        Requests that share a ``key`` (one user's identifies) are never in flight together
        and go out in their input order; a held request waits while others overtake it.
        """
        assert self.transport is not None
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
                self.transport.stop.set()
                for fut in in_flight:
                    fut.cancel()
        if error is not None:
            raise error


def stopped_error(exc: TransportError, book: RowBook, chunks: list[ChunkRecord]) -> TransportError:
    """Mark every undecided row failed; attach counts and the partial result frames."""
    pending = np.flatnonzero(book.status == PENDING)
    book.set(pending, FAILED, error=f"not sent: the run stopped ({exc.message})")
    counts = book.counts()
    counts.pop("pending")
    partial = SendResult("stopped", book, chunks, 0.0)
    return type(exc)(
        exc.message,
        status=getattr(exc, "status", None),
        counts=counts,
        rows=partial.rows,
        chunks=partial.chunks,
    )
