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

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._core.exceptions import ChurnConnectorError, InputError
from .._core.words import named
from .arrow import arrow_batches, arrow_to_pandas, is_arrow, is_one_shot, one_column
from .avro import avro_rows
from .files import expand, format_of, part_name, read_paths
from .manifest import is_manifest_name, manifests_in, read_manifest
from .names import NameStyle, styler
from .spool import SpooledArrow, replayable
from .text import DEFAULT_TEXT, TEXT_ONLY, TextFormat, typed

__all__ = [
    "DEFAULT_SLICE_ROWS",
    "ReadSpec",
    "TextFormat",
    "iter_frames",
    "replayable",
    "row_count",
    "unread_labels",
]

DEFAULT_SLICE_ROWS = 50_000
_END: Any = object()  # after the last item of the caller's iterable
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
    style: NameStyle | None = None  # the other columns' names (``_names``), when asked

    def sources(self, columns: Sequence[str]) -> list[str] | None:
        """The source names that may hold ``columns`` (for reading only those); None when
        any might (a style renames names not known up front)."""
        if self.style is not None:
            return None
        wanted = set(columns)
        return [*columns, *(src for src, dest in self.rename if dest in wanted)]

    def renamer(self) -> Callable[[Any], Any] | None:
        """Source column name -> ours (None: names stay): ``rename`` first, then the style."""
        pairs = dict(self.rename)
        if self.style is None:
            return (lambda c: pairs.get(c, c)) if pairs else None
        restyle = styler(self.style)
        return lambda c: pairs[c] if c in pairs else restyle(c) if isinstance(c, str) else c


def iter_frames(
    data: Any, spec: ReadSpec | None = None, *, columns: Sequence[str] | None = None
) -> Iterator[pd.DataFrame]:
    """Yield the input as DataFrame slices of at most ``spec.rows`` rows.

    ``columns`` asks for those columns only (others may come too, when the input cannot
    leave them out cheaply).
    """
    spec = spec or ReadSpec()
    wanted = spec.sources(columns) if columns is not None else None
    rename = spec.renamer()
    for frame in _frames(data, spec, wanted):
        yield frame if rename is None else frame.rename(columns=rename)


def _frames(data: Any, spec: ReadSpec, columns: Sequence[str] | None) -> Iterator[pd.DataFrame]:
    if isinstance(data, str | os.PathLike):
        yield from _paths(data, spec, columns, several=False)
        return
    _refuse_unsupported(data, "input")
    if isinstance(data, pd.DataFrame) or is_arrow(data) or isinstance(data, SpooledArrow):
        yield from _one(data, spec, columns, 0)
        return
    offset = 0
    items = iter(data)
    for number in itertools.count():
        item = _next_of_caller(items, offset)
        if item is _END:
            return
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


def _next_of_caller(items: Iterator[Any], rows_read: int) -> Any:
    """The next item of the caller's iterable (``_END`` after the last); whatever its code
    raises is an InputError that says how far reading got (a send stopped by it carries
    what was delivered)."""
    try:
        return next(items, _END)
    except Exception as exc:
        raise _read_failed("the input's iterable", rows_read, exc) from exc


def _read_failed(what: str, seen: int, exc: Exception) -> Exception:
    if isinstance(exc, ChurnConnectorError):
        return exc
    name = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
    said = str(exc) if isinstance(exc, pa.ArrowException | OSError) else f"it raised {name}: {exc}"
    # an I/O error part way (a network file system, an object store) may pass; a file that
    # is missing or forbidden, or broken content, needs a change first
    passing = isinstance(exc, OSError) and not isinstance(exc, _LASTING_OS_ERRORS)
    return InputError(f"reading {what} failed after {seen:,} rows: {said}", retryable=passing)


_LASTING_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def _kind(data: Any) -> str:
    kind = type(data)
    module = kind.__module__.split(".")[0]
    return kind.__name__ if module == "builtins" else f"{module} {kind.__name__}"


def _refuse_unsupported(data: Any, what: str) -> None:
    column = one_column(data)
    if column is not None:
        name, fix = column
        raise InputError(
            f"the {what} is a {name} (one column): pass the whole table as a DataFrame "
            f"({fix} if it really is one column)"
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
            f"{named('dtypes')} is for the text cells of CSV/TSV files; {source} carries its "
            "own types (cast the columns there)"
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
            rename = spec.renamer()
            renamed = frame if rename is None else frame.rename(columns=rename)
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
    seen = 0
    try:
        if isinstance(data, SpooledArrow):
            schema, batches = data.batches(spec.rows)
        else:
            schema, batches = arrow_batches(data, spec.rows)  # a DuckDB relation runs here
    except Exception as exc:
        raise _read_failed(f"the {_kind(data)}", seen, exc) from exc
    batch: pa.RecordBatch | None = None
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except Exception as exc:  # the caller's reader, cursor or query: whatever it raises
            raise _read_failed(f"the {_kind(data)}", seen, exc) from exc
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


# ------------------------------------------------------------------------------------------
# Which inputs must be read on the caller's thread.


def read_by_caller(data: Any) -> bool:
    """True when reading ``data`` calls into the caller's objects (see the module)."""
    if isinstance(data, str | os.PathLike | pd.DataFrame):
        return False
    if isinstance(data, SpooledArrow):
        return data.num_rows is None  # not read through yet: the source itself is read
    if is_arrow(data):
        return is_one_shot(data)
    if isinstance(data, list | tuple):
        return any(read_by_caller(item) for item in data)
    return True  # an iterator, a generator, any other iterable: the caller's code


# ------------------------------------------------------------------------------------------
# How many rows an input holds, when that is known without reading it (for progress totals).


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
    # Arrow-native inputs: 0-based row numbers
    return pd.RangeIndex(start, total)


def _unread_files(data: str | os.PathLike[str], start: int) -> pd.Index | None:
    """A Parquet or Avro file: 0-based row numbers; a folder or glob of them: each part's
    rows labelled ``<part>:<row>``, as ``read_paths`` labels them."""
    path = Path(data)
    if (path.is_dir() and manifests_in(path)) or is_manifest_name(path):
        return None  # a manifest's parts: left to the statement of where reading stopped
    found = expand(os.fspath(data))
    kinds = {format_of(p) for p in found.files}
    if kinds - {"parquet", "avro"}:
        return None
    sizes = [
        int(pq.read_metadata(p).num_rows) if format_of(p) == "parquet" else avro_rows(p)
        for p in found.files
    ]
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
        elif isinstance(item, pa.Table | pa.RecordBatch):
            index = pd.RangeIndex(seen, seen + item.num_rows)
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
    if len(manifests) == 1:
        return read_manifest(manifests[0]).records
    paths = expand(os.fspath(data)).files
    kinds = {format_of(p) for p in paths}
    if kinds == {"parquet"}:
        return sum(int(pq.read_metadata(p).num_rows) for p in paths)
    if kinds == {"avro"}:
        return sum(avro_rows(p) for p in paths)
    return 0 if not paths else None
