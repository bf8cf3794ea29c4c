"""One partition, sent from inside a Spark task: Arrow batches in, a recorded send out.

Spark hands a task its rows as ``pyarrow.RecordBatch``es (the data source's Arrow writer and
``mapInArrow`` alike), with their types intact: a nullable bigint stays ``int64`` and a
timestamp arrives as ``timestamp[us, tz=<session time zone>]``, the same instant. They go to
the package's Arrow input path unchanged, as one ``RecordBatchReader`` per partition (one
stream: identities spool it to a temporary file for their second read, so memory stays
bounded), after Spark's batches of at most 10,000 rows are combined into slices of
``slice_rows``: validation has a fixed cost per slice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import orjson
import pandas as pd
import pyarrow as pa
from pyspark import TaskContext

from .._read import DEFAULT_SLICE_ROWS
from .._tasks import Recorded, record
from .settings import ORDER_COLUMN, SparkSettings


@dataclass(frozen=True)
class Where:
    """The task that sends: its partition and attempt (-1 and 0 outside Spark)."""

    partition: int
    attempt: int

    @classmethod
    def here(cls) -> Where:
        context = TaskContext.get()
        if context is None:
            return cls(-1, 0)
        return cls(context.partitionId(), context.attemptNumber())


def _renamed(batch: pa.RecordBatch, names: Sequence[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(batch.columns, names=list(names))


def _without(batch: pa.RecordBatch, name: str) -> pa.RecordBatch:
    keep = [i for i, n in enumerate(batch.schema.names) if n != name]
    return pa.RecordBatch.from_arrays(
        [batch.column(i) for i in keep], names=[batch.schema.names[i] for i in keep]
    )


def coalesce(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Batches combined into batches of about ``rows`` rows (at least one, for the schema)."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield _combined(held)
            held, count = [], 0
    if held:
        yield _combined(held)


def _combined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


class PartitionInput:
    """A task's batches as the package reads them: positional names undone (mapInArrow),
    the ordering column dropped, and the columns a caller keeps held aside."""

    def __init__(self, names: Sequence[str] | None = None, keep: Sequence[str] = ()) -> None:
        self.names = names
        self.keep = list(keep)
        self.kept: list[pa.RecordBatch] = []

    def _prepared(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if self.names is not None:
                batch = _renamed(batch, self.names)
            if self.keep:
                columns = [batch.column(name) for name in self.keep]
                self.kept.append(pa.RecordBatch.from_arrays(columns, names=self.keep))
            if ORDER_COLUMN in batch.schema.names:
                batch = _without(batch, ORDER_COLUMN)
            yield batch

    def reader(
        self, batches: Iterable[pa.RecordBatch], rows: int = DEFAULT_SLICE_ROWS
    ) -> pa.RecordBatchReader | None:
        """One stream of the partition's rows; None for a partition without batches."""
        prepared = self._prepared(batches)
        first = next(prepared, None)
        if first is None:
            return None

        def every() -> Iterator[pa.RecordBatch]:
            yield first
            yield from prepared

        return pa.RecordBatchReader.from_batches(first.schema, coalesce(every(), rows))

    def kept_table(self) -> pa.Table:
        return pa.Table.from_batches(self.kept) if self.kept else pa.table({})


def send(settings: SparkSettings, reader: pa.RecordBatchReader) -> Recorded:
    """Send one partition: its result, or the error that stopped it, never raised here."""
    client = settings.client()
    keywords = settings.send_keywords()
    if settings.kind == "events":
        return record("events", lambda: client.send_events(reader, **keywords), None)
    return record("identities", lambda: client.identify(reader, **keywords), None)


def reported_duplicates(chunks: pd.DataFrame) -> int | None:
    """How many events of the acknowledged requests the API said it already held (re-sends
    of a retried task or of an earlier run), when its answers say so (the contract does not
    promise a body: None when no answer had a ``duplicates`` count)."""
    total: int | None = None
    for text in chunks.loc[chunks["status"] == "sent", "response"].dropna():
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        count = body.get("duplicates") if isinstance(body, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            total = (total or 0) + count
    return total
