"""Inputs that must be read twice (identities: an id pre-pass, then the slices).

A DataFrame, a table or a file can simply be read again. A reader is consumed by the first
read, and a lazy query or a DuckDB relation would run again (and might return other rows),
so during the first read their batches are also written to a temporary Arrow IPC file (exact
for every Arrow type, written and read batch by batch: memory stays bounded), and the second
read comes from that file. The file is deleted when the input is no longer needed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from .arrow import arrow_batches, is_one_shot


class SpooledArrow:
    """A one-shot Arrow source that can be read again (see the module docstring)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.path: str | None = None
        self._complete = False
        self._rows = 0

    @property
    def num_rows(self) -> int | None:
        """How many rows the source held, once it has been read through (else None)."""
        return self._rows if self._complete else None

    def batches(self, rows: int) -> tuple[pa.Schema | None, Iterator[pa.RecordBatch]]:
        if self._complete and self.path is not None:
            reader = pa.ipc.open_file(pa.memory_map(self.path))
            return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
        schema, batches = arrow_batches(self.source, rows)
        return schema, self._tee(schema, batches)

    def _tee(self, schema: pa.Schema | None, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        handle, path = tempfile.mkstemp(prefix="churn-connector-", suffix=".arrow")
        os.close(handle)
        self.path = path
        self._rows = 0
        weakref.finalize(self, _remove, path)
        writer: pa.ipc.RecordBatchFileWriter | None = None
        try:
            for batch in batches:
                if writer is None:
                    writer = pa.ipc.new_file(path, batch.schema)
                writer.write_batch(batch)
                self._rows += batch.num_rows
                yield batch
            if writer is None and schema is not None:
                writer = pa.ipc.new_file(path, schema)
        finally:
            if writer is not None:
                writer.close()
        self._complete = writer is not None


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def replayable(data: Any) -> Any:
    """``data`` in a form that can be read twice (generators kept, one-shot sources spooled)."""
    if isinstance(data, Iterator) and not is_one_shot(data):
        data = list(data)
    if isinstance(data, list | tuple):
        return [SpooledArrow(item) if is_one_shot(item) else item for item in data]
    return SpooledArrow(data) if is_one_shot(data) else data
