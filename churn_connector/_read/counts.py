"""How many rows an input holds and how its unread rows are labelled, when that is known
without reading it: for progress totals, and for the accounting of a run that stopped
before it read the whole input (every row still gets its state)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._core import InputError
from .avro import avro_rows
from .columnar import arrow_rows, orc_rows
from .files import FileSubset, expand, format_of, part_name
from .manifest import is_manifest_name, manifests_in, read_manifest
from .spool import SpooledArrow
from .tables import PinnedTable, table_format

__all__ = ["row_count", "unread_labels"]


def row_count(data: Any) -> int | None:
    """The number of rows ``data`` holds, or None when only reading it would tell."""
    try:
        return _count(data)
    except (InputError, OSError, pa.ArrowException, ValueError, EOFError):
        return None


def _count(data: Any) -> int | None:
    if isinstance(data, pd.DataFrame):
        return len(data)
    if isinstance(data, pa.Table | pa.RecordBatch):
        return int(data.num_rows)
    if isinstance(data, SpooledArrow):
        return data.num_rows
    if isinstance(data, PinnedTable):
        return data.num_rows
    if table_format(data) is not None:
        return None  # not pinned: its version is the reader's to decide
    if isinstance(data, str | os.PathLike):
        return _file_rows(data)
    kind = type(data)
    if kind.__module__.startswith("polars") and kind.__name__ == "DataFrame":
        return int(data.height)  # an eager frame; a LazyFrame would have to run its query
    if isinstance(data, list | tuple):
        counts = [_count(item) for item in data]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)
    return None


def unread_labels(data: Any, start: int) -> pd.Index | None:
    """The labels of the rows of ``data`` from position ``start`` on, the way the readers
    label them, when they are known without reading the rows (None otherwise): for the
    accounting of a run that stopped before it read the whole input."""
    try:
        return _unread(data, start)
    except (InputError, OSError, pa.ArrowException, ValueError, EOFError):
        return None


def _unread(data: Any, start: int) -> pd.Index | None:
    if isinstance(data, pd.DataFrame):
        return data.index[start:]
    total = _count(data)
    if total is None:
        return None
    if isinstance(data, list | tuple):
        return _unread_items(data, start)
    if isinstance(data, str | os.PathLike):
        return _unread_files(data, start)
    # Arrow-native inputs and tables: 0-based row numbers
    return pd.RangeIndex(start, total)


def _unread_files(data: str | os.PathLike[str], start: int) -> pd.Index | None:
    """A Parquet or Avro file: 0-based row numbers; a folder or glob of them: each part's
    rows labelled ``<part>:<row>``, as ``read_paths`` labels them."""
    path = Path(data)
    if (path.is_dir() and manifests_in(path)) or is_manifest_name(path):
        return None  # a manifest's parts: left to the statement of where reading stopped
    found = expand(data)
    known = [_rows_of(p) for p in found.files]
    sizes = [size for size in known if size is not None]
    if len(sizes) != len(known):
        return None
    if found.base is None:
        return pd.RangeIndex(start, sum(sizes))
    labels: list[str] = []
    seen = 0
    for part, size in zip(found.files, sizes, strict=True):
        if seen + size > start:
            name = part_name(part, found.base)
            labels.extend(f"{name}:{row}" for row in range(max(start - seen, 0), size))
        seen += size
    return pd.Index(labels, dtype=object)


def _unread_items(items: list[Any] | tuple[Any, ...], start: int) -> pd.Index | None:
    """An iterable of tables: DataFrames keep their labels, Arrow rows are numbered on."""
    parts: list[pd.Index] = []
    seen = 0
    for item in items:
        if isinstance(item, pd.DataFrame):
            index: pd.Index = item.index
        elif isinstance(item, pa.Table | pa.RecordBatch | PinnedTable):
            rows = item.num_rows
            if rows is None:
                return None
            index = pd.RangeIndex(seen, seen + rows)
        else:
            return None
        if seen + len(index) > start:
            parts.append(index[max(start - seen, 0) :])
        seen += len(index)
    if not parts:
        return pd.Index([], dtype=object)
    return parts[0].append(parts[1:]) if len(parts) > 1 else parts[0]


def _file_rows(data: str | os.PathLike[str]) -> int | None:
    path = Path(data)
    manifests = manifests_in(path) if path.is_dir() else [path] if is_manifest_name(path) else []
    if len(manifests) == 1 and not isinstance(data, FileSubset):
        return read_manifest(manifests[0]).records
    paths = expand(data).files
    sizes = [_rows_of(p) for p in paths]
    return None if any(size is None for size in sizes) else sum(s for s in sizes if s)


def _rows_of(path: Path) -> int | None:
    """A file's rows, when its format records them (None: text, an Arrow stream)."""
    kind = format_of(path)
    if kind == "parquet":
        return int(pq.read_metadata(path).num_rows)
    if kind == "avro":
        return avro_rows(path)
    if kind == "orc":
        return orc_rows(path)
    if kind == "arrow":
        return arrow_rows(path)
    return None
