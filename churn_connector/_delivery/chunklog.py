"""The requests' records, kept column-wise: one record per request, for the chunk frame."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from .._core.book import Labels
from .._core.types import ChunkStatus

_NONE = -1  # parent_chunk, http_status: none
_INTS = 8  # chunk, parent, events, first position, last position, http status, attempts, bytes
_TEXTS = 4  # endpoint, status, error, response
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
        self._ints = array("q")
        self._times = array("d")  # elapsed_s, finished_s
        self._texts: list[str | None] = []
        self._known: dict[str, str] = {}

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
        self._ints.extend(
            (
                chunk,
                _NONE if parent_chunk is None else parent_chunk,
                events,
                first,
                last,
                _NONE if http_status is None else http_status,
                attempts,
                bytes,
            )
        )
        self._times.extend((elapsed_s, finished_s))
        shared = self._shared
        self._texts.extend((shared(endpoint), shared(status), shared(error), shared(response)))

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
        return len(self._times) // 2

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

    def _record(self, k: int) -> ChunkRecord:
        chunk, parent, events, first, last, http, attempts, size = self._ints[
            k * _INTS : (k + 1) * _INTS
        ]
        endpoint, status, error, response = self._texts[k * _TEXTS : (k + 1) * _TEXTS]
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
            elapsed_s=self._times[2 * k],
            finished_s=self._times[2 * k + 1],
            bytes=size,
            error=error,
            response=response,
        )
