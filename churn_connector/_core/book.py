"""The row book: one state per input row, kept column-wise so millions of rows stay small.

Validation marks rows invalid or skipped, delivery marks them sent, rejected or failed, and
results read the book back as frames. Positions are 0-based row numbers of the whole input.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from .columns import ChunkNumbers, IdColumn, Labels, Spill
from .types import STATE_NAMES, RowState
from .words import rows_text


def row_index(labels: pd.Index | list[Any]) -> pd.Index:
    """The result frames' index: the input's own row labels, named ``row``; text labels
    (a file's ``part-0.parquet:12``) as pandas' ``string`` dtype."""
    index = labels if isinstance(labels, pd.Index) else pd.Index(labels)
    text = index.dtype == object or isinstance(index.dtype, pd.StringDtype)
    if text and index.inferred_type == "string":
        index = index.astype("string")
    return index.rename("row")


class BookClosed(BaseException):
    """Raised on a thread that adds rows after the run stopped: it ends that thread's work
    (a ``BaseException``: no ``except Exception`` on the way turns it into a row error)."""


# rows scanned at a time: a block's temporaries stay near 1 MB (bincount widens to 8 bytes
# a row); freeing a larger array makes glibc keep more heap for the rest of the run
_COUNT_BLOCK = 1 << 17


class RowBook:
    """Per-row state, stored column-wise so that millions of rows stay small.

    A row costs 1 byte of state and what its slice's ``IdColumn`` keeps (16 bytes on disk
    for a hashed id); chunk numbers are runs (``ChunkNumbers``), labels the input's own
    index slices, errors are kept for failing rows only. The reader thread appends rows
    while sender threads set states, so every access takes the lock (growing an array
    replaces it).
    """

    def __init__(self) -> None:
        self.labels = Labels()
        self.spill = Spill()  # message-id digests: 16 bytes a row on disk, not in memory
        self.errors: dict[int, str] = {}
        # the run stopped before the input was read to the end, and its length is unknown:
        # where the reading stopped, in words (None: every row of the input is in the book)
        self.not_read: str | None = None
        # each slice's id column and its first position (bisected for each repeated id)
        self._id_columns: list[IdColumn] = []
        self._id_starts: list[int] = []
        # rows skipped as repeats of an earlier row, and that row: arrays, not a text each
        self._repeats: list[tuple[np.ndarray, np.ndarray]] = []
        # rows whose error texts are written when a frame asks (``add_deferred``)
        self._deferred: list[tuple[np.ndarray, Callable[[list[int]], list[str]]]] = []
        self._status = np.zeros(1024, dtype=np.int8)  # RowState values
        # every row before it has its final state (rows never go back to pending)
        self._settled = 0
        self._chunks = ChunkNumbers()
        self._lock = threading.RLock()
        self._keeper: threading.Thread | None = None  # after close(): the one who may write

    def close(self) -> None:
        """From now on only this thread changes the book: a reader or builder that outlives
        a stopped run (blocked on its input) adds nothing to the accounting after it."""
        with self._lock:
            self._keeper = threading.current_thread()

    def _closed_to_me(self) -> bool:
        keeper = self._keeper
        return keeper is not None and keeper is not threading.current_thread()

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def status(self) -> np.ndarray:
        return self._status[: len(self.labels)]

    @property
    def chunk(self) -> np.ndarray:
        """Every row's chunk number (-1: none), as one array made on each call."""
        with self._lock:
            return self._chunks.block(0, len(self.labels))

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all, when the input's length is known up front:
        the arrays are then allocated once, with no spare room and no copy."""
        with self._lock:
            self._grow(rows, exact=True)

    def extend(self, labels: pd.Index | list[Any]) -> int:
        """Add rows (all pending); return the position of the first."""
        index = labels if isinstance(labels, pd.Index) else pd.Index(labels, dtype=object)
        with self._lock:
            if self._closed_to_me():
                raise BookClosed("the run has stopped: no more rows are taken")
            start = len(self.labels)
            self._grow(start + len(index), exact=False)
            self.labels.append(index)
            return start

    def _grow(self, need: int, *, exact: bool) -> None:
        if need <= len(self._status):
            return
        # growing by half keeps appends O(n) overall with a third less spare room than doubling
        size = need if exact else max(need, len(self._status) * 3 // 2)
        start = len(self.labels)
        status = np.zeros(size, dtype=np.int8)
        status[:start] = self._status[:start]
        self._status = status

    def set_message_ids(self, start: int, ids: IdColumn) -> None:
        """The message ids of the slice's rows from ``start`` on."""
        with self._lock:
            if self._closed_to_me():
                return
            self._id_columns.append(ids)
            self._id_starts.append(start)

    def id_column_at(self, position: int) -> tuple[IdColumn, int] | None:
        """The id column holding ``position``'s id and the row's index in it, if any."""
        k = bisect.bisect_right(self._id_starts, position) - 1
        if k < 0:
            return None
        start, column = self._id_starts[k], self._id_columns[k]
        return (column, position - start) if position - start < len(column) else None

    def message_ids(self, lo: int = 0, hi: int | None = None) -> list[str | None]:
        """The message ids of positions ``lo`` .. ``hi`` (all by default)."""
        hi = len(self) if hi is None else hi
        out: list[str | None] = [None] * (hi - lo)
        for start, column in zip(self._id_starts, self._id_columns, strict=True):
            end = start + len(column)
            if end > lo and start < hi:
                a, b = max(lo, start), min(hi, end)
                out[a - lo : b - lo] = column.texts(a - start, b - start)
        return out

    def set(
        self, positions: Any, state: RowState, error: str | None = None, chunk: int = -1
    ) -> None:
        pos = np.asarray(positions, dtype=np.int64)
        with self._lock:
            if self._closed_to_me():
                return
            self._status[pos] = state
            if chunk >= 0:
                self._chunks.set(pos, chunk)
            if error is not None:
                for p in pos.tolist():
                    self.errors[p] = error

    def set_chunk(self, positions: Any, chunk: int) -> None:
        with self._lock:
            if self._closed_to_me():
                return
            self._chunks.set(np.asarray(positions, dtype=np.int64), chunk)

    def add_error(self, position: int, error: str) -> None:
        self.add_errors([position], error)

    def add_errors(self, positions: Iterable[int], error: str) -> None:
        """Append ``error`` to each row's (after ``"; "``): one lock for all of them."""
        with self._lock:
            if self._closed_to_me():
                return
            errors = self.errors
            for position in positions:
                old = errors.get(position)
                errors[position] = error if old is None else f"{old}; {error}"

    def skip_repeats(self, positions: np.ndarray, firsts: np.ndarray) -> None:
        """Rows skipped because an earlier row (``firsts``) has their message id and
        content; their error text is written when a frame is asked for."""
        with self._lock:
            if self._closed_to_me():
                return
            self._status[positions] = RowState.SKIPPED
            self._repeats.append((positions.astype(np.int64), firsts.astype(np.int64)))

    def add_deferred(self, positions: np.ndarray, texts: Callable[[list[int]], list[str]]) -> None:
        """Error texts for ``positions`` (sorted), written only when a frame asks:
        ``texts(ks)`` returns those of ``positions[ks]``. A text a row kept in memory to
        the end of a run (~200 bytes) would cost more than the row itself."""
        with self._lock:
            if self._closed_to_me():
                return
            self._deferred.append((positions.astype(np.int64), texts))

    def _errors_at(self, positions: np.ndarray) -> list[str | None]:
        """The error texts of ``positions`` (sorted), repeats' texts written out."""
        if len(self.errors) > len(positions):
            errors = [self.errors.get(p) for p in positions.tolist()]
        else:
            errors = [None] * len(positions)
            rows = np.fromiter(self.errors, dtype=np.int64, count=len(self.errors))
            texts = list(self.errors.values())
            for i, k in zip(*_matches(positions, rows), strict=True):
                errors[i] = texts[k]
        for rows, firsts in self._repeats:
            for i, k in zip(*_matches(positions, rows), strict=True):
                text = f"duplicate of {rows_text([self.labels[int(firsts[k])]])} (same message id)"
                old = errors[i]
                errors[i] = text if old is None else f"{text}; {old}"
        for rows, written in self._deferred:
            at, ks = _matches(positions, rows)
            for i, text in zip(at, written(ks) if ks else [], strict=True):
                old = errors[i]
                errors[i] = text if old is None else f"{old}; {text}"
        return errors

    def finished(self) -> int:
        """How many rows have their final state (any state but pending).

        The progress bar asks several times a second: the rows before the first one
        still pending are not read again, and nothing input-sized is allocated (a
        comparison of the whole input made a 30 MB array each time at 30M rows, whose
        freeing taught the C heap to keep 60 MB it did not need)."""
        with self._lock:
            pending, first = 0, None
            for lo, block in self._blocks(self._settled):
                waiting = np.flatnonzero(block == RowState.PENDING)
                if first is None and len(waiting):
                    first = lo + int(waiting[0])
                pending += len(waiting)
            self._settled = len(self) if first is None else first
            return len(self) - pending

    def counts(self) -> dict[str, int]:
        found = np.zeros(len(STATE_NAMES), dtype=np.int64)
        for _, block in self._blocks():  # bincount widens its input to 8 bytes a row
            found += np.bincount(block, minlength=len(STATE_NAMES))
        return {name: int(found[i]) for i, name in enumerate(STATE_NAMES)}

    def frame(self, lo: int = 0, hi: int | None = None) -> pd.DataFrame:
        """The per-row frame of positions ``lo`` .. ``hi`` (all rows by default), indexed by
        the rows' labels (``row``): ``status``, ``message_id``, ``chunk``, ``error``, with
        pandas' nullable dtypes (``string``, ``Int64``: ``<NA>`` where there is none)."""
        hi = len(self) if hi is None else hi
        positions = np.arange(lo, hi, dtype=np.int64)
        return self._frame(
            positions,
            self.labels.index(lo, hi),
            self.message_ids(lo, hi),
            self._errors_at(positions),
        )

    def frame_at(self, positions: np.ndarray) -> pd.DataFrame:
        """The per-row frame of some rows only (say, the failures)."""
        ids: list[str | None] = []
        for p in positions.tolist():
            found = self.id_column_at(p)
            ids.append(None if found is None else found[0].texts(found[1], found[1] + 1)[0])
        distinct, inverse = np.unique(positions, return_inverse=True)
        texts = self._errors_at(distinct)
        errors = [texts[k] for k in inverse.ravel().tolist()]
        return self._frame(
            positions.astype(np.int64), [self.labels[p] for p in positions.tolist()], ids, errors
        )

    def _frame(
        self,
        positions: np.ndarray,
        labels: pd.Index | list[Any],
        ids: list[str | None],
        errors: list[str | None],
    ) -> pd.DataFrame:
        with self._lock:
            chunk = self._chunks.get(positions)
        chunks = pd.arrays.IntegerArray(chunk.astype(np.int64), chunk < 0)
        return pd.DataFrame(
            {
                "status": pd.Categorical.from_codes(
                    self.status[positions].astype(np.int64),
                    categories=pd.Index(list(STATE_NAMES)),
                ),
                "message_id": pd.array(ids, dtype="string"),
                "chunk": chunks,
                "error": pd.array(errors, dtype="string"),
            },
            index=row_index(labels),
        )

    def frames(self, block: int = 200_000) -> Iterator[pd.DataFrame]:
        """The per-row frame in blocks of ``block`` rows, for writing without holding it."""
        for lo in range(0, max(len(self), 1), block):
            yield self.frame(lo, min(lo + block, len(self)))

    def positions(self, states: tuple[RowState, ...]) -> np.ndarray:
        """The positions of rows in any of ``states`` (int64), found in blocks: asked for
        at the end of a run, when memory is at its highest, a mask of the whole input
        would add a byte a row to the peak."""
        found = [np.flatnonzero(np.isin(block, states)) + lo for lo, block in self._blocks()]
        return np.concatenate([np.empty(0, dtype=np.int64), *found])

    def _blocks(self, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """The states from ``start`` on, ``_COUNT_BLOCK`` rows at a time, with each block's
        first position: every scan of the whole input goes through here."""
        status = self.status
        for lo in range(start, len(status), _COUNT_BLOCK):
            yield lo, status[lo : lo + _COUNT_BLOCK]

    def unrecorded_answers(self) -> bool:
        """Whether a row was answered (sent or rejected) without a request recorded."""
        for lo, block in self._blocks():
            answered = np.flatnonzero((block == RowState.SENT) | (block == RowState.REJECTED))
            with self._lock:
                chunk = self._chunks.get(answered + lo)
            if (chunk < 0).any():
                return True
        return False


def _matches(positions: np.ndarray, rows: np.ndarray) -> tuple[list[int], list[int]]:
    """Where ``rows`` occur in the sorted ``positions``: (index in positions, index in rows)."""
    at = np.searchsorted(positions, rows)
    inside = at < len(positions)
    inside[inside] = positions[at[inside]] == rows[inside]
    return at[inside].tolist(), np.flatnonzero(inside).tolist()
