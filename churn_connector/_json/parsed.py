"""JSON-object texts parsed once: validation's parse of a slice's text columns, handed to the
wire step as a value beside the slice, so that no text is parsed twice.

``ParsedTexts`` holds, by column, each text's sorted members and the Arrow array they were
parsed from: it answers for exactly those buffers (their addresses, the array's offset and
length), and holding the array keeps them alive, so an answer is for the same immutable
bytes. Any other array is a miss, never wrong, only slower: the wire step parses the texts
itself. Only Arrow-backed columns can be found again (a NumPy-backed one is copied afresh
each time Arrow reads it). When a slice keeps only its valid rows, ``of_rows`` takes their
members and answers for the new column's buffers.

The parse is made inside pandera, which calls each check with a Series and keeps only its
verdict: a schema's checks leave their parses in the schema's ``TextParses`` while a run of
it collects them (``collecting``, on that thread), and the run returns them as a value. At
other times the checks build none (a schema a user runs by itself).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyarrow as pa

from .arrow import contiguous

__all__ = ["NO_PARSES", "ParsedTexts", "TextParses", "arrow_backed"]

_Key = tuple[object, ...]
_Entry = tuple[pa.Array, pa.BinaryArray]  # (the texts' array, their members)


def _key(arr: pa.Array) -> _Key:
    return (
        str(arr.type),
        arr.offset,
        len(arr),
        *(0 if b is None else b.address for b in arr.buffers()),
    )


def arrow_backed(s: pd.Series) -> bool:
    """Arrow holds the column's values (reading it as Arrow copies nothing)."""
    return isinstance(s.array, pd.arrays.ArrowExtensionArray)


class ParsedTexts:
    """Validation's parse of a slice's JSON-object text columns, by column name:
    ``members(column, arr)[i]`` is row i's object without its braces, sorted (null for a null
    or refused text)."""

    __slots__ = ("_by_column",)

    def __init__(self, by_column: Mapping[str, _Entry] | None = None) -> None:
        self._by_column = dict(by_column or {})

    def __repr__(self) -> str:
        return f"ParsedTexts({sorted(self._by_column)})"

    def __bool__(self) -> bool:
        return bool(self._by_column)

    def members(self, column: str, arr: pa.Array) -> pa.BinaryArray | None:
        """The members parsed from ``column`` when ``arr`` is the very array they were
        parsed from (its buffers); None otherwise."""
        found = self._by_column.get(column)
        if found is None or _key(found[0]) != _key(arr):
            return None
        return found[1]

    def of_rows(self, before: pd.DataFrame, after: pd.DataFrame, rows: np.ndarray) -> ParsedTexts:
        """The parse of ``after``, which holds ``rows`` (positions) of ``before``: a slice's
        valid rows. A column whose texts are not the parsed ones is left out."""
        kept: dict[str, _Entry] = {}
        for column, (arr, members) in self._by_column.items():
            old, new = _column(before, column), _column(after, column)
            if old is None or new is None or len(new) != len(rows):
                continue
            if _key(contiguous(old)) != _key(arr):
                continue
            kept[column] = (contiguous(new), members.take(pa.array(rows, pa.int64())))
        return ParsedTexts(kept)


NO_PARSES = ParsedTexts()


def _column(frame: pd.DataFrame, name: str) -> pd.Series | None:
    """The Arrow-backed text column ``name`` of ``frame`` (None: none such, or not one)."""
    if name not in frame.columns or not frame.columns.is_unique:
        return None
    s = frame[name]
    if not (arrow_backed(s) and pd.api.types.is_string_dtype(s.dtype)):
        return None
    return s


class TextParses:
    """Where a schema's checks leave the parses of JSON-object text columns while a run of
    the schema collects them; outside a run nothing is kept."""

    def __init__(self) -> None:
        self._local = threading.local()  # .found: the parses of the run on this thread

    @property
    def wanted(self) -> bool:
        """A run on this thread collects parses (a check builds its members only then)."""
        return getattr(self._local, "found", None) is not None

    def keep(self, column: str, arr: pa.Array, members: pa.BinaryArray) -> None:
        """Leave the members parsed from ``arr``, the texts of ``column``, for the run."""
        found: dict[str, _Entry] | None = getattr(self._local, "found", None)
        if found is not None:
            found[column] = (arr, members)

    @contextmanager
    def collecting(self) -> Iterator[dict[str, _Entry]]:
        """Collect the parses the checks leave during the block (the mapping it gives)."""
        found: dict[str, _Entry] = {}
        self._local.found = found
        try:
            yield found
        finally:
            self._local.found = None
