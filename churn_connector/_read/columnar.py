"""ORC and Arrow IPC files (``.orc``; ``.arrow``, ``.feather``, ``.arrows``), read by pyarrow.

Both carry their own types, so they are read like Parquet: a stripe (ORC) or a record batch
(Arrow) at a time, never whole; rows labelled by their 0-based number. An ``.arrow`` or
``.feather`` name is used for both Arrow IPC layouts: the file format (random access, which
Feather version 2 is) starts with the bytes ``ARROW1``, the stream format does not, and each
is opened by what it is. Feather version 1 (``FEA1``), a format older than Arrow IPC, is read
whole by pyarrow's feather module.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import InputError
from .arrow import arrow_to_pandas

__all__ = ["arrow_rows", "orc_rows", "read_arrow", "read_orc"]

_FILE_MAGIC = b"ARROW1"
_FEATHER_V1 = b"FEA1"


def _orc_file(path: Path) -> Any:
    # pyarrow's ORC and Feather modules load only for such a file (~3 ms at import)
    import pyarrow.orc  # noqa: PLC0415

    return pyarrow.orc.ORCFile(str(path))


def _feather_v1(path: Path) -> pa.Table:
    import pyarrow.feather  # noqa: PLC0415

    return pyarrow.feather.read_table(str(path))


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(6)


def orc_rows(path: Path) -> int:
    return int(_orc_file(path).nrows)


def arrow_rows(path: Path) -> int | None:
    """Rows of an Arrow IPC file (None for the stream format: only reading tells)."""
    head = _head(path)
    if head.startswith(_FEATHER_V1):
        return int(_feather_v1(path).num_rows)
    if not head.startswith(_FILE_MAGIC):
        return None
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        return sum(int(reader.get_batch(i).num_rows) for i in range(reader.num_record_batches))


def read_orc(
    path: Path, name: str, rows: int, columns: Sequence[str] | None
) -> Iterator[pd.DataFrame]:
    try:
        file = _orc_file(path)
        present = set(file.schema.names)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable ORC file: {exc}", path=str(path)) from None
    wanted = None if columns is None else [c for c in columns if c in present]
    schema = file.schema if wanted is None else pa.schema([file.schema.field(c) for c in wanted])

    def batches() -> Iterator[pa.RecordBatch]:
        for stripe in range(file.nstripes):
            yield file.read_stripe(stripe, columns=wanted)  # sliced to ``rows`` below

    return _frames(batches(), schema, name, path, rows, "ORC")


def read_arrow(
    path: Path, name: str, rows: int, columns: Sequence[str] | None
) -> Iterator[pd.DataFrame]:
    head = _head(path)
    try:
        if head.startswith(_FEATHER_V1):
            table = _feather_v1(path)
            schema, batches = table.schema, iter(table.to_batches(max_chunksize=rows))
        elif head.startswith(_FILE_MAGIC):
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            schema = reader.schema
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        else:
            stream = pa.ipc.open_stream(pa.memory_map(str(path)))
            schema, batches = stream.schema, iter(stream)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(
            f"{name} is not a readable Arrow IPC (Feather) file: {exc}", path=str(path)
        ) from None
    if columns is not None:
        wanted = [c for c in columns if c in schema.names]
        schema = pa.schema([schema.field(c) for c in wanted])
        batches = (b.select(wanted) for b in batches)
    return _frames(batches, schema, name, path, rows, "Arrow IPC")


def _frames(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    name: str,
    path: Path,
    rows: int,
    form: str,
) -> Iterator[pd.DataFrame]:
    offset = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except (pa.ArrowException, OSError) as exc:
            raise InputError(
                f"{name} breaks at row {offset}: {exc} (a broken {form} file); the rows before "
                "it were read",
                path=str(path),
            ) from None
        for start in range(0, batch.num_rows, rows):
            part = batch.slice(start, rows)
            yield arrow_to_pandas(part, pd.RangeIndex(offset, offset + part.num_rows))
            offset += part.num_rows
    if offset == 0:
        empty = pa.RecordBatch.from_pylist([], schema=schema)
        yield arrow_to_pandas(empty, pd.Index([], dtype=np.int64))
