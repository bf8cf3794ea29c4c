"""Inputs -> a stream of DataFrame slices, so memory does not grow with the input.

Accepted: a pandas DataFrame, a pyarrow Table, a path to ``.parquet``, ``.csv`` or ``.ndjson``
(``.jsonl``), or an iterable of DataFrames. Row labels: a DataFrame keeps its own index; files
and tables are labelled by their 0-based row number.

Readers never change a value's meaning: Arrow integers stay integers when nulls are present
(nullable dtypes), NDJSON values keep their JSON types (integers beyond 64 bits included, so
that validation can refuse them), and CSV cells, which carry no types, stay text: "02139",
"+14155550100" and "1.10" are sent as written. Only the ``*_opted_in``/``*_verified`` flag
columns read the words true/false as booleans. Use Parquet or NDJSON to send typed values.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._exceptions import InputError

DEFAULT_SLICE_ROWS = 50_000
# orjson reads integers beyond 64 bits as floats; such lines are parsed exactly instead
_LONG_INT = re.compile(rb"[0-9]{19,}")

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


def arrow_to_pandas(batch: pa.RecordBatch | pa.Table, offset: int) -> pd.DataFrame:
    frame: pd.DataFrame = batch.to_pandas(
        types_mapper=_ARROW_NULLABLE.get, maps_as_pydicts="strict"
    )
    return frame.set_axis(pd.RangeIndex(offset, offset + len(frame)), axis=0)


def _slices(df: pd.DataFrame, rows: int) -> Iterator[pd.DataFrame]:
    for start in range(0, len(df), rows):
        yield df.iloc[start : start + rows]
    if len(df) == 0:
        yield df


def _read_parquet(path: Path, rows: int, columns: Sequence[str] | None) -> Iterator[pd.DataFrame]:
    offset = 0
    with pq.ParquetFile(path) as file:
        if columns is not None:
            present = set(file.schema_arrow.names)
            columns = [c for c in columns if c in present]
        for batch in file.iter_batches(batch_size=rows, columns=columns):
            yield arrow_to_pandas(batch, offset)
            offset += batch.num_rows


def _csv_flag(text: Any) -> Any:
    if isinstance(text, str) and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def _read_csv(path: Path, rows: int, text_booleans: Sequence[str]) -> Iterator[pd.DataFrame]:
    # only empty cells are null: "NA" or "null" can be somebody's id or event name
    reader = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""], chunksize=rows)
    with reader:
        for chunk in reader:
            for column in chunk.columns:
                if column in text_booleans:
                    # CSV has no booleans: only the words true/false are read as such
                    cells = [_csv_flag(v) for v in chunk[column].tolist()]
                    chunk[column] = pd.Series(cells, index=chunk.index, dtype=object)
            yield chunk


def _read_ndjson(path: Path, rows: int) -> Iterator[pd.DataFrame]:
    offset = 0
    records: list[dict[str, Any]] = []
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = _exact_json(line) if _LONG_INT.search(line) else orjson.loads(line)
            except (orjson.JSONDecodeError, ValueError) as exc:
                raise InputError(
                    f"{path.name} line {number} is not valid JSON: {exc}",
                    path=str(path),
                    line=number,
                ) from None
            if not isinstance(record, dict):
                raise InputError(
                    f"{path.name} line {number} is not a JSON object", path=str(path), line=number
                )
            records.append(record)
            if len(records) >= rows:
                yield _records_frame(records, offset)
                offset += len(records)
                records = []
    if records or offset == 0:
        yield _records_frame(records, offset)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _exact_json(line: bytes) -> Any:
    return json.loads(line, parse_constant=_refuse_constant)


def _records_frame(records: list[dict[str, Any]], offset: int) -> pd.DataFrame:
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    # object columns keep each JSON value's own type (no int -> float promotion on nulls)
    index = pd.RangeIndex(offset, offset + len(records))
    data = {c: pd.Series([r.get(c) for r in records], index=index, dtype=object) for c in columns}
    return pd.DataFrame(data, index=index)


def iter_frames(
    data: Any,
    rows: int = DEFAULT_SLICE_ROWS,
    *,
    columns: Sequence[str] | None = None,
    text_booleans: Sequence[str] = (),
) -> Iterator[pd.DataFrame]:
    """Yield the input as DataFrame slices of at most ``rows`` rows.

    ``columns`` asks for those columns only (others may come too, when the input cannot
    leave them out cheaply); ``text_booleans`` names CSV columns whose words true/false
    are read as booleans.
    """
    if columns is not None:
        yield from _projected(data, rows, columns)
        return
    if isinstance(data, pd.DataFrame):
        yield from _slices(data, rows)
    elif isinstance(data, pa.Table):
        offset = 0
        for batch in data.to_batches(max_chunksize=rows):
            yield arrow_to_pandas(batch, offset)
            offset += batch.num_rows
        if data.num_rows == 0:
            yield arrow_to_pandas(data, 0)
    elif isinstance(data, str | os.PathLike):
        path = Path(data)
        if not path.is_file():
            raise InputError(f"no such file: {path}", path=str(path))
        suffix = path.suffix.lower()
        if suffix in (".parquet", ".pq"):
            yield from _read_parquet(path, rows, None)
        elif suffix == ".csv":
            yield from _read_csv(path, rows, text_booleans)
        elif suffix in (".ndjson", ".jsonl"):
            yield from _read_ndjson(path, rows)
        else:
            raise InputError(
                f"unsupported file type {suffix!r}: use .parquet, .csv or .ndjson", path=str(path)
            )
    elif isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        for item in data:
            if not isinstance(item, pd.DataFrame):
                raise InputError(
                    f"an iterable input must yield DataFrames, got {type(item).__name__}"
                )
            yield from _slices(item, rows)
    else:
        raise InputError(
            f"unsupported input {type(data).__name__}: pass a DataFrame, a pyarrow Table, "
            "a .parquet/.csv/.ndjson path or an iterable of DataFrames"
        )


def _projected(data: Any, rows: int, columns: Sequence[str]) -> Iterator[pd.DataFrame]:
    """The slices of ``data`` with only ``columns`` where that saves reading the rest."""
    if isinstance(data, pd.DataFrame):
        yield from _slices(data[[c for c in columns if c in data.columns]], rows)
    elif isinstance(data, pa.Table):
        keep = [c for c in columns if c in data.column_names]
        yield from iter_frames(data.select(keep), rows)
    elif isinstance(data, str | os.PathLike) and Path(data).suffix.lower() in (".parquet", ".pq"):
        if not Path(data).is_file():
            raise InputError(f"no such file: {data}", path=str(data))
        yield from _read_parquet(Path(data), rows, columns)
    else:
        yield from iter_frames(data, rows)
