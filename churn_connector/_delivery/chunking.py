"""Wire batches -> requests: events in chunks of at most ``batch_size``, identify one per user."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._core import EVENTS_PATH, IDENTIFY_PATH
from .._wire import WireBatch

Parts: TypeAlias = pa.BinaryArray | list[bytes]
"""An events request's serialised events, one per position: an Arrow array (a batch send's,
sliced from its wire batches without a copy) or a list (a tracker's few events: no Arrow
allocation on its sender threads, which a fork may copy mid-allocation into a child)."""


@dataclass(slots=True)  # an identify run holds a slice of them ahead of the network
class Request:
    """One request to make: its rows (positions) and either event parts or a whole body."""

    path: str
    positions: list[int]
    parts: Parts | None = None  # events: one serialised event per position
    body: bytes | None = None  # identify: the whole body
    parent: int | None = None  # the chunk this is a bisected half of
    key: str | None = None  # requests with one key are sent one at a time, in order
    times: np.ndarray | None = None  # events: occurred_at (epoch ms) per position
    number: int | None = None  # its chunk number, given in input order when it is queued

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        assert self.parts is not None
        if isinstance(self.parts, list):
            return b"".join((_OPEN, b",".join(self.parts), _CLOSE))
        return batch_body(self.parts)

    def select(self, keep: Sequence[int], parent: int | None = None) -> Request:
        """The events request restricted to the entries at indices ``keep``."""
        parts = self.parts
        assert parts is not None
        return Request(
            self.path,
            [self.positions[i] for i in keep],
            [parts[i] for i in keep]
            if isinstance(parts, list)
            else parts.take(pa.array(keep, pa.int64())),
            parent=parent,
            times=None if self.times is None else self.times[list(keep)],
        )

    def halves(self, parent: int | None) -> list[Request]:
        """The two halves of an events request: to isolate what the API refused, or to fit."""
        assert self.parts is not None
        half = len(self.parts) // 2
        bounds = ((0, half), (half, len(self.parts)))
        return [self.select(range(lo, hi), parent) for lo, hi in bounds]


_OPEN, _CLOSE = b'{"events":[', b"]}"


def batch_body(rows: pa.BinaryArray) -> bytes:
    """``{"events":[...]}`` from already-serialised events, joined in C, not re-encoded.

    The joined events stay in Arrow's buffer and are copied once, into the body: a copy to
    ``bytes`` first and a second for the brackets cost two ~110 KB allocations a request
    on the sender threads, whose freed space is what a long send's heap keeps."""
    if len(rows) == 0:
        return _OPEN + _CLOSE
    lists = pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()), rows)
    joined = pc.binary_join(lists, b",")[0].as_buffer()
    return b"".join((_OPEN, joined, _CLOSE))


_EMPTY_BODY = len(_OPEN + _CLOSE)


class SizeLimit:
    """The request size the API accepts: configured, then learned from its 413 answers.

    Each 413 halves the limit below the refused size, so a run spends a logarithmic number
    of extra requests finding it, and every later request is built to fit.
    """

    def __init__(self, configured: int | None) -> None:
        self.bytes = configured
        self._lock = threading.Lock()

    def fits(self, size: int) -> bool:
        limit = self.bytes
        return limit is None or size <= limit

    def refused(self, size: int) -> None:
        """The API answered 413 to a body of ``size`` bytes."""
        with self._lock:
            learned = max(size // 2, 1)
            if self.bytes is None or learned < self.bytes:
                self.bytes = learned


class _Pending:
    """The events gathered for the next request: slices of a few batches."""

    def __init__(self) -> None:
        self.parts: list[tuple[WireBatch, int, int]] = []
        self.count = 0
        self.size = _EMPTY_BODY  # the body's bytes, one comma per event (as the API sees it)

    def add(self, batch: WireBatch, lo: int, hi: int, size: int) -> None:
        self.parts.append((batch, lo, hi))
        self.count += hi - lo
        self.size += size

    def request(self) -> Request:
        positions: list[int] = []
        rows: list[pa.Array] = []
        times: list[np.ndarray] = []
        for batch, lo, hi in self.parts:
            positions.extend(batch.positions[lo:hi])
            assert isinstance(batch.bodies, pa.Array)
            rows.append(batch.bodies.slice(lo, hi - lo))
            times.append(
                batch.times[lo:hi] if batch.times is not None else np.zeros(hi - lo, np.int64)
            )
        self.__init__()  # type: ignore[misc]
        return Request(EVENTS_PATH, positions, pa.concat_arrays(rows), times=np.concatenate(times))


def chunk_events(
    batches: Iterable[WireBatch], batch_size: int, limit: SizeLimit
) -> Iterator[Request]:
    """Group events into batch requests of at most ``batch_size`` events that fit ``limit``
    (an event larger than the limit goes alone).

    When the input breaks part way, the events read before the break still go out.
    """
    pending = _Pending()
    source = iter(batches)
    while True:
        try:
            batch = next(source, None)
        except Exception:
            if pending.count:
                yield pending.request()
            raise
        if batch is None:
            break
        rows = batch.bodies
        assert isinstance(rows, pa.Array), "events travel as Arrow arrays"
        sizes = pc.binary_length(rows).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        i, n = 0, len(batch)
        while i < n:
            take = min(batch_size - pending.count, n - i)
            full = pending.count + take >= batch_size
            if limit.bytes is not None:
                room = limit.bytes - pending.size
                fit = int(np.searchsorted(np.cumsum(sizes[i : i + take]), room, side="right"))
                if fit < take:
                    take = fit if (fit or pending.count) else 1  # a lone oversized event
                    full = True
            if take:
                pending.add(batch, i, i + take, int(sizes[i : i + take].sum()))
                i += take
            if full and pending.count:
                yield pending.request()
    if pending.count:
        yield pending.request()


def identify_requests(batches: Iterable[WireBatch]) -> Iterator[Request]:
    """One identify request per row, keyed by user so one user's requests never overlap."""
    for batch in batches:
        assert isinstance(batch.bodies, list), "identify bodies travel as bytes"
        for pos, user, body in zip(batch.positions, batch.keys, batch.bodies, strict=True):
            yield Request(IDENTIFY_PATH, [pos], body=body, key=user)
