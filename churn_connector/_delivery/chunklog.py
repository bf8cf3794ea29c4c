"""The requests' records, kept column-wise: one record per request, for the chunk frame."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from .._core import ChunkStatus, Labels

_NONE = -1  # parent_chunk, http_status: none
_INTS = 8  # chunk, parent, events, first position, last position, http status, attempts, bytes
_TEXTS = 4  # endpoint, status, error, response
_BLOCK = 1024  # records a block (64 KiB of numbers)
_KNOWN_TEXTS = 4096  # distinct texts shared between records (the same answer, the same error)


@dataclass(slots=True)
class ChunkRecord:
    """One request (or one bisected part of a rejected request) and how it ended."""

    chunk: int
    parent_chunk: int | None
    endpoint: str
    events: int
    first_row: Any
    last_row: Any
    status: ChunkStatus
    http_status: int | None
    attempts: int
    elapsed_s: float
    finished_s: float  # when it ended, in seconds from the start of the send
    bytes: int
    error: str | None
    response: str | None


class ChunkLog(Sequence[ChunkRecord]):
    """Every request's record in typed arrays and shared texts, made into a ``ChunkRecord``
    when read: ~120 bytes a request where a record object with its own numbers, labels and
    answer text took ~350 (a 30M-row send makes 60,000 requests; an identify of a million
    users a million). Rows are kept as positions in the book; ``labels`` names them."""

    def __init__(self, labels: Labels) -> None:
        self._labels = labels
        # blocks of _BLOCK records, each allocated once at its full size: one growing
        # array is copied to a larger block again and again, and each block it leaves is
        # a hole in the heap that nothing of its size comes to fill
        self._ints: list[array[int]] = []
        self._times: list[array[float]] = []  # elapsed_s, finished_s
        self._texts: list[list[str | None]] = []
        self._known: dict[str, str] = {}
        self._count = 0

    def append(
        self,
        *,
        chunk: int,
        parent_chunk: int | None,
        endpoint: str,
        events: int,
        first: int,
        last: int,
        status: ChunkStatus,
        http_status: int | None,
        attempts: int,
        elapsed_s: float,
        finished_s: float,
        bytes: int,  # the chunk frame's column
        error: str | None,
        response: str | None,
    ) -> None:
        """Add one request's record (the caller holds the sender's lock)."""
        block, k = divmod(self._count, _BLOCK)
        if k == 0:
            self._ints.append(array("q", b"\0" * (8 * _INTS * _BLOCK)))
            self._times.append(array("d", b"\0" * (8 * 2 * _BLOCK)))
            self._texts.append([None] * (_TEXTS * _BLOCK))
        self._ints[block][k * _INTS : (k + 1) * _INTS] = array(
            "q",
            (
                chunk,
                _NONE if parent_chunk is None else parent_chunk,
                events,
                first,
                last,
                _NONE if http_status is None else http_status,
                attempts,
                bytes,
            ),
        )
        self._times[block][2 * k : 2 * k + 2] = array("d", (elapsed_s, finished_s))
        shared = self._shared
        self._texts[block][k * _TEXTS : (k + 1) * _TEXTS] = (
            shared(endpoint),
            shared(status),
            shared(error),
            shared(response),
        )
        self._count += 1

    def _shared(self, text: str | None) -> str | None:
        """One object for a text many requests share (every 200 answer alike, one error)."""
        if text is None:
            return None
        known = self._known.get(text)
        if known is not None:
            return known
        if len(self._known) < _KNOWN_TEXTS:
            self._known[text] = text
        return text

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> ChunkRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChunkRecord]: ...

    def __getitem__(self, index: int | slice) -> ChunkRecord | list[ChunkRecord]:
        if isinstance(index, slice):
            return [self._record(k) for k in range(*index.indices(len(self)))]
        n = len(self)
        k = index + n if index < 0 else index
        if not 0 <= k < n:
            raise IndexError(index)
        return self._record(k)

    def __iter__(self) -> Iterator[ChunkRecord]:
        for k in range(len(self)):
            yield self._record(k)

    def _record(self, index: int) -> ChunkRecord:
        block, k = divmod(index, _BLOCK)
        chunk, parent, events, first, last, http, attempts, size = self._ints[block][
            k * _INTS : (k + 1) * _INTS
        ]
        times = self._times[block]
        endpoint, status, error, response = self._texts[block][k * _TEXTS : (k + 1) * _TEXTS]
        assert endpoint is not None
        assert status is not None
        return ChunkRecord(
            chunk=chunk,
            parent_chunk=None if parent == _NONE else parent,
            endpoint=endpoint,
            events=events,
            first_row=self._labels[first],
            last_row=self._labels[last],
            status=status,  # type: ignore[arg-type]  # stored from a ChunkStatus
            http_status=None if http == _NONE else http,
            attempts=attempts,
            elapsed_s=times[2 * k],
            finished_s=times[2 * k + 1],
            bytes=size,
            error=error,
            response=response,
        )
