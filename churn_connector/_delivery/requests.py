"""Wire batches -> requests: events in chunks of at most ``batch_size``, identify one per user."""

from __future__ import annotations

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

    def payload(self) -> bytes:
        return self.body if self.body is not None else batch_body(self.parts or [])

    def halves(self, parent: int) -> list[Request]:
        """The two halves of a rejected events request, to isolate what the API refused."""
        assert self.parts is not None
        half = len(self.parts) // 2
        return [
            Request(self.path, self.positions[lo:hi], self.parts[lo:hi], parent=parent)
            for lo, hi in ((0, half), (half, len(self.parts)))
        ]


def batch_body(rows: Sequence[bytes]) -> bytes:
    """``{"events":[...]}`` from already-serialised events, without re-encoding them."""
    return b'{"events":[' + b",".join(rows) + b"]}"


_EMPTY_BODY = len(batch_body([]))


def chunk_events(
    batches: Iterable[WireBatch], batch_size: int, max_bytes: int | None
) -> Iterator[Request]:
    """Group events into batch requests of at most ``batch_size`` (and ``max_bytes``)."""
    positions: list[int] = []
    parts: list[bytes] = []
    size = _EMPTY_BODY
    for batch in batches:
        for pos, row in zip(batch.positions, batch.bodies, strict=True):
            too_big = max_bytes is not None and parts and size + len(row) + 1 > max_bytes
            if len(parts) >= batch_size or too_big:
                yield Request(EVENTS_PATH, positions, parts)
                positions, parts, size = [], [], _EMPTY_BODY
            positions.append(pos)
            parts.append(row)
            size += len(row) + 1
    if parts:
        yield Request(EVENTS_PATH, positions, parts)


def identify_requests(batches: Iterable[WireBatch]) -> Iterator[Request]:
    """One identify request per row, keyed by user so one user's requests never overlap."""
    for batch in batches:
        for pos, user, body in zip(batch.positions, batch.keys, batch.bodies, strict=True):
            yield Request(IDENTIFY_PATH, [pos], body=body, key=user)
