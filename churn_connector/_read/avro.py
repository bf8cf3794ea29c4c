"""Avro object container files (BigQuery's and Kafka Connect's exports), read with fastavro.

An optional extra: ``pip install "churn-connector[avro]"``. Read block by block, never whole;
rows are labelled by their 0-based number, as Parquet's are. Types keep their meaning: the
file's schema becomes an Arrow schema, so ``timestamp-micros``/``-millis`` are UTC
timestamps (``local-timestamp-*`` naive ones), ``date`` a date, ``decimal`` a decimal (which
``decimals=`` then judges), ``uuid`` text, a union with null a nullable column, records
structs, arrays lists and maps maps. A union of two other types has no single column type
and is refused with its column's name.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import InputError
from .arrow import arrow_to_pandas

INSTALL = 'pip install "churn-connector[avro]"'
_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL = {
    "timestamp-millis": pa.timestamp("ms", "UTC"),
    "timestamp-micros": pa.timestamp("us", "UTC"),
    "timestamp-nanos": pa.timestamp("ns", "UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "uuid": pa.string(),
}


class _Unsupported(Exception):
    """An Avro type with no one Arrow type (the message says which)."""


def _arrow_type(schema: Any, names: dict[str, pa.DataType]) -> pa.DataType:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in names:
            return names[schema]
        raise _Unsupported(f"unknown type {schema!r}")
    if isinstance(schema, list):
        kinds = [s for s in schema if s != "null"]
        if len(kinds) != 1:
            raise _Unsupported(f"a union of {len(kinds)} types ({schema})")
        return _arrow_type(kinds[0], names)
    logical = schema.get("logicalType")
    kind = schema.get("type")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        made: pa.DataType = (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
    elif logical in _LOGICAL:
        made = _LOGICAL[logical]
    elif kind == "record":
        made = pa.struct(
            [pa.field(f["name"], _arrow_type(f["type"], names)) for f in schema["fields"]]
        )
    elif kind == "array":
        made = pa.list_(_arrow_type(schema["items"], names))
    elif kind == "map":
        made = pa.map_(pa.string(), _arrow_type(schema["values"], names))
    elif kind == "enum":
        made = pa.string()
    elif kind == "fixed":
        made = pa.binary(int(schema["size"]))
    else:
        made = _arrow_type(kind, names)
    if kind in ("record", "enum", "fixed") and "name" in schema:
        names[schema["name"]] = made
        if "namespace" in schema:
            names[f"{schema['namespace']}.{schema['name']}"] = made
    return made


def arrow_schema(schema: dict[str, Any], name: str, path: Path) -> pa.Schema:
    """The Arrow schema of an Avro file whose top-level schema is a record."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise InputError(f"{name}: the Avro schema is not a record of columns", path=str(path))
    names: dict[str, pa.DataType] = {}
    fields = []
    for field in schema["fields"]:
        try:
            fields.append(pa.field(field["name"], _arrow_type(field["type"], names)))
        except (_Unsupported, KeyError, ValueError, TypeError) as exc:
            raise InputError(
                f"{name}: column {field.get('name')!r} has no single type: {exc}; cast it "
                "in the query that writes the file",
                path=str(path),
            ) from None
    return pa.schema(fields)


def _fastavro(name: str, path: Path) -> Any:
    try:
        import fastavro  # noqa: PLC0415 - an optional extra, needed only for Avro files
    except ImportError:
        raise InputError(
            f"{name} is an Avro file: reading Avro needs fastavro: {INSTALL}", path=str(path)
        ) from None
    return fastavro


def _batch(records: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    columns = []
    for field in schema:
        values = [r.get(field.name) for r in records]
        if pa.types.is_string(field.type):
            # uuid arrives as uuid.UUID; text stays text
            values = [v if v is None or isinstance(v, str) else str(v) for v in values]
        columns.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_avro(
    path: Path, name: str, rows: int, columns: Sequence[str] | None = None
) -> Iterator[pd.DataFrame]:
    """Frames of at most ``rows`` rows, labelled by row number from 0."""
    fastavro = _fastavro(name, path)
    offset = 0
    with path.open("rb") as fh:
        try:
            reader = fastavro.reader(fh)
        except (ValueError, EOFError, OSError, TypeError) as exc:
            raise InputError(f"{name} is not a readable Avro file: {exc}", path=str(path)) from None
        schema = arrow_schema(reader.writer_schema, name, path)
        kept = [f for f in schema if columns is None or f.name in set(columns)]
        if kept:  # none of them: keep all, so the rows still count (the reader reports it)
            schema = pa.schema(kept)
        records: list[dict[str, Any]] = []
        while True:
            try:
                record = next(reader, None)
            except (ValueError, EOFError, OSError, TypeError, KeyError) as exc:
                raise InputError(
                    f"{name} breaks at row {offset + len(records)}: {exc}; the rows before "
                    "it were read",
                    path=str(path),
                ) from None
            if record is not None:
                records.append(record)
            if records and (record is None or len(records) >= rows):
                try:
                    batch = _batch(records, schema)
                except (pa.ArrowException, ValueError, TypeError) as exc:
                    raise InputError(
                        f"{name}: rows {offset} to {offset + len(records) - 1} do not fit the "
                        f"file's schema: {exc}",
                        path=str(path),
                    ) from None
                yield arrow_to_pandas(batch, pd.RangeIndex(offset, offset + len(records)))
                offset += len(records)
                records = []
            if record is None:
                break
    if offset == 0:
        yield arrow_to_pandas(schema.empty_table(), pd.Index([], dtype=np.int64))


def _long(fh: io.BufferedIOBase) -> int:
    """One zig-zag varint (Avro's ``long``)."""
    shift = result = 0
    while True:
        byte = fh.read(1)
        if not byte:
            raise EOFError("the file ends inside a number")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7


def avro_rows(path: Path) -> int:
    """The rows of an Avro file, from its block headers (no record is decoded)."""
    with path.open("rb") as raw:
        fh = io.BufferedReader(raw)
        if fh.read(4) != b"Obj\x01":
            raise ValueError(f"{path.name} is not an Avro object container file")
        while count := _long(fh):  # the metadata map, in blocks
            if count < 0:
                _long(fh)  # the block's size in bytes
            for _ in range(abs(count) * 2):  # keys and values: bytes of a given length
                fh.seek(_long(fh), io.SEEK_CUR)
        fh.seek(16, io.SEEK_CUR)  # the sync marker
        total = 0
        while fh.peek(1)[:1]:
            total += _long(fh)
            fh.seek(_long(fh) + 16, io.SEEK_CUR)
        return total
