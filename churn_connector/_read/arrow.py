"""Arrow-native inputs -> record batches -> pandas slices that keep every value's meaning.

Accepted: ``pyarrow.Table``, ``RecordBatch`` and ``RecordBatchReader``; a polars ``LazyFrame``
(run on its streaming engine, batch by batch); anything that exports the Arrow PyCapsule
stream interface (``__arrow_c_stream__``: polars DataFrames, DuckDB relations, ADBC results).
Streams are read once, in batches, never materialised whole. A pandas DataFrame also has
``__arrow_c_stream__`` in pandas 3, but exporting it would lose its index (the row labels),
so the caller checks for pandas first.

Conversion keeps meaning: nullable integers stay integers, time zones stay on timestamps
wherever they sit (structs, maps and lists included), view types (polars' ``string_view``)
become their classic layouts, decimals become ``Decimal`` objects with their scale; ``pylist``
gives maps as dicts on every supported pyarrow.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd
import pyarrow as pa

from .._json import RepeatedKey
from .query import Query

# Array.to_pylist(maps_as_pydicts=...) came with pyarrow 20 (apache/arrow#45471); before it,
# maps are lists of (key, value) pairs and ``pylist`` makes them dicts itself
_NATIVE_PYDICTS = int(pa.__version__.split(".")[0]) >= 20
_ARROW_NULLABLE = {
    pa.int8(): pd.Int8Dtype(),
    pa.int16(): pd.Int16Dtype(),
    pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(),
    pa.uint8(): pd.UInt8Dtype(),
    pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(),
    pa.uint64(): pd.UInt64Dtype(),
    pa.bool_(): pd.BooleanDtype(),
}


def _field(field: pa.Field) -> pa.Field:
    return field.with_type(_classic(field.type))


def _classic(t: pa.DataType) -> pa.DataType:
    """View types -> their classic layouts, which ``to_pandas`` converts everywhere."""
    types = pa.types
    if types.is_string_view(t):
        return pa.large_string()
    if types.is_binary_view(t):
        return pa.large_binary()
    if types.is_list_view(t) or types.is_large_list_view(t) or types.is_large_list(t):
        return pa.large_list(_field(t.value_field))
    if types.is_list(t):
        return pa.list_(_field(t.value_field))
    if types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field), t.list_size)
    if types.is_struct(t):
        return pa.struct([_field(f) for f in t])
    if types.is_map(t):
        return pa.map_(_field(t.key_field), _field(t.item_field))
    if types.is_dictionary(t):
        return pa.dictionary(t.index_type, _classic(t.value_type), t.ordered)
    return t


def _has_map(t: pa.DataType) -> bool:
    types = pa.types
    if types.is_map(t):
        return True
    if types.is_struct(t):
        return any(_has_map(f.type) for f in t)
    if types.is_dictionary(t):
        return _has_map(t.value_type)
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return _has_map(t.value_type)
    if types.is_list_view(t) or types.is_large_list_view(t):
        return _has_map(t.value_type)
    return False


class _Repeated(KeyError):
    """A map holds ``key`` twice."""

    def __init__(self, key: Any) -> None:
        super().__init__(f"a map holds the key {key!r} twice")
        self.key = key


def _dicts(value: Any, t: pa.DataType, *, mark: bool = False) -> Any:
    """A plain ``to_pylist`` value of type ``t`` with its maps' pairs made dicts; a map that
    repeats a key raises, or with ``mark`` is a ``RepeatedKey`` in its place."""
    if value is None:
        return None
    types = pa.types
    if types.is_map(t):
        made: dict[Any, Any] = {}
        for key, item in value:
            if key in made:
                if mark:
                    return RepeatedKey(key)
                raise _Repeated(key)
            made[key] = _dicts(item, t.item_type, mark=mark)
        return made
    if types.is_struct(t):
        return {f.name: _dicts(value[f.name], f.type, mark=mark) for f in t}
    if types.is_dictionary(t):
        return _dicts(value, t.value_type, mark=mark)
    if isinstance(value, list):  # the list types
        return [_dicts(v, t.value_type, mark=mark) for v in value]
    return value


def pylist(arr: pa.Array) -> list[Any]:
    """``arr.to_pylist(maps_as_pydicts="strict")`` on every supported pyarrow: maps as dicts
    at any depth; a map that repeats a key raises ``KeyError`` (pyarrow 20+ raises a
    ``ValueError`` when the map sits in a struct)."""
    if _NATIVE_PYDICTS:
        return arr.to_pylist(maps_as_pydicts="strict")  # type: ignore[no-any-return]
    values: list[Any] = arr.to_pylist()
    if not _has_map(arr.type):
        return values
    return [_dicts(v, arr.type) for v in values]


def _zoned_in_list(t: pa.DataType, *, in_list: bool = False) -> bool:
    """A tz-aware timestamp inside a list (to_pandas would make it naive datetime64)."""
    types = pa.types
    if types.is_timestamp(t):
        return in_list and t.tz is not None
    if types.is_struct(t):
        return any(_zoned_in_list(f.type, in_list=in_list) for f in t)
    if types.is_map(t):
        return _zoned_in_list(t.item_type, in_list=in_list)
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return _zoned_in_list(t.value_type, in_list=True)
    return False


def arrow_to_pandas(batch: pa.RecordBatch | pa.Table, index: pd.Index) -> pd.DataFrame:
    """One batch as a DataFrame labelled by ``index``.

    Struct columns (a ``properties`` struct, say) stay Arrow-backed (``pd.ArrowDtype``):
    the events path reads them column-wise, and anything else sees the same dicts when it
    iterates them.
    """
    schema = pa.schema([_field(f) for f in batch.schema], metadata=batch.schema.metadata)
    if not schema.equals(batch.schema):
        batch = batch.cast(schema)
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    structs = {
        i: batch.column(i)
        for i, f in enumerate(batch.schema)
        if pa.types.is_struct(f.type) and not _zoned_in_list(f.type)
    }
    rest = [i for i in range(batch.num_columns) if i not in structs]
    options: dict[str, Any] = {"types_mapper": _ARROW_NULLABLE.get, "maps_as_pydicts": "strict"}
    frame, by_cell = _converted(batch, rest, options)
    for j, i in enumerate(rest):
        if i not in by_cell and _zoned_in_list(batch.schema.field(i).type):
            # per column: timestamp_as_object on the whole batch would also turn top-level
            # timestamp columns into objects
            column = batch.column(i).to_pandas(timestamp_as_object=True, **options)
            frame.isetitem(j, column.to_numpy(dtype=object))
    for i, column in structs.items():
        values: Any = pd.arrays.ArrowExtensionArray(column)
        if _has_map(column.type) and _repeats_a_key(column):
            # Python dicts for this batch, a repeating map marked where it sits: pandera
            # reports a struct cell with its maps as pairs, which would hide the fault
            values = _map_cells(column)
        frame.insert(i, batch.schema.field(i).name, pd.Series(values, index=frame.index))
    return frame.set_axis(index, axis=0)


def _converted(
    batch: pa.Table, rest: list[int], options: dict[str, Any]
) -> tuple[pd.DataFrame, set[int]]:
    """The ``rest`` columns as a DataFrame, and those converted cell by cell: when a map
    repeats a key (which pyarrow's strict conversion refuses for the whole batch), the
    columns holding maps are converted per cell and the repeating cells become
    ``RepeatedKey``, so validation refuses those rows by name and keeps the others."""
    try:
        return batch.select(rest).to_pandas(**options), set()
    except pa.ArrowException:
        pass
    maps = [i for i in rest if _has_map(batch.schema.field(i).type)]
    others = [i for i in rest if i not in maps]
    frame = (
        batch.select(others).to_pandas(**options)
        if others
        else pd.DataFrame(index=pd.RangeIndex(batch.num_rows))
    )
    for i in maps:
        cells = _map_cells(batch.column(i))
        frame.insert(rest.index(i), batch.schema.field(i).name, pd.Series(cells, dtype=object))
    return frame, set(maps)


def _map_cells(column: pa.ChunkedArray) -> list[Any]:
    # to_pylist gives maps as (key, value) pairs: nothing is lost before they are looked at
    return [_dicts(value, column.type, mark=True) for value in column.to_pylist()]


def _repeats_a_key(column: pa.ChunkedArray) -> bool:
    try:
        pylist(column.combine_chunks())
    except (KeyError, ValueError):
        return True
    return False


def marked_pylist(arr: pa.Array) -> list[Any]:
    """``pylist(arr)``, except that a map repeating a key is a ``RepeatedKey`` in its place
    (at any depth), for validation to refuse that row by name."""
    try:
        return pylist(arr)
    except (KeyError, ValueError):  # pyarrow 20+ raises ValueError for a map in a struct
        pass
    return [_dicts(value, arr.type, mark=True) for value in arr.to_pylist()]


def _rechunk(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)


def _is_polars_lazy(data: Any) -> bool:
    kind = type(data)
    return kind.__module__.startswith("polars") and kind.__name__ == "LazyFrame"


# one column where a table is expected, by (module, type): what turns it into a table.
# Each of these exports __arrow_c_stream__ as a plain array stream, which Arrow's table
# reader would refuse with its own error (ArrowInvalid), naming neither the type nor the fix
_ONE_COLUMN = {
    ("pandas", "Series"): ("pandas Series", "series.to_frame()"),
    ("polars", "Series"): ("polars Series", "series.to_frame()"),
    ("pyarrow", "Array"): ("pyarrow Array", "pa.table({'name': array})"),
    ("pyarrow", "ChunkedArray"): ("pyarrow ChunkedArray", "pa.table({'name': array})"),
    ("numpy", "ndarray"): ("numpy array", "pd.DataFrame(array, columns=[...])"),
}


def one_column(data: Any) -> tuple[str, str] | None:
    """(its name, the fix) when ``data`` is a column or array rather than a table."""
    for kind in type(data).__mro__:
        found = _ONE_COLUMN.get((kind.__module__.split(".")[0], kind.__name__))
        if found is not None:
            return found
    return None


def is_arrow(data: Any) -> bool:
    """True for inputs this module reads (pandas DataFrames excluded: see the docstring;
    and one column, which is refused before it is read: :func:`one_column`)."""
    if isinstance(data, pd.DataFrame) or one_column(data) is not None:
        return False
    return (
        isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader | Query)
        or _is_polars_lazy(data)
        or hasattr(data, "__arrow_c_stream__")
    )


def is_one_shot(data: Any) -> bool:
    """A source that cannot be read twice the same way: a reader (consumed once), a lazy
    query, a DuckDB relation or a database query (each read runs the query again)."""
    if isinstance(data, pa.Table | pa.RecordBatch | pd.DataFrame):
        return False
    module = type(data).__module__
    if module.startswith("polars") and type(data).__name__ == "DataFrame":
        return False  # an eager frame: exporting it twice gives the same rows
    return is_arrow(data)


def arrow_batches(data: Any, rows: int) -> tuple[pa.Schema | None, Iterator[pa.RecordBatch]]:
    """(schema when known up front, batches of at most ``rows``) of an Arrow-native input."""
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches(max_chunksize=rows))
    if isinstance(data, pa.RecordBatch):
        return data.schema, _rechunk([data], rows)
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, _rechunk(data, rows)
    if isinstance(data, Query):
        return data.batches(rows)  # the query runs here, once
    if _is_polars_lazy(data):
        return None, _lazy_batches(data, rows)
    reader = pa.RecordBatchReader.from_stream(data)  # runs a DuckDB query: once only
    return reader.schema, _rechunk(reader, rows)


def _lazy_batches(frame: Any, rows: int) -> Iterator[pa.RecordBatch]:
    # the streaming engine hands over polars frames of about ``rows`` rows, in order
    seen = False
    for part in frame.collect_batches(chunk_size=rows, maintain_order=True):
        for batch in _rechunk(pa.RecordBatchReader.from_stream(part), rows):
            seen = True
            yield batch
    if not seen:  # no rows: the columns still matter (a missing one is reported)
        schema = pa.RecordBatchReader.from_stream(frame.head(0).collect()).schema
        yield pa.RecordBatch.from_pylist([], schema=schema)
