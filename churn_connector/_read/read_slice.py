"""A slice of the input as a reader yields it: its frame, and what the reader says of its rows.

A reader knows things of some rows that their cells cannot say: a CSV line it could not
split into the header's cells (kept as a row of nulls, so labels and counts stay right), an
NDJSON line that names a key twice, a file whose last line lacks its newline, a row whose
value disagrees with its Hive folder. It says them here, beside the frame, by the rows'
positions in it; the slice stream (``_slices``) turns them into failures and notes.

A value and not ``DataFrame.attrs``: pandas copies ``attrs`` through some operations and
drops them in others (``concat``), so a note there could vanish, or follow rows it no longer
describes, without a word. Each step that changes the frame says what becomes of its notes:
``with_frame`` for the same rows (columns renamed, relabelled, typed), ``split`` for rows
taken apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from .._core import Note

__all__ = ["RowProblem", "RowRepeat", "Slice", "as_slice"]

RowProblem = tuple[str, ...]
"""A row the reader could not read as written: ``(check, message)``, or ``(check, message,
column)`` when the problem is one cell's (``\\N`` read as text)."""
RowRepeat = tuple[str, str, str]
"""An NDJSON line that names a key twice: ``(column, key, message)``."""


@dataclass(frozen=True, eq=False)
class Slice:
    """Rows of the input as read, and what the reader says of them (by position)."""

    frame: pd.DataFrame
    problems: Mapping[int, RowProblem] = field(default_factory=dict)
    repeats: Mapping[int, RowRepeat] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()  # of the input, not of a row (a file without final newline)
    restored: tuple[str, ...] = ()  # columns that key=value folders restored (``hive``)

    def __len__(self) -> int:
        return len(self.frame)

    def with_frame(self, frame: pd.DataFrame) -> Slice:
        """The same rows, in the same order, in another frame (columns renamed, typed, or
        rows relabelled): the notes still hold."""
        assert len(frame) == len(self.frame), "with_frame keeps the rows"
        return replace(self, frame=frame)

    def split(self, n: int) -> tuple[Slice, Slice]:
        """The first ``n`` rows and the rest, each with the problems of its own rows; the
        notes of the input go with both (the stream keeps each once, by its text)."""
        head, rest = self.frame.iloc[:n], self.frame.iloc[n:]
        return (
            replace(
                self,
                frame=head,
                problems=_below(self.problems, n),
                repeats=_below(self.repeats, n),
            ),
            replace(
                self,
                frame=rest,
                problems=_from(self.problems, n),
                repeats=_from(self.repeats, n),
            ),
        )


def _below(by_row: Mapping[int, Any], n: int) -> dict[int, Any]:
    return {p: v for p, v in by_row.items() if p < n}


def _from(by_row: Mapping[int, Any], n: int) -> dict[int, Any]:
    return {p - n: v for p, v in by_row.items() if p >= n}


def as_slice(part: Slice | pd.DataFrame) -> Slice:
    """``part``, or a frame given by itself as a slice the reader says nothing of."""
    return part if isinstance(part, Slice) else Slice(part)
