"""Hive partitions: the ``key=value`` folders of part files restore their columns.

Spark, Hive, pyarrow, DuckDB and Redshift's ``PARTITION BY`` write a partition column into
the folder names (``event_type=login/properties.plan=pro/part-0.parquet``) and leave it out
of the files: read file by file, those columns would be lost. Below the folder (or the fixed
start of a glob), each ``key=value`` folder gives its column to the rows of the files under
it: key and value URL-decoded (``%2F`` is ``/``; ``+`` stays a plus), Hive's null
``__HIVE_DEFAULT_PARTITION__`` a null. Every file must sit under the same keys, in the same
order; two layouts in one folder are refused, not merged.

**Restored values are text**, as the path holds them: ``user_bucket=7`` restores ``"7"``,
``zip=02134`` ``"02134"``. Guessing types from the folder names (pyarrow infers an integer
when every value of a key looks like one) would lose leading zeros, and would type a value by
the *other* folders: one new ``region=eu`` folder would turn yesterday's ``region=1`` from 1
into ``"1"``, and change the message id of rows that did not change. ``dtypes=`` types a
restored column, as it types CSV cells.

**A file that holds the column too** keeps its own value, and a row whose value disagrees
with its folder is invalid (``partition_mismatch``): the folder's text is read as the
column's type (``7`` and ``07`` agree for an integer column; a timestamp without an offset
is read as UTC), a null folder agrees with a null cell only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import InputError, named, on_command_line, shown
from .arrow import arrow_to_pandas
from .read_slice import RowProblem, Slice

__all__ = ["HIVE_NULL", "Layout", "layout_of"]

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_UNPARSED: Any = object()


def _pair(segment: str) -> tuple[str, str | None] | None:
    key, sep, value = segment.partition("=")
    if not sep or not key:
        return None
    text = unquote(value)
    return unquote(key), None if text == HIVE_NULL else text


@dataclass(frozen=True)
class Layout:
    """The partition keys of a folder's files, and where their folders start."""

    root: Path
    keys: tuple[str, ...]

    def values(self, path: Path) -> list[tuple[str, str | None, str]]:
        """(key, value, the folder's name as written) of the file ``path``."""
        found = []
        for segment in path.relative_to(self.root).parent.parts:
            pair = _pair(segment)
            if pair is not None:
                found.append((*pair, segment))
        return found

    def restore(self, part: Slice, path: Path, name: str) -> Slice:
        """``part`` (rows of ``path``) with the columns its folders give (see the module),
        and the rows whose value disagrees with its folder among its problems."""
        frame = part.frame
        problems: dict[int, RowProblem] = dict(part.problems)
        restored: dict[str, pa.Array] = {}
        for key, value, segment in self.values(path):
            if key in frame.columns:
                _mismatches(frame[key], key, value, segment, name, problems)
            elif value is None:
                restored[key] = pa.nulls(len(frame), pa.string())
            else:
                restored[key] = pa.array(np.full(len(frame), value, dtype=object), pa.string())
        if not restored and not problems:
            return part
        if restored:
            # converted as a file's text column is, so the dtypes match the files' own
            extra = arrow_to_pandas(pa.table(restored), frame.index)
            frame = pd.concat([frame, extra], axis=1)
        return replace(part, frame=frame, problems=problems, restored=tuple(restored))


def layout_of(files: Sequence[Path], root: Path | None) -> Layout | None:
    """The partition layout of ``files`` below ``root`` (None: not partitioned)."""
    if root is None or not files:
        return None
    first: tuple[str, ...] | None = None
    first_file = files[0]
    for path in files:
        pairs = Layout(root, ()).values(path)
        keys = tuple(key for key, _, _ in pairs)
        if len(set(keys)) != len(keys):
            repeated = next(k for k in keys if keys.count(k) > 1)
            raise InputError(
                f"{path}: the partition key {repeated!r} appears twice on the way to it "
                "(which value is the row's is a guess)",
                path=str(path),
            )
        if first is None:
            first = keys
        elif keys != first:
            raise InputError(
                f"{root}: its files sit under different partition keys ({_keys(first)} for "
                f"{first_file.relative_to(root)}, {_keys(keys)} for {path.relative_to(root)}): "
                "one layout per folder: pass the parts of each layout on their own, or "
                f"{_off()} to read the files' own columns only",
                path=str(root),
            )
    return Layout(root, first) if first else None


def _off() -> str:
    """Partitioning turned off, as the caller writes it."""
    return f"{named('partitioning')} none" if on_command_line() else "partitioning=None"


def _keys(keys: tuple[str, ...]) -> str:
    return "/".join(f"{k}=" for k in keys) or "none"


def _mismatches(
    column: pd.Series,
    key: str,
    value: str | None,
    segment: str,
    name: str,
    problems: dict[int, RowProblem],
) -> None:
    """Record the rows whose ``key`` disagrees with the folder's ``value``."""
    disagree = _disagree(column, value)
    cells = column.to_numpy(dtype=object)
    for p in np.flatnonzero(disagree):
        said = "null" if value is None else repr(value)
        problems.setdefault(
            int(p),
            (
                "partition_mismatch",
                f"{key}: the folder {segment} says {said}, the file {name} says {shown(cells[p])}",
            ),
        )


def _disagree(column: pd.Series, text: str | None) -> np.ndarray:
    """Per row: the cell is not the folder's value (see the module)."""
    missing = column.isna().to_numpy(dtype=bool)
    if text is None:
        return ~missing
    dtype = column.dtype
    if pd.api.types.is_object_dtype(dtype):
        same = np.array([_same(v, text) for v in column.tolist()], dtype=bool)
        return ~same
    value = _typed(dtype, text)
    if value is _UNPARSED:
        return np.ones(len(column), dtype=bool)
    equal: np.ndarray = (column == value).fillna(False).to_numpy(dtype=bool)
    return ~equal | missing


def _typed(dtype: Any, text: str) -> Any:
    """The folder's text as a value of ``dtype`` (``_UNPARSED``: it is none)."""
    try:
        if pd.api.types.is_bool_dtype(dtype):
            lowered = text.lower()
            return lowered == "true" if lowered in ("true", "false") else _UNPARSED
        if pd.api.types.is_integer_dtype(dtype):
            return int(text) if _INTEGER.fullmatch(text) else _UNPARSED
        if pd.api.types.is_float_dtype(dtype):
            return float(text)
        if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
            return _instant(text, aware=getattr(dtype, "tz", None) is not None)
        if pd.api.types.is_string_dtype(dtype):
            return text
    except (ValueError, OverflowError):
        return _UNPARSED
    return _UNPARSED


def _instant(text: str, *, aware: bool) -> pd.Timestamp:
    stamp = pd.Timestamp(text)
    if pd.isna(stamp):  # "NaT", "nat": pandas' null, not an instant
        raise ValueError(text)
    if aware:
        return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp
    return stamp if stamp.tzinfo is None else stamp.tz_convert("UTC").tz_localize(None)


def _same(cell: Any, text: str) -> bool:
    """One cell of an object column against the folder's text."""
    if cell is None or cell is pd.NA or (isinstance(cell, float) and np.isnan(cell)):
        return False
    try:
        if isinstance(cell, str):
            return cell == text
        if isinstance(cell, bool | np.bool_):
            return str(bool(cell)).lower() == text.lower()
        if isinstance(cell, int | np.integer):
            return bool(_INTEGER.fullmatch(text)) and int(text) == int(cell)
        if isinstance(cell, float | np.floating):
            return float(text) == float(cell)
        if isinstance(cell, decimal.Decimal):
            return decimal.Decimal(text) == cell
        if isinstance(cell, dt.datetime):
            return _instant(text, aware=cell.tzinfo is not None) == pd.Timestamp(cell)
        if isinstance(cell, dt.date):
            return pd.Timestamp(text).date() == cell
    except (ValueError, OverflowError, decimal.InvalidOperation):
        return False
    return str(cell) == text
