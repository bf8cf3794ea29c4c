"""Inputs -> a stream of slices, so memory does not grow with the input.

A slice (``read_slice.Slice``) is a DataFrame of at most ``ReadSpec.rows`` rows and what the
reader says of them: lines it could not read as written, keys named twice, a file that ends
without its newline; ``iter_slices`` yields them, ``iter_frames`` their frames alone.

Accepted (``iter_slices``): a pandas DataFrame; anything Arrow-native (``arrow``: tables,
batches, readers, polars frames and lazy frames, DuckDB relations, ADBC results); a Delta or
Iceberg table, by its path, URL or object (``tables``: read as its table, at one version,
never file by file); a query of a database (``query``: ``cc.sql(query, connection)``, its
rows streamed as Arrow batches, the connection opened by ``databases``); a file, a folder of
part files, a Redshift manifest or a glob (``files``: Parquet, CSV, TSV, NDJSON, Avro, ORC,
Arrow IPC, compressed or not; ``key=value`` folders restore their columns, ``hive``); or an
iterable of any of these. Anything else is refused with its type and what to pass.
``pinned`` resolves a table's version once per run.

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
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import ChurnConnectorError, InputError, named
from .arrow import (
    arrow_batches,
    arrow_to_pandas,
    is_arrow,
    is_one_shot,
    marked_pylist,
    one_column,
)
from .counts import row_count, unread_labels
from .databases import without_url_password
from .files import FileSubset, Parts, expand, format_of, part_name, partitions, read_paths
from .fingerprint import Fingerprinter, Source, query_of
from .names import NAME_STYLES, NameStyle, near_misses, styler, word_styler
from .ndjson import repeat_of
from .query import Bound, Query, sql
from .read_slice import Slice, as_slice
from .spool import SpooledArrow, replayable
from .tables import NOW, At, PinnedTable, pin, refuse_versions, table_format
from .text import (
    DEFAULT_TEXT,
    DTYPES,
    TEXT_ONLY,
    Format,
    TextFormat,
    TextOptions,
    header_hint,
    typed,
)

__all__ = [
    "DEFAULT_SLICE_ROWS",
    "DEFAULT_TEXT",
    "DTYPES",
    "NAME_STYLES",
    "NOW",
    "At",
    "Bound",
    "FileSubset",
    "Fingerprinter",
    "Format",
    "NameStyle",
    "PinnedTable",
    "Query",
    "ReadSpec",
    "Slice",
    "Source",
    "TextFormat",
    "TextOptions",
    "arrow_batches",
    "as_slice",
    "expand",
    "header_hint",
    "is_arrow",
    "iter_frames",
    "iter_slices",
    "marked_pylist",
    "near_misses",
    "part_name",
    "pin",
    "pinned",
    "query_of",
    "read_by_caller",
    "repeat_of",
    "replayable",
    "row_count",
    "sql",
    "styler",
    "table_format",
    "unread_labels",
    "without_url_password",
    "word_styler",
]

DEFAULT_SLICE_ROWS = 50_000
_END: Any = object()  # after the last item of the caller's iterable
_ACCEPTED_INPUTS = (
    "pass a DataFrame, a pyarrow Table/RecordBatch/RecordBatchReader, a polars or DuckDB "
    "frame (anything with __arrow_c_stream__), a Delta or Iceberg table (its path, or a "
    "DeltaTable / pyiceberg Table), a query (cc.sql(query, connection)), a path to a "
    ".parquet/.csv/.tsv/.ndjson/.avro/.orc/.arrow file or a folder of them, or an iterable of these"
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
    at: At = NOW  # the version of a Delta or Iceberg table (``tables``)
    partitioning: bool = True  # key=value folders restore their columns (``hive``)

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


def iter_slices(
    data: Any, spec: ReadSpec | None = None, *, columns: Sequence[str] | None = None
) -> Iterator[Slice]:
    """Yield the input as slices of at most ``spec.rows`` rows, each with what its reader
    says of its rows.

    ``columns`` asks for those columns only (others may come too, when the input cannot
    leave them out cheaply).
    """
    spec = spec or ReadSpec()
    wanted = spec.sources(columns) if columns is not None else None
    rename = spec.renamer()
    for part in _slices(data, spec, wanted):
        if len(part.frame.columns) > MAX_COLUMNS:
            raise InputError(
                f"the input has {len(part.frame.columns):,} columns, more than the "
                f"{MAX_COLUMNS:,} a table is validated with (BigQuery's most; each column is "
                "checked on its own): keep the columns you send, or nest the properties in "
                "one JSON column (properties)"
            )
        yield part if rename is None else part.with_frame(part.frame.rename(columns=rename))


MAX_COLUMNS = 10_000  # columns of one table: ~0.6 ms each to validate, ~6 s at the limit


def iter_frames(
    data: Any, spec: ReadSpec | None = None, *, columns: Sequence[str] | None = None
) -> Iterator[pd.DataFrame]:
    """The frames of ``iter_slices``, for a pass that needs the cells alone (the ids of an
    identities input, a count)."""
    for part in iter_slices(data, spec, columns=columns):
        yield part.frame


def pinned(data: Any, spec: ReadSpec | None = None) -> Any:
    """``data`` with its Delta or Iceberg tables pinned at the version ``spec.at`` names (the
    current one by default), so every read of a run sees that version; a version named for
    any other input is refused. Other inputs come back as they are."""
    at = (spec or ReadSpec()).at
    if table_format(data) is not None:
        return pin(data, at)
    refuse_versions(at, _what(data))
    if isinstance(data, list | tuple):
        return [pin(item) if table_format(item) is not None else item for item in data]
    return data


def _what(data: Any) -> str:
    if isinstance(data, str | os.PathLike):
        return str(data)
    return "a list of inputs" if isinstance(data, list | tuple) else f"a {_kind(data)}"


def _slices(data: Any, spec: ReadSpec, columns: Sequence[str] | None) -> Iterator[Slice]:
    if table_format(data) is not None:
        yield from _table(pin(data, spec.at), spec, columns, 0)
        return
    refuse_versions(spec.at, _what(data))
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
        if table_format(item) is not None:
            for part in _table(pin(item), spec, columns, offset):
                offset += len(part)
                yield part
            continue
        if isinstance(item, str | os.PathLike):
            yield from _paths(item, spec, columns, several=True)
            continue
        _refuse_unsupported(item, f"item {number} of the iterable")
        if not (isinstance(item, pd.DataFrame) or is_arrow(item)):
            raise InputError(
                f"item {number} of the iterable is a {_kind(item)}, which is not a table: "
                + _ACCEPTED_INPUTS
            )
        for part in _one(item, spec, columns, offset):
            offset += len(part)
            yield part


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
) -> Iterator[Slice]:
    source = os.fspath(data)
    found = expand(data, spec.text)  # a FileSubset: some of its folder's files
    parts = read_paths(
        data,
        spec.rows,
        columns=columns,
        encoding=spec.encoding,
        text=spec.text,
        partitioning=spec.partitioning,
    )
    dtypes = dict(spec.dtypes)
    rename = spec.renamer()
    if dtypes and found.files and format_of(found.files[0], spec.text) not in ("csv", "tsv"):
        _dtypes_for_partitions(dtypes, found, spec, source)
    name = os.path.basename(source)
    for part in parts:
        frame = part.frame
        if several:
            frame = frame.set_axis(pd.Index([f"{name}:{x}" for x in frame.index], dtype=object))
        if dtypes:
            renamed = frame if rename is None else frame.rename(columns=rename)
            text_columns = _text_columns(part, found, spec, dtypes)
            frame = typed(renamed, text_columns, source).set_axis(frame.columns, axis=1)
        yield part if frame is part.frame else part.with_frame(frame)


def _dtypes_for_partitions(
    dtypes: dict[str, str], found: Parts, spec: ReadSpec, source: str
) -> None:
    """``dtypes`` types text: of a file that carries types, only the columns its
    ``key=value`` folders restore."""
    layout = partitions(found) if spec.partitioning else None
    rename = spec.renamer() or (lambda c: c)
    restored = {rename(key) for key in layout.keys} if layout is not None else set()
    others = [c for c in dtypes if c not in restored]
    if others:
        what = f"{source} (restored from its folders: {', '.join(sorted(restored)) or 'none'})"
        raise InputError(
            f"{named('dtypes')} names {', '.join(map(repr, others))}: it types text (CSV/TSV "
            f"cells, partition values); {what} carries its own types (cast the columns there)",
            path=source,
        )


def _text_columns(
    part: Slice, found: Parts, spec: ReadSpec, dtypes: dict[str, str]
) -> dict[str, str]:
    """The ``dtypes`` that apply to this slice: all of them for CSV/TSV text, else those of
    the columns its folders restored (a file holding the column keeps its own type)."""
    if found.files and format_of(found.files[0], spec.text) in ("csv", "tsv"):
        return dtypes
    rename = spec.renamer() or (lambda c: c)
    restored = {rename(c) for c in part.restored}
    return {column: dtype for column, dtype in dtypes.items() if column in restored}


def _one(data: Any, spec: ReadSpec, columns: Sequence[str] | None, offset: int) -> Iterator[Slice]:
    """One DataFrame or Arrow-native source, labelled from ``offset`` (Arrow rows)."""
    if isinstance(data, pd.DataFrame):
        _refuse_dtypes(spec, "a DataFrame")
        _refuse_text(spec, "a DataFrame")
        frame = data[[c for c in columns if c in data.columns]] if columns is not None else data
        for start in range(0, len(frame), spec.rows):
            yield Slice(frame.iloc[start : start + spec.rows])
        if len(frame) == 0:
            yield Slice(frame)
        return
    _refuse_dtypes(spec, f"a {_kind(data)}")
    _refuse_text(spec, f"a {_kind(data)}")
    query = query_of(data)
    what = query.described if query is not None else f"the {_kind(data)}"
    try:
        if isinstance(data, SpooledArrow):
            schema, batches = data.batches(spec.rows)
        else:
            schema, batches = arrow_batches(data, spec.rows)  # a DuckDB relation runs here
    except Exception as exc:
        raise _read_failed(what, 0, exc) from exc
    yield from _batch_slices(schema, batches, what, columns, offset)


def _table(
    table: PinnedTable, spec: ReadSpec, columns: Sequence[str] | None, offset: int
) -> Iterator[Slice]:
    """A Delta or Iceberg table at its pinned version, labelled from ``offset`` (rows)."""
    _refuse_dtypes(spec, f"the {table.described}")
    _refuse_text(spec, f"the {table.described}")
    try:
        schema, batches = table.batches(spec.rows, columns)
    except Exception as exc:
        raise _read_failed(f"the {table.described}", 0, exc) from exc
    yield from _batch_slices(schema, batches, f"the {table.described}", columns, offset)


def _batch_slices(
    schema: pa.Schema | None,
    batches: Iterator[pa.RecordBatch],
    what: str,
    columns: Sequence[str] | None,
    offset: int,
) -> Iterator[Slice]:
    """Arrow batches as slices labelled by their row number from ``offset``; no batch
    at all: one empty frame with the schema's columns (a missing one is then reported)."""
    seen = 0
    batch: pa.RecordBatch | None = None
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except Exception as exc:  # the caller's reader, cursor or query: whatever it raises
            raise _read_failed(what, seen, exc) from exc
        if columns is not None:
            keep = [c for c in columns if c in batch.schema.names]
            batch = batch.select(keep)
        labels = pd.RangeIndex(offset + seen, offset + seen + batch.num_rows)
        yield Slice(arrow_to_pandas(batch, labels))
        seen += batch.num_rows
    if seen == 0 and batch is None and schema is not None:
        empty = pa.RecordBatch.from_pylist([], schema=schema)
        if columns is not None:
            empty = empty.select([c for c in columns if c in schema.names])
        yield Slice(arrow_to_pandas(empty, pd.Index([], dtype=np.int64)))


# ------------------------------------------------------------------------------------------
# Which inputs must be read on the caller's thread.


def read_by_caller(data: Any) -> bool:
    """True when reading ``data`` calls into the caller's objects (see the module)."""
    if isinstance(data, str | os.PathLike | pd.DataFrame | PinnedTable):
        return False  # a table is read by its library, not by the caller's code
    if isinstance(data, SpooledArrow):
        return data.num_rows is None  # not read through yet: the source itself is read
    if is_arrow(data):
        return is_one_shot(data)
    if isinstance(data, list | tuple):
        return any(read_by_caller(item) for item in data)
    return True  # an iterator, a generator, any other iterable: the caller's code
