"""How many rows an input holds, when that is known without reading it (for progress totals).

Known up front: a DataFrame, an Arrow table or batch, a polars DataFrame, a Parquet file or a
folder (or glob) of Parquet parts (from their footers), Avro files (from their block
headers), a Redshift unload whose manifest is verbose (its ``record_count``), a spooled
stream once it has been read, and a list of these. Not known: CSV and NDJSON files (only
reading them counts their rows), readers, lazy queries, DuckDB relations and generators
(counting would consume or re-run them). ``None`` then; a hint never raises: a broken input
is reported by the read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._exceptions import InputError
from .avro import avro_rows
from .files import expand, format_of
from .manifest import is_manifest_name, manifests_in, read_manifest
from .spool import SpooledArrow


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
    if isinstance(data, str | os.PathLike):
        return _file_rows(data)
    kind = type(data)
    if kind.__module__.startswith("polars") and kind.__name__ == "DataFrame":
        return int(data.height)  # an eager frame; a LazyFrame would have to run its query
    if isinstance(data, list | tuple):
        counts = [_count(item) for item in data]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)
    return None


def _file_rows(data: str | os.PathLike[str]) -> int | None:
    path = Path(data)
    manifests = manifests_in(path) if path.is_dir() else [path] if is_manifest_name(path) else []
    if len(manifests) == 1:
        return read_manifest(manifests[0]).records
    paths = expand(os.fspath(data)).files
    kinds = {format_of(p) for p in paths}
    if kinds == {"parquet"}:
        return sum(int(pq.read_metadata(p).num_rows) for p in paths)
    if kinds == {"avro"}:
        return sum(avro_rows(p) for p in paths)
    return 0 if not paths else None
