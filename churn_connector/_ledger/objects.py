"""The ledger as segment files under an object-storage prefix (``s3://``, ``gs://``,
``az://``, ``file://``, ...), through fsspec: state for workers that share no disk and no
database.

Writers only ever add files: each segment is an immutable Parquet file of records (scope,
kind, key, digest, time), created only if absent (S3's conditional write; a hard link on a
local disk), never rewritten. A writer buffers what the API acknowledges and writes a
segment after its first acknowledged request, then every ``segment_requests`` requests or
``segment_seconds`` seconds, and when the run ends; a record that a crash loses costs a
re-send, which the API de-duplicates. Dropping a record before a changed identity is sent
is written at once (a tombstone): it must hold before the request goes out.

Readers list the prefix and take, per key, the latest record by time (a tombstone hides
what came before it). ``compact`` merges the segments it listed into one and then deletes
them: records written meanwhile are in new segments it leaves alone, and a reader that
finds a listed segment gone lists again. A listing that misses the newest segments costs
re-sends only where the store's listings lag (S3, GCS, Azure and local disks list what
was written).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, ClassVar

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from .._core import ConfigurationError, LedgerError
from .base import (
    EVENT_KINDS,
    EVENT_RETENTION_DAYS,
    Ledger,
    LedgerUnavailable,
    cutoff,
    export_batch,
    install_advice,
    kinds_of,
    redact,
    retention_cutoff,
    stats_frame,
)

SEGMENT_SCHEMA = pa.schema(
    [
        ("scope", pa.string()),
        ("kind", pa.string()),
        ("key", pa.string()),
        ("digest", pa.string()),  # null: a tombstone (the record was dropped)
        ("at", pa.int64()),  # nanoseconds since the epoch, UTC; unique per writer
    ]
)
SUFFIX = ".parquet"
# every segment says its format's version in its Parquet metadata; segments written before
# the key existed hold exactly SEGMENT_SCHEMA's columns and are version 1
FORMAT_KEY = b"churn_ledger_segment"
FORMAT_VERSION = 1
# a tombstone hides records of segments written late (a writer's buffer flushed after it);
# compact keeps it this long, far beyond any writer's segment_seconds
TOMBSTONE_LIFE = timedelta(days=1)
_EXPORT_ROWS = 100_000
_READ_ATTEMPTS = 5  # listings in a row that found a segment gone (compactions meanwhile)
Row = tuple[str, str, str, str | None, int]


class _Vanished(Exception):
    pass


class _Clock:
    """Nanoseconds since the epoch, strictly increasing in this process: a forget and the
    record that follows it never share a time."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


_CLOCK = _Clock()


class ObjectLedger(Ledger):
    """What the API acknowledged, as segment files under a prefix (see the module's
    docstring). ``storage_options`` go to fsspec (credentials, ``endpoint_url``, ...; by
    default the store's own environment: ``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``)."""

    kind_name: ClassVar[str] = "segment files under"

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        read_only: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        segment_requests: int = 1000,
        segment_seconds: float = 30.0,
    ) -> None:
        url = os.fspath(location)
        if not isinstance(url, str):
            raise ConfigurationError(
                "an object-storage ledger is a URL such as s3://bucket/prefix/"
            )
        self.location = redact(url)
        self.read_only = read_only
        if segment_requests < 1 or segment_seconds <= 0:
            raise ConfigurationError(
                "segment_requests must be at least 1 and segment_seconds more than 0"
            )
        self.segment_requests = segment_requests
        self.segment_seconds = segment_seconds
        try:
            fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        except ImportError as exc:
            raise ConfigurationError(
                f"ledger {self.location}: {exc}: {install_advice(url)}"
            ) from None
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"ledger {self.location}: {exc}") from None
        self._fs = fs
        self._root = str(root).rstrip("/")
        self._local = isinstance(fs, LocalFileSystem)
        self._lock = threading.Lock()  # the buffer and the indexes
        self._write_lock = threading.Lock()  # one segment written at a time
        self._index: dict[tuple[str, str], dict[str, str]] = {}
        self._pending: list[Row] = []
        self._pending_requests = 0
        self._first_pending = 0.0
        self._wrote = False
        try:
            self._list()  # the store answers, and lets us look (credentials, bucket)
        except LedgerUnavailable as exc:
            raise LedgerError(
                f"ledger {self.location}: cannot open ({exc.message}); nothing was sent",
                path=self.location,
                retryable=exc.retryable,
            ) from None

    # ---------------------------------------------------------------- the store

    def _failure(self, what: str, exc: BaseException) -> LedgerUnavailable:
        # no access, no such bucket: something must change first; the rest may pass
        lasting = isinstance(exc, PermissionError | FileNotFoundError | IsADirectoryError)
        text = " ".join(str(exc).split()) or type(exc).__name__
        return LedgerUnavailable(f"{what} failed: {text}", retryable=not lasting)

    def _list(self) -> list[str]:
        """The segment files under the prefix, oldest name first."""
        try:
            if not self._local:
                self._fs.invalidate_cache(self._root)  # s3fs caches listings
            names = self._fs.ls(self._root, detail=False)
        except FileNotFoundError:
            return []  # nothing written yet
        except Exception as exc:  # the store's library: any error is the store failing
            raise self._failure("listing", exc) from None
        found = [
            str(n)
            for n in names
            if str(n).endswith(SUFFIX) and not str(n).rsplit("/", 1)[-1].startswith(".")
        ]
        return sorted(found)

    def _read(self, paths: Sequence[str], filters: Any = None) -> pa.Table:
        """The rows of ``paths`` (raises _Vanished when one of them is gone)."""
        if not paths:
            return SEGMENT_SCHEMA.empty_table()
        try:
            blobs = self._fs.cat(list(paths), on_error="return")
        except Exception as exc:
            raise self._failure("reading", exc) from None
        tables = []
        for path in paths:
            blob = blobs.get(path)
            if isinstance(blob, FileNotFoundError) or blob is None:
                raise _Vanished(path)
            if isinstance(blob, BaseException):
                raise self._failure("reading", blob)
            name = path.rsplit("/", 1)[-1]
            try:
                table = pq.read_table(pa.BufferReader(blob), filters=filters)
            except (pa.ArrowException, OSError) as exc:
                raise _foreign(
                    name, f"not a ledger segment ({' '.join(str(exc).split())})"
                ) from None
            _check_format(name, table.schema)
            tables.append(table.select(SEGMENT_SCHEMA.names).cast(SEGMENT_SCHEMA))
        return pa.concat_tables(tables)

    def _snapshot(self, filters: Any = None) -> tuple[list[str], pa.Table]:
        """A listing and what its segments hold, listed again if a compaction removed one."""
        for _ in range(_READ_ATTEMPTS):
            paths = self._list()
            try:
                return paths, self._read(paths, filters)
            except _Vanished:
                continue
        raise LedgerUnavailable(
            "segments kept vanishing while they were read (compactions running?)",
            retryable=True,
        )

    def _put(self, rows: list[Row] | pa.Table) -> None:
        """A new segment holding ``rows``, created only if absent, never rewritten."""
        if isinstance(rows, pa.Table):
            table = rows
        else:
            scope, kind, key, dig, at = zip(*rows, strict=True)
            table = pa.table(
                [list(scope), list(kind), list(key), list(dig), list(at)], schema=SEGMENT_SCHEMA
            )
        first = int(pc.min(table["at"]).as_py() or 0)
        table = table.replace_schema_metadata({FORMAT_KEY: str(FORMAT_VERSION).encode()})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        name = f"{first:020d}-{uuid.uuid4().hex}{SUFFIX}"
        path = f"{self._root}/{name}"
        try:
            if self._local:
                # a whole file or none: written aside, then linked in (fails if it exists)
                os.makedirs(self._root, exist_ok=True)
                aside = f"{self._root}/.{name}.tmp"
                with open(aside, "xb") as out:
                    out.write(data)
                try:
                    os.link(aside, path)
                finally:
                    os.unlink(aside)
            else:
                self._fs.pipe_file(path, data, mode="create")
        except Exception as exc:
            raise self._failure(f"writing {name}", exc) from None

    # ---------------------------------------------------------------- what a run uses

    def known(self, scope: str, kind: str, keys: Sequence[str]) -> dict[str, str]:
        with self._lock:
            index = self._index.get((scope, kind))
        if index is None:
            _, table = self._snapshot([("scope", "=", scope), ("kind", "=", kind)])
            loaded = _live(_latest(table))
            with self._lock:
                index = self._index.setdefault((scope, kind), loaded)
                # what this ledger wrote or buffered since: its own writes, in order
                for s, k, key, dig, _ in self._pending:
                    if (s, k) == (scope, kind):
                        _apply(index, key, dig)
        with self._lock:
            return {key: index[key] for key in keys if key in index}

    def record(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        if self.read_only:
            return
        at = _CLOCK()
        with self._lock:
            index = self._index.get((scope, kind))
            for key, dig in entries:
                self._pending.append((scope, kind, key, dig, at))
                if index is not None:
                    index[key] = dig
            if not self._pending_requests:
                self._first_pending = time.monotonic()
            self._pending_requests += 1
            due = (
                not self._wrote  # the first acknowledgement is written at once: fail early
                or self._pending_requests >= self.segment_requests
                or time.monotonic() - self._first_pending >= self.segment_seconds
            )
        if due:
            self.flush()

    def forget(self, scope: str, kind: str, keys: Iterable[str]) -> None:
        if self.read_only:
            return
        at = _CLOCK()
        with self._lock:
            index = self._index.get((scope, kind))
            for key in keys:
                self._pending.append((scope, kind, key, None, at))
                if index is not None:
                    index.pop(key, None)
        self.flush()  # before the new body is sent: see the module's docstring

    def flush(self) -> None:
        if self.read_only:
            return
        with self._write_lock:
            with self._lock:
                rows, self._pending = self._pending, []
                self._pending_requests = 0
            if rows:
                self._put(rows)
                self._wrote = True

    def close(self) -> None:
        # a run that used it flushed (loudly) before; nothing more can be done here
        with contextlib.suppress(LedgerUnavailable):
            self.flush()

    # ---------------------------------------------------------------- operations

    def _operate(self, work: Any) -> Any:
        try:
            return work()
        except LedgerUnavailable as exc:
            raise LedgerError(
                f"ledger {self.location}: {exc.message}",
                path=self.location,
                retryable=exc.retryable,
            ) from None

    def describe(self) -> str:
        count = len(self._operate(self._list))
        return f"{count:,} segment files under {self.location}"

    def stats(self) -> pd.DataFrame:
        self.flush()
        _, table = self._operate(self._snapshot)
        live = _latest(table)
        live = live[live["digest"].notna()]
        grouped = live.groupby(["scope", "kind"], sort=True)["at"].agg(["count", "max"])
        return stats_frame(
            (str(where[0]), str(where[1]), int(n), pd.Timestamp(int(last), unit="ns", tz="UTC"))
            for where, n, last in zip(grouped.index, grouped["count"], grouped["max"], strict=True)
        )

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.flush()
        _, table = self._operate(self._snapshot)
        live = _latest(table)
        live = live[live["digest"].notna()].sort_values(["scope", "kind", "key"])
        for lo in range(0, len(live), _EXPORT_ROWS):
            part = live.iloc[lo : lo + _EXPORT_ROWS]
            at = pd.to_datetime(part["at"], unit="ns", utc=True)
            yield export_batch(part[["scope", "kind", "key", "digest"]].assign(acknowledged_at=at))

    def drop(
        self, scope: str, *, kind: str | None = None, before: datetime | date | None = None
    ) -> int:
        self._writable()
        moment = cutoff(before)

        def doomed(frame: pd.DataFrame) -> pd.Series:
            hit = frame["scope"] == scope
            kinds = kinds_of(kind)
            if kinds is not None:
                hit &= frame["kind"].isin(kinds)
            if moment is not None:
                hit &= frame["at"] < _ns(moment)
            return hit

        dropped, _, _ = self._operate(lambda: self._rewrite(doomed))
        return int(dropped)

    def compact(self, *, keep_events_days: int = EVENT_RETENTION_DAYS) -> str:
        self._writable()
        old = retention_cutoff(keep_events_days)

        def doomed(frame: pd.DataFrame) -> pd.Series:
            return frame["kind"].isin(EVENT_KINDS) & (frame["at"] < _ns(old))

        dropped, merged, kept = self._operate(lambda: self._rewrite(doomed))
        return (
            f"merged {merged:,} segment files into {1 if kept else 0} ({kept:,} records); "
            f"dropped {dropped:,} event records acknowledged before {old:%Y-%m-%d} (older "
            f"than {keep_events_days} days)"
        )

    def _rewrite(self, doomed: Any) -> tuple[int, int, int]:
        """Merge every listed segment into one, less the records ``doomed`` picks and the
        tombstones that hide nothing any longer; then delete what was merged.

        Returns (live records dropped, segments merged, records kept)."""
        self.flush()
        paths, table = self._snapshot()
        latest = _latest(table)
        tombstone = latest["digest"].isna()
        expired = tombstone & (latest["at"] < _ns(datetime.now(UTC) - TOMBSTONE_LIFE))
        dropped = doomed(latest)
        keep = latest[~(dropped | expired)]
        if len(keep):
            # written before anything is deleted: a crash part way loses nothing
            self._put(pa.Table.from_pandas(keep, schema=SEGMENT_SCHEMA, preserve_index=False))
        if paths:
            try:
                if self._local:
                    for path in paths:
                        with contextlib.suppress(FileNotFoundError):  # merged by another too
                            os.unlink(path)
                else:
                    self._fs.rm(paths)
            except Exception as exc:
                raise self._failure("deleting merged segments", exc) from None
        with self._lock:
            self._index.clear()  # read afresh next time
        return int((dropped & ~tombstone).sum()), len(paths), len(keep)

    def _writable(self) -> None:
        if self.read_only:
            raise ConfigurationError(f"ledger {self.location} was opened read-only")


def _foreign(name: str, why: str) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"the file {name} under the prefix is {why}: the prefix holds the ledger's segments "
        "only (move other files, a backup of `ledger export` say, out of it)",
        retryable=False,
    )


def _check_format(name: str, schema: pa.Schema) -> None:
    """Refuse a file that is no segment of ours, or a segment of a format version this
    package does not know (a newer churn-connector wrote it)."""
    version = (schema.metadata or {}).get(FORMAT_KEY)
    if version is None:
        columns = {f.name: f.type for f in schema}
        if any(columns.get(f.name) != f.type for f in SEGMENT_SCHEMA):
            raise _foreign(name, f"not a ledger segment (its columns: {', '.join(columns)})")
        return  # a segment of version 1 written before segments said so
    if version != str(FORMAT_VERSION).encode():
        shown = version.decode("utf-8", "replace")[:20]
        raise LedgerUnavailable(
            f"segment {name} is of format version {shown}, and this churn-connector reads "
            f"version {FORMAT_VERSION}: a newer one wrote it; upgrade churn-connector",
            retryable=False,
        )


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _latest(table: pa.Table) -> pd.DataFrame:
    """The latest row per (scope, kind, key), tombstones included."""
    frame: pd.DataFrame = table.to_pandas()
    if frame.empty:
        return frame
    frame = frame.sort_values("at", kind="stable")
    latest: pd.DataFrame = frame.drop_duplicates(["scope", "kind", "key"], keep="last")
    return latest


def _live(latest: pd.DataFrame) -> dict[str, str]:
    """key -> digest of the live records of one scope and kind."""
    if latest.empty:
        return {}
    live = latest[latest["digest"].notna()]
    return dict(zip(live["key"].tolist(), live["digest"].tolist(), strict=True))


def _apply(index: dict[str, str], key: str, dig: str | None) -> None:
    if dig is None:
        index.pop(key, None)
    else:
        index[key] = dig
