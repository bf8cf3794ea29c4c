"""An Iceberg table, read through pyiceberg (the ``[iceberg]`` extra) at one snapshot.

Found by its metadata file; by its table folder, where the current metadata is found as
Iceberg's file-system tables find it (``metadata/version-hint.text``, else the highest
version among the metadata files, refused with the candidates when two share it); or by
``iceberg://<catalog>/<namespace>.<table>``, the catalog configured as pyiceberg configures
it (``.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__...`` variables), read when the table
is opened so a variable set after the import counts. A pyiceberg ``Table`` is read as it is.

pyiceberg plans the snapshot's files (deletes applied, the snapshot's own schema); each file
is read by pyiceberg in turn, in the plan's order, the same at every read, so memory holds
one file's batches rather than the whole table (pyiceberg's own reader submits every file to
its thread pool at once). Rows are labelled by their 0-based place in that order. The
fingerprint is the table's uuid, the snapshot id and its manifest list.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from .._core import ConfigurationError, InputError
from .tables import (
    ICEBERG_URL,
    METADATA_SUFFIX,
    At,
    PinnedTable,
    extra,
    refuse_future,
    refuse_other,
)

__all__ = ["IcebergSnapshot", "current_metadata", "open_iceberg"]

_HINT = "version-hint.text"
# v3.metadata.json (file-system tables), 00004-<uuid>.metadata.json (catalogs); .gz. inside
_VERSIONED = re.compile(r"^(?:v(\d+)|(\d+)-[0-9a-fA-F-]+)(?:\.gz)?\.metadata\.json$")


def open_iceberg(data: Any, at: At) -> IcebergSnapshot:
    """The Iceberg table ``data`` at the snapshot ``at`` names (see the module)."""
    given = isinstance(data, str | os.PathLike)
    what = os.fspath(data) if given else "the pyiceberg Table"
    extra("iceberg", what)
    refuse_other(at, "iceberg", what)
    refuse_future(at, what)
    if not given:
        table, location = data, str(data.metadata_location)
    elif what.startswith(ICEBERG_URL):
        table, location = _from_catalog(what), what
    else:
        path = Path(what)
        metadata = current_metadata(path) if path.is_dir() else path
        table, location = _static(metadata), os.fspath(path.absolute())
    return IcebergSnapshot(table, location, _snapshot_id(table, at, what))


def current_metadata(folder: Path) -> Path:
    """A table folder's current metadata file (see the module)."""
    metadata = folder / "metadata"
    hint = metadata / _HINT
    if hint.is_file():
        # read as Iceberg's HadoopTableOperations and pyiceberg's StaticTable read it
        text = hint.read_text(encoding="utf-8").strip()
        if text.endswith(METADATA_SUFFIX):
            names = [text]
        elif text.isdigit():
            names = [f"v{text}{METADATA_SUFFIX}", f"v{text}.gz{METADATA_SUFFIX}"]
        else:
            names = [text + METADATA_SUFFIX]
        found = [metadata / name for name in names if (metadata / name).is_file()]
        if not found:
            raise InputError(
                f"{folder}: {_HINT} says {text!r}, but {metadata} holds no {names[0]}",
                path=str(hint),
            )
        return found[0]
    by_version: dict[int, list[Path]] = {}
    for path in metadata.iterdir():
        match = _VERSIONED.match(path.name)
        if match:
            by_version.setdefault(int(match.group(1) or match.group(2)), []).append(path)
    if not by_version:
        raise InputError(
            f"{folder}: no metadata file of a known name in {metadata} (v<N>.metadata.json or "
            "<N>-<uuid>.metadata.json): pass the metadata file to read",
            path=str(folder),
        )
    highest = max(by_version)
    candidates = sorted(by_version[highest])
    if len(candidates) > 1:
        listed = ", ".join(p.name for p in candidates)
        raise InputError(
            f"{folder}: {len(candidates)} metadata files claim version {highest} ({listed}) "
            "and no version-hint.text says which is current: pass the one the table's catalog "
            "points at",
            path=str(folder),
        )
    return candidates[0]


def _static(metadata: Path) -> Any:
    from pyiceberg.table import StaticTable  # noqa: PLC0415 (only for an Iceberg table)

    try:
        return StaticTable.from_metadata(os.fspath(metadata.absolute()))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{metadata} is not a readable Iceberg metadata file: {exc}", path=str(metadata)
        ) from None


def _from_catalog(url: str) -> Any:
    """``iceberg://<catalog>/<namespace>.<table>`` through pyiceberg's configuration."""
    from pyiceberg.catalog import load_catalog  # noqa: PLC0415 (only for an Iceberg table)
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # noqa: PLC0415
    from pyiceberg.utils.config import Config  # noqa: PLC0415

    parts = urlsplit(url)
    name, identifier = parts.netloc, parts.path.strip("/")
    if not name or "." not in identifier or parts.query or parts.fragment:
        raise ConfigurationError(
            f"{url}: an Iceberg catalog URL is iceberg://<catalog>/<namespace>.<table> "
            "(e.g. iceberg://prod/analytics.events)"
        )
    # read now, not at pyiceberg's import: a variable set since then counts
    config = Config().get_catalog_config(name)
    if not config:
        # pyiceberg reads a "-" of a catalog's name from a "_" of a variable's
        upper = name.upper().replace("-", "_")
        known = ", ".join(Config().get_known_catalogs()) or "none"
        raise ConfigurationError(
            f"{url}: no Iceberg catalog {name!r} is configured (configured: {known}): add it "
            f"to .pyiceberg.yaml, or set PYICEBERG_CATALOG__{upper}__URI (and "
            f"PYICEBERG_CATALOG__{upper}__TYPE, ...)"
        )
    try:
        catalog = load_catalog(name, **{k: v for k, v in config.items() if isinstance(v, str)})
    except (ValueError, ImportError, OSError) as exc:
        raise ConfigurationError(f"{url}: cannot open catalog {name!r}: {exc}") from None
    try:
        return catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise InputError(f"{url}: catalog {name!r} has no table {identifier}", path=url) from None


def _snapshot_id(table: Any, at: At, what: str) -> int | None:
    """The snapshot ``at`` names (None: the table has none yet: it holds no rows)."""
    if at.snapshot_id is not None:
        if table.snapshot_by_id(at.snapshot_id) is None:
            known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:]) or "none"
            raise InputError(
                f"{what}: the Iceberg table has no snapshot {at.snapshot_id} (its latest: {known})",
                path=what,
            )
        return at.snapshot_id
    if at.as_of is not None:
        found = table.snapshot_as_of_timestamp(int(at.as_of.value // 1_000_000))
        if found is None:
            raise InputError(
                f"{what}: the Iceberg table had no snapshot yet at {at.as_of.isoformat()}",
                path=what,
            )
        return int(found.snapshot_id)
    current = table.current_snapshot()
    return None if current is None else int(current.snapshot_id)


class IcebergSnapshot(PinnedTable):
    """One snapshot of an Iceberg table (see the module)."""

    format = "iceberg"

    def __init__(self, table: Any, location: str, snapshot_id: int | None) -> None:
        self.table = table
        self.location = location
        self.snapshot_id = snapshot_id
        # a sync's cursor range: pyiceberg's row filter (_sync.tables), and the range shown
        self.row_filter: Any = None
        self.range: dict[str, str] = {}

    @property
    def described(self) -> str:
        return f"Iceberg table {self.location} at snapshot {self.snapshot_id}"

    def _summary(self) -> dict[str, str]:
        snapshot = None if self.snapshot_id is None else self.table.snapshot_by_id(self.snapshot_id)
        summary = None if snapshot is None else snapshot.summary
        return {} if summary is None else dict(summary.additional_properties)

    @property
    def num_rows(self) -> int | None:
        if self.snapshot_id is None:
            return 0
        summary = self._summary()
        deletes = ("total-position-deletes", "total-equality-deletes")
        if "total-records" not in summary or any(summary.get(k, "0") != "0" for k in deletes):
            return None  # deletes to apply: only reading tells
        return int(summary["total-records"])

    def batches(
        self, rows: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow  # noqa: PLC0415

        narrowed = {} if self.row_filter is None else {"row_filter": self.row_filter}
        scan = self.table.scan(snapshot_id=self.snapshot_id, **narrowed)
        names = [f.name for f in scan.projection().fields]
        wanted = names if columns is None else [c for c in columns if c in names]
        if wanted and wanted != names:
            scan = self.table.scan(
                snapshot_id=self.snapshot_id, selected_fields=tuple(wanted), **narrowed
            )
        projection = scan.projection()
        schema = schema_to_pyarrow(projection, include_field_ids=False)
        if self.snapshot_id is None:
            return schema, iter(())
        try:
            tasks = list(scan.plan_files())
        except (ValueError, NotImplementedError, OSError) as exc:
            raise InputError(
                f"{self.described} cannot be read: {exc}", path=self.location
            ) from None
        reader = ArrowScan(
            self.table.metadata, self.table.io, projection, scan.row_filter, scan.case_sensitive
        )
        return schema, _batches(reader, tasks, rows, keep=bool(wanted))

    def fingerprint(self, rows: int) -> dict[str, Any]:
        snapshot = None if self.snapshot_id is None else self.table.snapshot_by_id(self.snapshot_id)
        manifests = "" if snapshot is None else str(snapshot.manifest_list)
        uuid = self.table.metadata.table_uuid
        digest = hashlib.sha256(f"iceberg\n{uuid}\n{self.snapshot_id}\n{manifests}\n".encode())
        if self.range:
            digest.update(f"range {sorted(self.range.items())}\n".encode())
        size = self._summary().get("total-files-size")
        return {
            "kind": "iceberg",
            "table": self.location,
            "snapshot_id": self.snapshot_id,
            **({"range": self.range} if self.range else {}),
            "size": int(size) if size is not None else (0 if snapshot is None else None),
            "rows": rows,
            "sha256": digest.hexdigest(),
        }


def _batches(reader: Any, tasks: list[Any], rows: int, *, keep: bool) -> Iterator[pa.RecordBatch]:
    """Each planned file's batches in turn, at most ``rows`` each."""
    for task in tasks:
        for batch in reader.to_record_batches([task]):
            if not keep:
                batch = batch.select([])
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)
