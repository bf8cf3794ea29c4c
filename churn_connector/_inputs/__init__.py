"""Inputs -> a stream of DataFrame slices, so memory does not grow with the input.

Accepted (``iter_frames``): a pandas DataFrame; anything Arrow-native (``arrow``: tables,
batches, readers, polars frames and lazy frames, DuckDB relations, ADBC results); a file, a
folder of part files, a Redshift manifest or a glob (``files``: Parquet, CSV, TSV, NDJSON,
Avro, compressed or not); or an iterable of any of these. Anything else is refused with its
type and what to pass.

Row labels: a DataFrame keeps its own index; Arrow inputs are labelled by their 0-based row
number; files as ``files`` says (CSV/NDJSON by line number). ``rename`` maps source column
names to ours; ``dtypes`` types CSV/TSV text cells (``cells``); ``text`` says how text
exports are laid out (``text.TextFormat``: delimiter, quote, escape, null markers, header).

Readers never change a value's meaning: Arrow integers stay integers when nulls are present,
NDJSON values keep their JSON types, and CSV cells, which carry no types, stay text unless
``dtypes`` says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .._exceptions import InputError
from .arrow import arrow_batches, arrow_to_pandas, is_arrow
from .cells import typed
from .files import expand, format_of, read_paths
from .length import row_count
from .spool import SpooledArrow, replayable
from .text import DEFAULT_TEXT, TEXT_ONLY, TextFormat, text_format

__all__ = [
    "DEFAULT_SLICE_ROWS",
    "ReadSpec",
    "TextFormat",
    "iter_frames",
    "replayable",
    "row_count",
    "text_format",
]

DEFAULT_SLICE_ROWS = 50_000
_ACCEPTED_INPUTS = (
    "pass a DataFrame, a pyarrow Table/RecordBatch/RecordBatchReader, a polars or DuckDB "
    "frame (anything with __arrow_c_stream__), a path to a .parquet/.csv/.tsv/.ndjson/.avro file "
    "or a folder of them, or an iterable of these"
)


@dataclass(frozen=True)
class ReadSpec:
    """How an input is read: slice size, source -> our column names, CSV cell types, the
    layout of text files."""

    rows: int = DEFAULT_SLICE_ROWS
    rename: tuple[tuple[str, str], ...] = ()
    dtypes: tuple[tuple[str, str], ...] = ()
    encoding: str = "utf-8"
    text: TextFormat = DEFAULT_TEXT

    def sources(self, columns: Sequence[str]) -> list[str]:
        """The source names that may hold ``columns`` (for reading only those)."""
        wanted = set(columns)
        return [*columns, *(src for src, dest in self.rename if dest in wanted)]


def iter_frames(
    data: Any, spec: ReadSpec | None = None, *, columns: Sequence[str] | None = None
) -> Iterator[pd.DataFrame]:
    """Yield the input as DataFrame slices of at most ``spec.rows`` rows.

    ``columns`` asks for those columns only (others may come too, when the input cannot
    leave them out cheaply).
    """
    spec = spec or ReadSpec()
    wanted = spec.sources(columns) if columns is not None else None
    rename = dict(spec.rename)
    for frame in _frames(data, spec, wanted):
        yield frame.rename(columns=rename) if rename else frame


def _frames(data: Any, spec: ReadSpec, columns: Sequence[str] | None) -> Iterator[pd.DataFrame]:
    if isinstance(data, str | os.PathLike):
        yield from _paths(data, spec, columns, several=False)
        return
    _refuse_unsupported(data, "input")
    if isinstance(data, pd.DataFrame) or is_arrow(data) or isinstance(data, SpooledArrow):
        yield from _one(data, spec, columns, 0)
        return
    offset = 0
    for number, item in enumerate(data):
        if isinstance(item, str | os.PathLike):
            yield from _paths(item, spec, columns, several=True)
            continue
        _refuse_unsupported(item, f"item {number} of the iterable")
        if not (isinstance(item, pd.DataFrame) or is_arrow(item)):
            raise InputError(
                f"item {number} of the iterable is a {_kind(item)}, which is not a table: "
                + _ACCEPTED_INPUTS
            )
        for frame in _one(item, spec, columns, offset):
            offset += len(frame)
            yield frame


def _kind(data: Any) -> str:
    kind = type(data)
    module = kind.__module__.split(".")[0]
    return kind.__name__ if module == "builtins" else f"{module} {kind.__name__}"


def _refuse_unsupported(data: Any, what: str) -> None:
    if isinstance(data, pd.Series):
        raise InputError(
            f"the {what} is a pandas Series (one column): pass the whole table as a "
            "DataFrame (series.to_frame() if it really is one column)"
        )
    if isinstance(data, dict):
        raise InputError(f"the {what} is a dict: pass pd.DataFrame(data) (or a list of tables)")
    if isinstance(data, bytes | bytearray):
        raise InputError(f"the {what} is bytes: write them to a file and pass its path")
    if isinstance(data, pd.DataFrame) or is_arrow(data) or isinstance(data, SpooledArrow):
        return
    if not isinstance(data, Iterable):
        raise InputError(f"unsupported input: the {what} is a {_kind(data)}: {_ACCEPTED_INPUTS}")


def _refuse_dtypes(spec: ReadSpec, source: str) -> None:
    if spec.dtypes:
        raise InputError(
            f"dtypes= types the text cells of CSV/TSV files; {source} carries its own types "
            "(cast the columns there)"
        )


def _refuse_text(spec: ReadSpec, source: str) -> None:
    given = spec.text.given((*TEXT_ONLY, "format"))
    if given:
        raise InputError(
            f"{', '.join(given)}: for reading files; {source} is a table already, with its "
            "own columns and nulls (drop the option)"
        )


def _paths(
    data: str | os.PathLike[str], spec: ReadSpec, columns: Sequence[str] | None, *, several: bool
) -> Iterator[pd.DataFrame]:
    frames = read_paths(
        os.fspath(data), spec.rows, columns=columns, encoding=spec.encoding, text=spec.text
    )
    dtypes = dict(spec.dtypes)
    files = expand(os.fspath(data), spec.text).files
    if dtypes and files and format_of(files[0], spec.text) not in ("csv", "tsv"):
        _refuse_dtypes(spec, str(data))
    name = os.path.basename(os.fspath(data))
    for frame in frames:
        if several:
            frame = frame.set_axis(pd.Index([f"{name}:{x}" for x in frame.index], dtype=object))
        if dtypes:
            renamed = frame.rename(columns=dict(spec.rename))
            frame = typed(renamed, dtypes, str(data)).set_axis(frame.columns, axis=1)
        yield frame


def _one(
    data: Any, spec: ReadSpec, columns: Sequence[str] | None, offset: int
) -> Iterator[pd.DataFrame]:
    """One DataFrame or Arrow-native source, labelled from ``offset`` (Arrow rows)."""
    if isinstance(data, pd.DataFrame):
        _refuse_dtypes(spec, "a DataFrame")
        _refuse_text(spec, "a DataFrame")
        frame = data[[c for c in columns if c in data.columns]] if columns is not None else data
        for start in range(0, len(frame), spec.rows):
            yield frame.iloc[start : start + spec.rows]
        if len(frame) == 0:
            yield frame
        return
    _refuse_dtypes(spec, f"a {_kind(data)}")
    _refuse_text(spec, f"a {_kind(data)}")
    if isinstance(data, SpooledArrow):
        schema, batches = data.batches(spec.rows)
    else:
        schema, batches = arrow_batches(data, spec.rows)
    seen = 0
    batch: pa.RecordBatch | None = None
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"reading the {_kind(data)} failed after {seen} rows: {exc}") from None
        if columns is not None:
            keep = [c for c in columns if c in batch.schema.names]
            batch = batch.select(keep)
        yield arrow_to_pandas(batch, pd.RangeIndex(offset + seen, offset + seen + batch.num_rows))
        seen += batch.num_rows
    if seen == 0 and batch is None and schema is not None:
        empty = pa.RecordBatch.from_pylist([], schema=schema)
        if columns is not None:
            empty = empty.select([c for c in columns if c in schema.names])
        yield arrow_to_pandas(empty, pd.Index([], dtype=np.int64))
