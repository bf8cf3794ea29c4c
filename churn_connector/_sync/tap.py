"""The tap on a sync's slices: each row's cursor as it is read, kept on disk (8 bytes a
row: memory stays flat at any size), where each file's rows lie (a folder sync), and
whether the input was read to its end.

The slices pass through in order, so the n-th row through the tap is the n-th row of the
run's book. A row whose cursor is null is refused by name (``cursor_null``, invalid): it
belongs to no range, so every run reads it and says so. The cursor column is the sync's,
left out of the rows (it would be an unknown column), unless it is one of the table's own
(``occurred_at``, a ``properties.`` / ``context.`` / ``traits.`` column): then it is sent.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from typing import IO

import numpy as np
import pandas as pd

from .._core import InputError, named
from .._read import Slice
from .cursor import CursorType, Value, codes_of, type_of_series, words

__all__ = ["NULL", "Tap"]

NULL = np.iinfo(np.int64).min  # a null cursor's code on disk


class Tap:
    """Watches a sync's slices go by (see the module). ``column``: the cursor column as the
    slices name it (None: no cursor is read: a sync by versions, snapshots or files)."""

    def __init__(
        self,
        column: str | None,
        *,
        keep: bool = False,
        expect: CursorType | None = None,
        files: bool = False,
    ) -> None:
        self.column = column
        self.keep = keep
        self.expect = expect  # the watermark's type: the column must hold the same
        self.type: CursorType | None = None
        self.rows = 0
        self.last: int | None = None  # the last non-null code read
        self.finished = False  # the input was read to its end
        # a folder sync: (file, first row, rows) of each file read, in order
        self.files: list[tuple[str, int, int]] | None = [] if files else None
        self._spill: IO[bytes] | None = None
        self._path: str | None = None

    def __call__(self, parts: Iterator[Slice]) -> Iterator[Slice]:
        for part in parts:
            yield self.take(part)
        self.finished = True

    def take(self, part: Slice) -> Slice:
        frame = part.frame
        n = len(frame)
        if n and self.files is not None:
            label = str(frame.index[0])
            name = label.rpartition(":")[0]
            if self.files and self.files[-1][0] == name and sum(self.files[-1][1:]) == self.rows:
                first, count = self.files[-1][1:]
                self.files[-1] = (name, first, count + n)
            else:
                self.files.append((name, self.rows, n))
        if self.column is None:
            self.rows += n
            return part
        if self.column not in frame.columns:
            shown = ", ".join(map(str, frame.columns[:12]))
            raise InputError(
                f"{named('cursor')} {self.column!r}: the input has no such column (its "
                f"columns: {shown})"
            )
        column = frame[self.column]
        if self.type is None and (column.notna().any() or self.expect is not None):
            self.type = self._typed(column)
        kind = self.type or "integer"
        if self.type is not None and column.notna().any():
            found = type_of_series(column, self.column)
            if found != self.type:
                raise InputError(
                    f"{named('cursor')} {self.column!r} held {words(self.type)}, then "
                    f"{words(found)}: one type throughout"
                )
        codes, nulls = codes_of(column, kind)
        codes = np.where(nulls, NULL, codes).astype(np.int64, copy=False)
        self._write(codes)
        if not nulls.all():
            self.last = int(codes[~nulls][-1])
        self.rows += n
        if nulls.any():
            problems = dict(part.problems)
            message = (
                f"{self.column}: the cursor is null, so this row belongs to no sync's range: "
                "every run reads it (fill the cursor at the source, or leave such rows out)"
            )
            for p in np.flatnonzero(nulls).tolist():
                problems.setdefault(p, ("cursor_null", message, self.column))
            part = replace(part, problems=problems)
        if not self.keep:
            part = part.with_frame(frame.drop(columns=[self.column]))
        return part

    def _typed(self, column: pd.Series) -> CursorType:
        found = type_of_series(column, str(self.column))
        if self.expect is not None and found != self.expect:
            raise InputError(
                f"{named('cursor')} {self.column!r} holds {words(found)}, but the sync's "
                f"watermark is one of the {words(self.expect)}: start it over "
                f"({named('full_refresh')}) or give it another {named('sync_name')}"
            )
        return found

    def _write(self, codes: np.ndarray) -> None:
        if self._spill is None:
            handle, self._path = tempfile.mkstemp(prefix="churn-cursor-", suffix=".i64")
            self._spill = os.fdopen(handle, "w+b")
        self._spill.write(codes.tobytes())

    def codes(self, block: int = 1 << 20) -> Iterator[tuple[int, np.ndarray]]:
        """The codes read, ``block`` rows at a time, with each block's first row."""
        if self._spill is None:
            return
        self._spill.flush()
        for lo in range(0, self.rows, block):
            self._spill.seek(lo * 8)
            count = min(block, self.rows - lo)
            yield lo, np.frombuffer(self._spill.read(count * 8), dtype=np.int64)

    def value(self, code: int) -> Value:
        assert self.type is not None
        return Value(self.type, code)

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            self._path = None

    def __del__(self) -> None:
        self.close()


def keeps(column: str, kind: str) -> bool:
    """Whether a cursor column named so (after ``rename``) is one of the table's own."""
    if kind == "events":
        return column == "occurred_at" or column.startswith(("properties.", "context."))
    return column.startswith("traits.")
