"""What a sync reads this run, by source: the filter pushed down where the source can take
it, applied after reading where it cannot.

* a query (``cc.sql``): by its cursor, the query wrapped in a filtered, ordered subquery
  with bound parameters (``_read.query``);
* a Delta or Iceberg table: by its cursor, the filter pushed into the table's scan; without
  one (``incremental``), a Delta table by versions (its change data feed) and an Iceberg
  table by snapshots (its appends) since the last synced (``tables``);
* a folder or glob of part files: the files not seen before (by name, size and
  modification time);
* a DataFrame, Arrow data, polars or DuckDB data: by its cursor, filtered as it is read
  (everything is read: the filter saves the sending, not the reading).

A single file is refused: it is read whole; sync the folder its exports land in.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import ConfigurationError, Kind, named
from .._read import (
    Bound,
    FileSubset,
    PinnedTable,
    Query,
    ReadSpec,
    arrow_batches,
    expand,
    is_arrow,
    part_name,
    pin,
    table_format,
)
from .cursor import CursorType, Value, codes_of, parse_bound, type_of_series, words
from .options import SyncOptions
from .record import Watermark
from .tables import DeltaChanges, IcebergAppends, narrowed_table
from .tap import Tap, keeps

__all__ = ["Plan", "plan_for", "source_name"]


@dataclass
class Plan:
    """One run's read: the input narrowed, how its position is kept, its tap."""

    data: Any
    by: str  # "cursor", "versions", "snapshots", "files"
    tap: Tap
    cursor: str | None = None
    lower: Value | None = None  # the rows above it were read (a watermark less the lookback)
    since: Value | None = None
    until: Value | None = None
    ordered: bool = False
    position: int | None = None  # the version or snapshot this run reads to
    files: dict[str, str] = field(default_factory=dict)  # by files: file -> size:mtime read
    pushed: str = "into the source"  # where the filter went, for the report

    @property
    def read(self) -> dict[str, str]:
        """The range read, as the report shows it."""
        found = {}
        for name, value in (("after", self.lower), ("since", self.since), ("until", self.until)):
            if value is not None:
                found[name] = value.text
        return found


def source_name(data: Any, kind: Kind, cursor: str | None) -> str | None:
    """A sync's default name: what it reads, hashed with the cursor (None: an input that
    has no name of its own, a DataFrame)."""
    identity: str | None = None
    prefix = "sql"
    if isinstance(data, Query):
        identity = f"{data.text}\n{data.where}"
    elif table_format(data) is not None:
        prefix = str(table_format(data))
        identity = os.fspath(data) if isinstance(data, str | os.PathLike) else None
        if identity is None:
            identity = str(
                getattr(data, "table_uri", None) or getattr(data, "metadata_location", "")
            )
        elif "://" not in identity:
            identity = str(Path(identity).absolute())
    elif isinstance(data, str | os.PathLike):
        prefix = "files"
        identity = str(Path(os.fspath(data)).absolute())
    if identity is None:
        return None
    digest = hashlib.sha256(f"{kind}\n{identity}\n{cursor or ''}".encode()).hexdigest()[:16]
    return f"{prefix}-{digest}"


def plan_for(
    data: Any,
    options: SyncOptions,
    *,
    kind: Kind,
    reading: ReadSpec,
    mark: Watermark | None,
    known_files: Any = None,
) -> Plan:
    """The read of this run (see the module); ``mark``: the sync's watermark (None: a first
    run, a full refresh or a backfill); ``known_files(names)``: the files a folder sync
    recorded, of those listed."""
    since, until = parse_bound("since", options.since), parse_bound("until", options.until)
    if isinstance(data, Query):
        return _query(data, options, kind, reading, mark, since, until)
    if table_format(data) is not None:
        return _table(data, options, kind, reading, mark, since, until)
    if isinstance(data, str | os.PathLike):
        return _files(data, options, reading, known_files)
    return _in_memory(data, options, kind, reading, mark, since, until)


def _column_tap(
    options: SyncOptions, kind: Kind, reading: ReadSpec, expect: CursorType | None
) -> Tap:
    assert options.cursor is not None
    rename = reading.renamer()
    column = rename(options.cursor) if rename is not None else options.cursor
    return Tap(column, keep=keeps(str(column), kind), expect=expect)


def _by_cursor(
    options: SyncOptions, mark: Watermark | None, since: Value | None, until: Value | None
) -> tuple[Value | None, CursorType | None]:
    """(the lower bound, the type the cursor must hold) of a read by cursor."""
    old = mark.value if mark is not None else None
    if mark is not None and mark.cursor is not None and mark.cursor != options.cursor:
        raise ConfigurationError(
            f"sync {mark.name!r} reads by {named('cursor')} {mark.cursor!r}, not "
            f"{options.cursor!r}: start it over ({named('full_refresh')}) or give this one "
            f"its own {named('sync_name')}"
        )
    lower = old
    if old is not None and options.lookback is not None:
        lower = old.minus(options.lookback)
    bound = since or until
    expect = old.type if old is not None else bound.type if bound is not None else None
    if old is not None and bound is not None and bound.type != old.type:
        raise ConfigurationError(
            f"{named('since')}/{named('until')} are {words(bound.type)}, but the cursor holds "
            f"{words(old.type)}"
        )
    return lower, expect


def _query(
    query: Query,
    options: SyncOptions,
    kind: Kind,
    reading: ReadSpec,
    mark: Watermark | None,
    since: Value | None,
    until: Value | None,
) -> Plan:
    if options.cursor is None:
        raise ConfigurationError(
            f"{named('incremental')}: a query has no position of its own: name the column "
            f"that grows as rows arrive ({named('cursor')})"
        )
    lower, expect = _by_cursor(options, mark, since, until)
    bound = Bound(
        options.cursor,
        lower=None if lower is None else lower.bound(),
        since=None if since is None else since.bound(),
        until=None if until is None else until.bound(upper=True),
        order=True,
    )
    return Plan(
        query.narrowed(bound),
        "cursor",
        _column_tap(options, kind, reading, expect),
        cursor=options.cursor,
        lower=lower,
        since=since,
        until=until,
        ordered=True,
        pushed="into the query (a filtered, ordered subquery)",
    )


def _table(
    data: Any,
    options: SyncOptions,
    kind: Kind,
    reading: ReadSpec,
    mark: Watermark | None,
    since: Value | None,
    until: Value | None,
) -> Plan:
    table = pin(data, reading.at)  # the current version: every read of the run sees it
    if options.cursor is not None:
        _same_by(mark, "cursor")
        lower, expect = _by_cursor(options, mark, since, until)
        if lower is not None or since is not None or until is not None:
            table = narrowed_table(table, options.cursor, lower, since, until)
        return Plan(
            table,
            "cursor",
            _column_tap(options, kind, reading, expect),
            cursor=options.cursor,
            lower=lower,
            since=since,
            until=until,
            pushed=f"into the {table.format.capitalize()} table's scan",
        )
    _refuse_lookback(options, "a table's versions")
    if table.format == "delta":
        by, position = "versions", int(table.version)  # type: ignore[attr-defined]
        _same_by(mark, by)
        read: PinnedTable = table
        pushed = f"version {position}, whole (the sync's first run)"
        if mark is not None and mark.position is not None:
            configuration = table.table.metadata().configuration  # type: ignore[attr-defined]
            if str(configuration.get("delta.enableChangeDataFeed", "")).lower() != "true":
                raise ConfigurationError(
                    f"an incremental sync of the {table.described} reads the rows its new "
                    "versions added from its change data feed, which this table does not "
                    "have (delta.enableChangeDataFeed): name a column that grows as rows "
                    f"arrive ({named('cursor')})"
                )
            read = DeltaChanges(table, mark.position + 1, position)
            pushed = f"versions {mark.position + 1} to {position} (the change data feed)"
    else:
        by = "snapshots"
        snapshot = table.snapshot_id  # type: ignore[attr-defined]
        _same_by(mark, by)
        if snapshot is None:  # a table with no snapshot yet: nothing to read, no position
            return Plan(table, by, Tap(None), position=mark.position if mark else None)
        position = int(snapshot)
        read = table
        pushed = f"snapshot {position}, whole (the sync's first run)"
        if mark is not None and mark.position is not None:
            appends = IcebergAppends(table, mark.position)
            read = appends
            pushed = (
                f"the appends after snapshot {mark.position} to {position} "
                f"({len(appends.snapshots)} snapshots)"
            )
    return Plan(read, by, Tap(None), position=position, pushed=pushed)


def _refuse_lookback(options: SyncOptions, what: str) -> None:
    if options.lookback is not None:
        raise ConfigurationError(
            f"{named('lookback')}: {what} misses no late row; a lookback is for a cursor column"
        )


def _same_by(mark: Watermark | None, by: str) -> None:
    if mark is not None and mark.by != by:
        raise ConfigurationError(
            f"sync {mark.name!r} reads by {mark.by}, and this run would read by {by}: start it "
            f"over ({named('full_refresh')}) or give this one its own {named('sync_name')}"
        )


def _files(
    data: str | os.PathLike[str], options: SyncOptions, reading: ReadSpec, known_files: Any
) -> Plan:
    path = os.fspath(data)
    found = expand(path, reading.text)
    if found.base is None:
        raise ConfigurationError(
            f"an incremental sync of {path}: a single file is read whole; sync the folder its "
            "exports land in (each run reads the files not seen before), or a query"
        )
    if options.cursor is not None:
        raise ConfigurationError(
            f"{named('cursor')}: a folder is synced by its files (each run reads the files not "
            f"seen before): drop {named('cursor')} and pass {named('incremental')}"
        )
    _refuse_lookback(options, "a folder's files not seen before")
    listed: dict[str, str] = {}
    for part in found.files:
        stat = part.stat()
        listed[part_name(part, found.base)] = f"{stat.st_size}:{stat.st_mtime_ns}"
    seen = known_files(list(listed)) if known_files is not None else {}
    new = {name: sig for name, sig in listed.items() if seen.get(name) != sig}
    return Plan(
        FileSubset(path, frozenset(new)),
        "files",
        Tap(None, files=True),
        files=new,
        pushed=f"the files not seen before ({len(new):,} of {len(listed):,})",
    )


def _in_memory(
    data: Any,
    options: SyncOptions,
    kind: Kind,
    reading: ReadSpec,
    mark: Watermark | None,
    since: Value | None,
    until: Value | None,
) -> Plan:
    if options.cursor is None:
        raise ConfigurationError(
            f"{named('incremental')}: a table in memory has no position of its own: name "
            f"the column that grows as rows arrive ({named('cursor')})"
        )
    _same_by(mark, "cursor")
    lower, expect = _by_cursor(options, mark, since, until)
    if lower is None and since is None and until is None:
        narrowed = data
    else:
        test = _Test(options.cursor, lower, since, until)
        narrowed = test.applied(data, reading.rows)
    return Plan(
        narrowed,
        "cursor",
        _column_tap(options, kind, reading, expect),
        cursor=options.cursor,
        lower=lower,
        since=since,
        until=until,
        pushed="after reading (a table in memory is read whole)",
    )


@dataclass(frozen=True)
class _Test:
    """The rows a filter applied after reading keeps: past the range's bounds, or null."""

    column: str
    lower: Value | None
    since: Value | None
    until: Value | None

    @property
    def kind(self) -> CursorType:
        found = self.lower or self.since or self.until
        assert found is not None
        return found.type

    def mask(self, column: pd.Series) -> np.ndarray:
        found = type_of_series(column, self.column)
        if column.notna().any() and found != self.kind:
            raise ConfigurationError(
                f"{named('cursor')} {self.column!r} holds {words(found)}, but the sync compares "
                f"it with {words(self.kind)}"
            )
        codes, nulls = codes_of(column, self.kind)
        keep = np.ones(len(codes), dtype=bool)
        if self.lower is not None:
            keep &= codes > self.lower.code
        if self.since is not None:
            keep &= codes >= self.since.code
        if self.until is not None:
            keep &= codes < self.until.code
        kept: np.ndarray = keep | nulls
        return kept

    def _frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        if self.column not in frame.columns:
            raise ConfigurationError(
                f"{named('cursor')} {self.column!r}: the table has no such column"
            )
        return frame[self.mask(frame[self.column])]

    def _batch(self, batch: pa.RecordBatch | pa.Table) -> Any:
        if self.column not in batch.schema.names:
            raise ConfigurationError(
                f"{named('cursor')} {self.column!r}: the table has no such column"
            )
        column = batch.column(self.column).to_pandas()
        return batch.filter(pa.array(self.mask(column)))

    def applied(self, data: Any, rows: int) -> Any:
        """``data`` with only the rows the test keeps (a reader for one-shot sources)."""
        if isinstance(data, pd.DataFrame):
            return self._frame(data)
        if isinstance(data, pa.Table | pa.RecordBatch):
            return self._batch(data)
        if is_arrow(data):
            schema, batches = arrow_batches(data, rows)
            first = next(batches, None)
            if schema is None:
                schema = first.schema if first is not None else pa.schema([])
            head = [] if first is None else [first]
            kept = (self._batch(b) for b in _chain(head, batches))
            return pa.RecordBatchReader.from_batches(schema, kept)
        if isinstance(data, list | tuple):
            return [self.applied(item, rows) for item in data]
        if isinstance(data, Iterator):
            return (self.applied(item, rows) for item in data)
        raise ConfigurationError(
            f"an incremental sync of a {type(data).__name__}: pass a query, a Delta or Iceberg "
            "table, a folder, a DataFrame or Arrow data"
        )


def _chain(head: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from head
    yield from rest
