"""What a sync of a Delta or Iceberg table reads: the table's current version narrowed.

* **By cursor** (``cursor=``), either format: the filter goes into the table's own scan, so
  files whose statistics rule the range out are not read. Delta: a ``WHERE`` on delta-rs's
  query (DataFusion), the bound a literal of the column's own Arrow type, written by us
  (``Value.literal``). Iceberg: pyiceberg's ``row_filter`` (file pruning by the manifests'
  statistics, then rows). Rows are not ordered: the watermark moves only when the run read
  to the end (``settle.watermark_after``).
* **By versions** (Delta, ``incremental=True``): the rows the versions after the last synced
  one inserted (and updated: their post-images), from the table's change data feed; a table
  without one is refused, pointing to ``cursor``. The changes are read once and held (an
  identities input is read twice and must see the same rows in the same order): memory
  holds the versions' changes, not the table.
* **By snapshots** (Iceberg, ``incremental=True``): the data files the ``append`` snapshots
  after the last synced one added, read from their manifests, oldest first. Other snapshots
  (overwrite, delete, replace) add no new rows of their own to read and are passed over;
  rows such a snapshot deletes from an appended file are still read (as appended).

The first run of a sync by versions or snapshots reads the whole current version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .._core import ConfigurationError, InputError, named
from .._read import PinnedTable
from .cursor import Value

__all__ = ["DeltaChanges", "IcebergAppends", "narrowed_table"]

_CDF_META = ("_change_type", "_commit_version", "_commit_timestamp")
_CDF_ROWS = ("insert", "update_postimage")


def narrowed_table(
    table: PinnedTable, column: str, lower: Value | None, since: Value | None, until: Value | None
) -> PinnedTable:
    """``table`` reading only the rows of the cursor's range (and those whose cursor is null,
    which the sync reports), the filter in the table's scan."""
    if table.format == "delta":
        return _narrowed_delta(table, column, lower, since, until)
    return _narrowed_iceberg(table, column, lower, since, until)


def _tests(
    lower: Value | None, since: Value | None, until: Value | None
) -> list[tuple[str, Value]]:
    found = [(">", lower), (">=", since), ("<", until)]
    return [(op, value) for op, value in found if value is not None]


def _narrowed_delta(
    table: Any, column: str, lower: Value | None, since: Value | None, until: Value | None
) -> PinnedTable:
    schema = pa.schema(table.table.schema().to_arrow())
    if column not in schema.names:
        raise ConfigurationError(
            f"{named('cursor')} {column!r}: the {table.described} has no such column"
        )
    arrow_type = schema.field(column).type
    quoted = '"' + column.replace('"', '""') + '"'
    tests = [
        f"{quoted} {op} {value.literal(arrow_type)}" for op, value in _tests(lower, since, until)
    ]
    if tests:
        table.where = f"({' AND '.join(tests)}) OR {quoted} IS NULL"
        table.range = {op: value.text for op, value in _tests(lower, since, until)}
    return table  # type: ignore[no-any-return]


def _narrowed_iceberg(
    table: Any, column: str, lower: Value | None, since: Value | None, until: Value | None
) -> PinnedTable:
    from pyiceberg.expressions import (  # noqa: PLC0415 - with pyiceberg only
        And,
        GreaterThan,
        GreaterThanOrEqual,
        IsNull,
        LessThan,
        Or,
        Reference,
    )

    names = [f.name for f in table.table.schema().fields]
    if column not in names:
        raise ConfigurationError(
            f"{named('cursor')} {column!r}: the {table.described} has no such column"
        )
    kinds = {">": GreaterThan, ">=": GreaterThanOrEqual, "<": LessThan}
    tests = [
        kinds[op](column, _iceberg_literal(value)) for op, value in _tests(lower, since, until)
    ]
    if tests:
        test = tests[0]
        for more in tests[1:]:
            test = And(test, more)
        table.row_filter = Or(test, IsNull(term=Reference(column)))
        table.range = {op: value.text for op, value in _tests(lower, since, until)}
    return table  # type: ignore[no-any-return]


def _iceberg_literal(value: Value) -> Any:
    """The value as pyiceberg binds it to the column's type: an int (integers), ISO text
    (dates, timestamps: converted by the column's type)."""
    if value.type == "integer":
        return value.code
    if value.type == "date":
        return value.text
    moment = value.python()
    if value.type == "timestamp":
        return moment.isoformat()  # with its +00:00 offset: a timestamptz column
    return moment.isoformat()


class DeltaChanges(PinnedTable):
    """The rows the versions ``first`` .. ``last`` of a Delta table inserted or updated, from
    its change data feed (see the module)."""

    format = "delta"

    def __init__(self, table: Any, first: int, last: int) -> None:
        self.pinned = table  # the DeltaVersion at ``last``
        self.first = first
        self.last = last
        self._rows: pa.Table | None = None
        self.location = table.location
        self.path = table.path

    @property
    def described(self) -> str:
        return (
            f"Delta table {self.pinned.location}, versions {self.first} to {self.last} (its "
            "change data feed)"
        )

    def _read(self) -> pa.Table:
        if self._rows is None:
            if self.first > self.last:
                schema = pa.schema(self.pinned.table.schema().to_arrow())
                self._rows = schema.empty_table()
                return self._rows
            try:
                stream = self.pinned.table.load_cdf(
                    starting_version=self.first, ending_version=self.last
                )
                rows = _without_views(pa.RecordBatchReader.from_stream(stream).read_all())
            except Exception as exc:  # delta-rs's own errors, whatever their class
                raise InputError(
                    f"{self.described} cannot be read: {exc} (the log or change files of "
                    f"those versions may have been cleaned up: {named('full_refresh')} "
                    "starts the sync over)",
                    path=str(self.pinned.path),
                ) from None
            keep = pc.is_in(rows.column("_change_type"), pa.array(_CDF_ROWS))
            rows = rows.filter(keep)
            order = pc.sort_indices(rows, [("_commit_version", "ascending")])
            rows = rows.take(order)  # by version; within one, as delta-rs gave them
            self._rows = rows.drop_columns([c for c in _CDF_META if c in rows.column_names])
        return self._rows

    @property
    def num_rows(self) -> int | None:
        return int(self._read().num_rows)

    def batches(
        self, rows: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        table = self._read()
        if columns is not None:
            table = table.select([c for c in columns if c in table.column_names])
        return table.schema, iter(table.to_batches(max_chunksize=rows))

    def fingerprint(self, rows: int) -> dict[str, Any]:
        base = self.pinned.fingerprint(rows)
        digest = hashlib.sha256(f"{base['sha256']}\ncdf {self.first} {self.last}".encode())
        return {**base, "versions": [self.first, self.last], "sha256": digest.hexdigest()}


class IcebergAppends(PinnedTable):
    """The rows the ``append`` snapshots after ``after`` added, up to the pinned snapshot
    (see the module)."""

    format = "iceberg"

    def __init__(self, table: Any, after: int) -> None:
        self.pinned = table  # the IcebergSnapshot read to
        self.after = after
        self.location = table.location
        self.snapshots = self._appends()

    @property
    def described(self) -> str:
        return (
            f"Iceberg table {self.pinned.location}, the appends after snapshot {self.after} "
            f"to {self.pinned.snapshot_id}"
        )

    def _appends(self) -> list[Any]:
        table = self.pinned.table
        found = []
        current = self.pinned.snapshot_id
        while current is not None and current != self.after:
            snapshot = table.snapshot_by_id(current)
            if snapshot is None:
                break
            found.append(snapshot)
            current = snapshot.parent_snapshot_id
        if current != self.after:
            raise InputError(
                f"Iceberg table {self.pinned.location}: the sync's last snapshot {self.after} "
                f"is not an ancestor of the current one {self.pinned.snapshot_id} (expired, "
                f"or the table was rolled back): start the sync over ({named('full_refresh')})",
                path=self.pinned.location,
            )
        appends = [s for s in reversed(found) if _operation(s) == "append"]
        return appends

    def _tasks(self) -> list[Any]:
        from pyiceberg.manifest import ManifestEntryStatus  # noqa: PLC0415
        from pyiceberg.table import FileScanTask  # noqa: PLC0415

        table = self.pinned.table
        tasks = []
        for snapshot in self.snapshots:
            for manifest in snapshot.manifests(table.io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                    if (
                        entry.status == ManifestEntryStatus.ADDED
                        and entry.snapshot_id == snapshot.snapshot_id
                    ):
                        tasks.append(FileScanTask(entry.data_file))
        return tasks

    @property
    def num_rows(self) -> int | None:
        counts: list[int] = [int(t.file.record_count) for t in self._tasks()]
        return sum(counts)

    def batches(
        self, rows: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        from pyiceberg.expressions import AlwaysTrue  # noqa: PLC0415
        from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow  # noqa: PLC0415

        table = self.pinned.table
        projection = table.schema()
        names = [f.name for f in projection.fields]
        wanted = names if columns is None else [c for c in columns if c in names]
        if wanted != names:
            projection = projection.select(*wanted) if wanted else projection
        schema = schema_to_pyarrow(projection, include_field_ids=False)
        reader = ArrowScan(table.metadata, table.io, projection, AlwaysTrue(), True)
        tasks = self._tasks()

        def batches() -> Iterator[pa.RecordBatch]:
            for task in tasks:
                for batch in reader.to_record_batches([task]):
                    for start in range(0, batch.num_rows, rows):
                        yield batch.slice(start, rows)

        return schema, batches()

    def fingerprint(self, rows: int) -> dict[str, Any]:
        base = self.pinned.fingerprint(rows)
        ids = ",".join(str(s.snapshot_id) for s in self.snapshots)
        digest = hashlib.sha256(f"{base['sha256']}\nappends {self.after}: {ids}".encode())
        return {**base, "after_snapshot_id": self.after, "sha256": digest.hexdigest()}


def _without_views(table: pa.Table) -> pa.Table:
    """``table`` with its string and binary views as plain strings and binaries (delta-rs's
    change data feed gives views, which pyarrow's take and filter kernels do not take)."""
    fields = []
    for field in table.schema:
        if pa.types.is_string_view(field.type):
            field = field.with_type(pa.string())
        elif pa.types.is_binary_view(field.type):
            field = field.with_type(pa.binary())
        fields.append(field)
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema.equals(table.schema) else table.cast(schema)


def _operation(snapshot: Any) -> str:
    summary = snapshot.summary
    operation = getattr(summary, "operation", None)
    return str(getattr(operation, "value", operation))
