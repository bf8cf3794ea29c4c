"""A Delta table, read through delta-rs (``deltalake``, the ``[delta]`` extra) at one version.

The table is read by delta-rs's own engine (DataFusion), which replays the log: only the
files of the version read, their partition values, deletion vectors and column mapping
applied (a table whose features delta-rs cannot read is refused with its error). It runs on
one partition: DataFusion's default spreads the files over the cores and interleaves their
batches, so two reads of one version gave the rows in different orders, and a run's rows are
known by their place (an identities input is read twice; a re-send selects rows by
position). One partition reads the version's files one after the other, in the log's order,
which is the same at every read. Batches of ``rows`` stream: memory holds about one batch.

Rows are labelled by their 0-based place in that order. The fingerprint is the table's
identity, not its bytes: its id (``metaData.id``), the version, and the version's files
(path and size), so a table rewritten under the same path is another input.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._core import ConfigurationError, InputError, named
from .tables import DELTA_LOG, At, PinnedTable, extra, refuse_future, refuse_other

__all__ = ["DeltaVersion", "open_delta"]

# one partition: the files in the log's order, at every read (see the module)
_SESSION = {"datafusion.execution.target_partitions": "1"}


def open_delta(data: Any, at: At) -> DeltaVersion:
    """The Delta table ``data`` (its folder, or a ``DeltaTable``) at the version ``at`` names."""
    what = str(data) if isinstance(data, str | os.PathLike) else "the DeltaTable"
    deltalake = extra("delta", what)
    refuse_other(at, "delta", what)
    refuse_future(at, what)
    if not isinstance(data, str | os.PathLike):
        if at.version is not None or at.as_of is not None:
            option = named("version" if at.version is not None else "as_of")
            raise ConfigurationError(
                f"{option}: a DeltaTable object is read at the version it has loaded: load "
                "the one to read (dt.load_as_version(...)), or pass the table's path"
            )
        return DeltaVersion(data, data.table_uri, Path(data.table_uri.removeprefix("file://")))
    path = Path(data)
    try:
        table = deltalake.DeltaTable(path)
    except deltalake.exceptions.DeltaError as exc:
        raise InputError(f"{path} is not a readable Delta table: {exc}", path=str(path)) from None
    latest = table.version()
    if at.version is not None and not 0 <= at.version <= latest:
        raise InputError(
            f"{path}: the Delta table has no version {at.version}: its versions run to "
            f"{latest} (the current one)",
            path=str(path),
        )
    try:
        if at.version is not None and at.version != latest:
            table.load_as_version(at.version)
        elif at.as_of is not None:
            table.load_as_version(at.as_of.to_pydatetime())
    except deltalake.exceptions.DeltaError as exc:
        raise InputError(
            f"{path}: cannot load that version of the Delta table: {exc} (its log may have been "
            "cleaned up past it)",
            path=str(path),
        ) from None
    if at.as_of is not None:
        _existed(path, table.version(), at.as_of)
    return DeltaVersion(table, os.fspath(path.absolute()), path)


def _existed(path: Path, version: int, as_of: pd.Timestamp) -> None:
    """delta-rs loads the first version for an instant before it: refused instead."""
    committed = _commit_time(path, version)
    if committed is not None and committed > as_of:
        raise InputError(
            f"{path}: the Delta table did not exist yet at {as_of.isoformat()}: its first "
            f"version was committed at {committed.isoformat()}",
            path=str(path),
        )


def _commit_time(path: Path, version: int) -> pd.Timestamp | None:
    """When ``version`` was committed, by its commitInfo (None: that commit file is gone)."""
    try:
        with (path / DELTA_LOG / f"{version:020d}.json").open(encoding="utf-8") as fh:
            for line in fh:
                info = json.loads(line).get("commitInfo")
                if isinstance(info, dict):
                    ms = info.get("inCommitTimestamp", info.get("timestamp"))
                    return None if ms is None else pd.Timestamp(int(ms), unit="ms", tz="UTC")
    except (OSError, ValueError):
        return None
    return None


class DeltaVersion(PinnedTable):
    """One version of a Delta table (see the module)."""

    format = "delta"

    def __init__(self, table: Any, location: str, path: Path) -> None:
        self.table = table
        self.location = location
        self.path = path
        self.version: int = table.version()
        self._files: pa.Table | None = None
        # a sync's cursor range: a filter of our own text (_sync.tables), and the range shown
        self.where: str | None = None
        self.range: dict[str, str] = {}

    @property
    def described(self) -> str:
        return f"Delta table {self.location} at version {self.version}"

    @property
    def files(self) -> pa.Table:
        """The version's data files: ``path``, ``size_bytes``, ``num_records``."""
        if self._files is None:
            added = pa.table(self.table.get_add_actions(flatten=False))
            self._files = added.select(["path", "size_bytes", "num_records"])
        return self._files

    @property
    def num_rows(self) -> int | None:
        records = self.files.column("num_records")
        if records.null_count:
            return None  # a writer that kept no statistics: only reading tells
        deleted = self._deleted()
        return None if deleted is None else int(pc.sum(records).as_py() or 0) - deleted

    def _deleted(self) -> int | None:
        """Rows the version's deletion vectors remove (0 without any)."""
        features = self.table.protocol().reader_features or []
        if "deletionVectors" not in features:
            return 0
        try:
            vectors = pa.table(self.table.deletion_vectors())
        except Exception:  # whatever delta-rs raises: the count is unknown
            return None
        if vectors.num_rows == 0:
            return 0
        keep = pc.list_flatten(vectors.column("selection_vector"))
        return int(len(keep) - (pc.sum(keep).as_py() or 0))

    def batches(
        self, rows: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        deltalake = extra("delta", self.location)
        names = list(pa.schema(self.table.schema().to_arrow()).names)
        wanted = names if columns is None else [c for c in columns if c in names]
        select = ", ".join(_quoted(c) for c in (wanted or names))
        session = {**_SESSION, "datafusion.execution.batch_size": str(rows)}
        try:
            builder = deltalake.QueryBuilder(session).register("t", self.table)
            # the names are the table's own, quoted (``_quoted``): no text of anyone else's
            query = f"SELECT {select} FROM t"  # noqa: S608
            if self.where:
                query += f" WHERE {self.where}"
            reader = pa.RecordBatchReader.from_stream(builder.execute(query))
        except deltalake.exceptions.DeltaError as exc:
            raise InputError(
                f"{self.described} cannot be read by deltalake {deltalake.__version__}: {exc}",
                path=str(self.path),
            ) from None
        schema = reader.schema if wanted else pa.schema([])
        return schema, _sliced(reader, rows, keep=bool(wanted))

    def fingerprint(self, rows: int) -> dict[str, Any]:
        files = self.files.sort_by("path")
        digest = hashlib.sha256(f"delta\n{self.table.metadata().id}\n{self.version}\n".encode())
        if self.range:
            digest.update(f"range {sorted(self.range.items())}\n".encode())
        for path, size in zip(
            files.column("path").to_pylist(), files.column("size_bytes").to_pylist(), strict=True
        ):
            digest.update(f"{path}\t{size}\n".encode())
        return {
            "kind": "delta",
            "table": self.location,
            "version": self.version,
            **({"range": self.range} if self.range else {}),
            "size": int(pc.sum(files.column("size_bytes")).as_py() or 0),
            "rows": rows,
            "sha256": digest.hexdigest(),
        }


def _quoted(name: str) -> str:
    """A column name as SQL writes it: quoted, so case, dots and spaces stay as they are."""
    return '"' + name.replace('"', '""') + '"'


def _sliced(reader: pa.RecordBatchReader, rows: int, *, keep: bool) -> Iterator[pa.RecordBatch]:
    """The reader's batches, at most ``rows`` each (without ``keep``: their rows only)."""
    for batch in reader:
        if not keep:
            batch = batch.select([])
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)
