"""The row book's columns: row labels as the input's index slices, message-id digests on
disk, chunk numbers as runs; each small for millions of rows."""

from __future__ import annotations

import bisect
import tempfile
import threading
import weakref
from typing import IO, Any, Protocol

import numpy as np
import pandas as pd

from .storage import temp_file_error


class Labels:
    """Row labels stored as the input's own index slices (a RangeIndex costs nothing)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._parts: list[pd.Index] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, index: pd.Index) -> None:
        self._starts.append(self._n)
        self._parts.append(index)
        self._n += len(index)

    def __getitem__(self, position: int) -> Any:
        k = bisect.bisect_right(self._starts, position) - 1
        return self._parts[k][position - self._starts[k]]

    def index(self, lo: int = 0, hi: int | None = None) -> pd.Index:
        """The labels of positions ``lo`` .. ``hi`` as one Index (slices of the inputs')."""
        hi = self._n if hi is None else hi
        parts = [
            part[max(lo - start, 0) : hi - start]
            for start, part in zip(self._starts, self._parts, strict=True)
            if start + len(part) > lo and start < hi
        ]
        if not parts:
            return pd.Index([], dtype=object)
        return parts[0].append(parts[1:]) if len(parts) > 1 else parts[0]


class Spill:
    """An unnamed temporary file that holds bulky per-row data (message-id digests) out of
    memory: appended once, read back by offset when results are built."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._closer: weakref.finalize[[], Spill]
        self._size = 0
        self._lock = threading.Lock()

    def write(self, data: bytes) -> int:
        """Append ``data``; return its offset. A full or read-only temp folder is a
        ``StorageError`` naming it (the run stops like any other stop)."""
        with self._lock:
            try:
                if self._file is None:
                    self._file = tempfile.TemporaryFile(prefix="churn-connector-")  # noqa: SIM115
                    # closed when the book goes, also from within a reference cycle: the
                    # collector runs weakref callbacks before any finalizer, where a
                    # __del__ could come after the file's own (which warns, unclosed)
                    self._closer = weakref.finalize(self, self._file.close)
                offset = self._size
                self._file.seek(offset)
                self._file.write(data)
                self._file.flush()  # a full disk says so now, not at a later read
            except OSError as exc:
                raise temp_file_error(exc, 16) from None
            self._size += len(data)
            return offset

    def read(self, offset: int, size: int) -> bytes:
        with self._lock:
            assert self._file is not None
            try:
                self._file.seek(offset)
                return self._file.read(size)
            except OSError as exc:
                raise temp_file_error(exc, 16) from None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._closer()  # closes the file once, and detaches itself
                self._file = None


class IdColumn(Protocol):
    """The message ids of one slice's rows, kept compactly; text is made only when asked."""

    def __len__(self) -> int: ...

    def texts(self, lo: int, hi: int) -> list[str | None]:
        """The ids of rows ``lo`` .. ``hi`` of the slice (None where a row has none)."""
        ...


_PAGE_BITS = 16  # chunk numbers are kept in pages of 65,536 rows
_PAGE = 1 << _PAGE_BITS
_DENSE_PAGES = 4  # pages kept as arrays while they are written (requests in flight)


class ChunkNumbers:
    """Each row's chunk number (-1: none), as runs of equal numbers in pages of rows.

    A request's rows are neighbours and requests are numbered in input order, so a page
    of 65,536 rows holds a few hundred runs (a few bytes where an array takes 256 KB). The
    pages being written (requests in flight end in any order; a rejected request's halves
    get later numbers) are arrays; the least recently written is turned into runs when more
    than ``_DENSE_PAGES`` are, and back into an array if it is written again. A page whose
    runs would not be smaller (one chunk a row: identify) stays an array.
    """

    def __init__(self) -> None:
        self._dense: dict[int, np.ndarray] = {}  # page -> int32 numbers, in write order
        self._runs: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # page -> starts, numbers
        self._fixed: set[int] = set()  # dense pages that runs would not make smaller

    def set(self, positions: np.ndarray, chunk: int) -> None:
        if len(positions) == 0:
            return
        first, last = int(positions.min()) >> _PAGE_BITS, int(positions.max()) >> _PAGE_BITS
        if first == last:
            self._page(first)[positions & (_PAGE - 1)] = chunk
        else:
            pages = positions >> _PAGE_BITS
            for page in np.unique(pages).tolist():
                self._page(page)[positions[pages == page] & (_PAGE - 1)] = chunk
        self._settle()

    def _page(self, page: int) -> np.ndarray:
        """The page as an array, the most recently written."""
        dense = self._dense.pop(page, None)
        if dense is None:
            dense = np.full(_PAGE, -1, dtype=np.int32)
            runs = self._runs.pop(page, None)
            if runs is not None:
                starts, numbers = runs
                dense[:] = np.repeat(numbers, np.diff(starts, append=_PAGE))
        self._dense[page] = dense
        return dense

    def _settle(self) -> None:
        """Turn the least recently written pages into runs, beyond ``_DENSE_PAGES``."""
        while len(self._dense) - len(self._fixed) > _DENSE_PAGES:
            page = next(p for p in self._dense if p not in self._fixed)
            dense = self._dense[page]
            edges = np.flatnonzero(dense[1:] != dense[:-1]) + 1
            if len(edges) * 2 >= _PAGE:  # runs take 8 bytes: no smaller than the array
                self._fixed.add(page)
                continue
            del self._dense[page]
            if len(edges) or dense[0] != -1:  # a page with no chunk at all keeps nothing
                starts = np.concatenate([[0], edges]).astype(np.int32)
                self._runs[page] = (starts, dense[starts])

    def get(self, positions: np.ndarray) -> np.ndarray:
        """The chunk numbers of ``positions`` (int64, any order), as int32."""
        out = np.full(len(positions), -1, dtype=np.int32)
        if len(positions) == 0:
            return out
        pages = positions >> _PAGE_BITS
        first, last = int(pages.min()), int(pages.max())
        for page in range(first, last + 1) if last - first < 2 else np.unique(pages).tolist():
            where = slice(None) if first == last else np.flatnonzero(pages == page)
            offsets = positions[where] & (_PAGE - 1)
            dense = self._dense.get(page)
            if dense is not None:
                out[where] = dense[offsets]
            elif (runs := self._runs.get(page)) is not None:
                starts, numbers = runs
                out[where] = numbers[np.searchsorted(starts, offsets, side="right") - 1]
        return out

    def block(self, lo: int, hi: int) -> np.ndarray:
        """The chunk numbers of positions ``lo`` .. ``hi``, as int32."""
        out = np.full(max(hi - lo, 0), -1, dtype=np.int32)
        for page in range(lo >> _PAGE_BITS, ((hi - 1) >> _PAGE_BITS) + 1 if hi > lo else 0):
            base = page << _PAGE_BITS
            a, b = max(lo, base), min(hi, base + _PAGE)
            dense = self._dense.get(page)
            if dense is not None:
                out[a - lo : b - lo] = dense[a - base : b - base]
            elif (runs := self._runs.get(page)) is not None:
                starts, numbers = runs
                full = np.repeat(numbers, np.diff(starts, append=_PAGE))
                out[a - lo : b - lo] = full[a - base : b - base]
        return out

    def nbytes(self) -> int:
        """The bytes the numbers take."""
        dense = sum(a.nbytes for a in self._dense.values())
        return dense + sum(s.nbytes + n.nbytes for s, n in self._runs.values())
