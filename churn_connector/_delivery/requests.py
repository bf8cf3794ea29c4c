"""Wire batches -> requests: events in chunks of at most ``batch_size``, identify one per user."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .._stream import WireBatch

EVENTS_PATH = "/v1/events/batch"
IDENTIFY_PATH = "/v1/identify"


@dataclass
class Request:
    """One request to make: its rows (positions) and either event parts or a whole body."""

    path: str
    positions: list[int]
    parts: list[bytes] | None = None  # events: one serialised event per position
    body: bytes | None = None  # identify: the whole body
    parent: int | None = None  # the chunk this is a bisected half of
    key: str | None = None  # requests with one key are sent one at a time, in order
    times: list[int] | None = None  # events: occurred_at (epoch ms) per position

    def payload(self) -> bytes:
        return self.body if self.body is not None else batch_body(self.parts or [])

    def select(self, keep: Sequence[int], parent: int | None = None) -> Request:
        """The events request restricted to the entries at indices ``keep``."""
        assert self.parts is not None
        return Request(
            self.path,
            [self.positions[i] for i in keep],
            [self.parts[i] for i in keep],
            parent=parent,
            times=None if self.times is None else [self.times[i] for i in keep],
        )

    def halves(self, parent: int | None) -> list[Request]:
        """The two halves of an events request: to isolate what the API refused, or to fit."""
        assert self.parts is not None
        half = len(self.parts) // 2
        return [
            self.select(range(lo, hi), parent) for lo, hi in ((0, half), (half, len(self.parts)))
        ]


def batch_body(rows: Sequence[bytes]) -> bytes:
    """``{"events":[...]}`` from already-serialised events, without re-encoding them."""
    return b'{"events":[' + b",".join(rows) + b"]}"


_EMPTY_BODY = len(batch_body([]))


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


def chunk_events(
    batches: Iterable[WireBatch], batch_size: int, limit: SizeLimit
) -> Iterator[Request]:
    """Group events into batch requests of at most ``batch_size`` events that fit ``limit``.

    When the input breaks part way, the events read before the break still go out.
    """
    positions: list[int] = []
    parts: list[bytes] = []
    times: list[int] = []
    size = _EMPTY_BODY
    source = iter(batches)
    while True:
        try:
            batch = next(source, None)
        except Exception:
            if parts:
                yield Request(EVENTS_PATH, positions, parts, times=times)
            raise
        if batch is None:
            break
        stamps = batch.times.tolist() if batch.times is not None else [0] * len(batch)
        for pos, row, ms in zip(batch.positions, batch.bodies, stamps, strict=True):
            too_big = parts and not limit.fits(size + len(row) + 1)
            if len(parts) >= batch_size or too_big:
                yield Request(EVENTS_PATH, positions, parts, times=times)
                positions, parts, times, size = [], [], [], _EMPTY_BODY
            positions.append(pos)
            parts.append(row)
            times.append(ms)
            size += len(row) + 1
    if parts:
        yield Request(EVENTS_PATH, positions, parts, times=times)


def identify_requests(batches: Iterable[WireBatch]) -> Iterator[Request]:
    """One identify request per row, keyed by user so one user's requests never overlap."""
    for batch in batches:
        for pos, user, body in zip(batch.positions, batch.keys, batch.bodies, strict=True):
            yield Request(IDENTIFY_PATH, [pos], body=body, key=user)
