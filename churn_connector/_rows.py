"""The row book: one state per input row, kept column-wise so millions of rows stay small.

Validation marks rows invalid or skipped, delivery marks them sent, rejected or failed, and
results read the book back as frames. Positions are 0-based row numbers of the whole input.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

import numpy as np
import pandas as pd

from ._types import STATE_NAMES, RowState


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

    def to_list(self) -> list[Any]:
        out: list[Any] = []
        for part in self._parts:
            out.extend(part.tolist())
        return out


class RowBook:
    """Per-row state, stored column-wise so that millions of rows stay small.

    The reader thread appends rows while sender threads set states, so every access
    takes the lock (growing an array replaces it; an unlocked write could be lost).
    Message ids are kept per slice as fixed-width bytes where possible (36 B a row).
    """

    def __init__(self) -> None:
        self.labels = Labels()
        self.errors: dict[int, str] = {}
        self._ids: list[tuple[int, np.ndarray]] = []
        self._status = np.zeros(1024, dtype=np.int8)  # RowState values
        self._chunk = np.full(1024, -1, dtype=np.int64)
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def status(self) -> np.ndarray:
        return self._status[: len(self.labels)]

    @property
    def chunk(self) -> np.ndarray:
        return self._chunk[: len(self.labels)]

    def extend(self, labels: pd.Index | list[Any]) -> int:
        """Add rows (all pending); return the position of the first."""
        index = labels if isinstance(labels, pd.Index) else pd.Index(labels, dtype=object)
        with self._lock:
            start = len(self.labels)
            need = start + len(index)
            if need > len(self._status):
                size = max(need, 2 * len(self._status))  # doubling keeps appends O(n) overall
                status = np.zeros(size, dtype=np.int8)
                chunk = np.full(size, -1, dtype=np.int64)
                status[:start] = self._status[:start]
                chunk[:start] = self._chunk[:start]
                self._status, self._chunk = status, chunk
            self.labels.append(index)
            return start

    def set_message_ids(self, start: int, ids: list[str | None]) -> None:
        """Message ids of the rows from ``start`` on (None where a row has none)."""
        try:
            packed = np.array([b"" if i is None else i.encode("ascii") for i in ids], dtype="S36")
            # fixed-width bytes drop trailing NULs and cannot hold longer ids: keep those exact
            if any(i is not None and (len(i) > 36 or "\x00" in i) for i in ids):
                raise ValueError
        except (UnicodeEncodeError, ValueError):
            packed = np.array(ids, dtype=object)
        with self._lock:
            self._ids.append((start, packed))

    def message_ids(self) -> list[str | None]:
        out: list[str | None] = [None] * len(self)
        for start, packed in self._ids:
            values = packed.tolist()
            if packed.dtype.kind == "S":
                values = [v.decode() if v else None for v in values]
            out[start : start + len(values)] = values
        return out

    def set(
        self, positions: Any, state: RowState, error: str | None = None, chunk: int = -1
    ) -> None:
        pos = np.asarray(positions, dtype=np.int64)
        with self._lock:
            self._status[pos] = state
            if chunk >= 0:
                self._chunk[pos] = chunk
            if error is not None:
                for p in pos.tolist():
                    self.errors[p] = error

    def set_chunk(self, positions: Any, chunk: int) -> None:
        with self._lock:
            self._chunk[np.asarray(positions, dtype=np.int64)] = chunk

    def add_error(self, position: int, error: str) -> None:
        with self._lock:
            old = self.errors.get(position)
            self.errors[position] = error if old is None else f"{old}; {error}"

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.status, minlength=len(STATE_NAMES))
        return {name: int(found[i]) for i, name in enumerate(STATE_NAMES)}

    def frame(self) -> pd.DataFrame:
        n = len(self)
        errors: list[str | None] = [None] * n
        for p, e in self.errors.items():
            errors[p] = e
        chunk = pd.array(self.chunk, dtype="Int64")
        chunk[self.chunk < 0] = pd.NA
        return pd.DataFrame(
            {
                "row": pd.Series(self.labels.to_list(), dtype=object),
                "position": np.arange(n, dtype=np.int64),
                "message_id": pd.Series(self.message_ids(), dtype=object),
                "chunk": chunk,
                "status": pd.Categorical.from_codes(
                    self.status.astype(np.int64), categories=pd.Index(list(STATE_NAMES))
                ),
                "error": pd.Series(errors, dtype=object),
            }
        )
