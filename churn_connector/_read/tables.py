"""Delta Lake and Iceberg tables: read as their tables, at one version, never file by file.

A table's folder holds the Parquet files of every version it kept (overwritten, deleted and
compacted ones too) beside its log or metadata: read file by file it would give rows that
are no longer in the table, and miss what the log says of the others (deletion vectors,
column mapping, partition values). So these inputs are recognised before any file is
listed, and read through the table format's own library:

* a **Delta table**: a folder holding ``_delta_log/``, or a ``deltalake.DeltaTable``
  (``delta``; the ``[delta]`` extra);
* an **Iceberg table**: its metadata file (``…/metadata/00004-….metadata.json``), its
  table folder (holding ``metadata/``), ``iceberg://<catalog>/<namespace>.<table>``, or a
  pyiceberg ``Table`` (``iceberg``; the ``[iceberg]`` extra).

``pin`` resolves the version a run names (:class:`At`) once: every read of that run (an
identities input is read twice, a re-send reads it again) sees that version, whatever a
writer commits meanwhile. The libraries are imported only here, when such a table is read.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa

from .._core import ConfigurationError, InputError, named

__all__ = [
    "DELTA_LOG",
    "ICEBERG_URL",
    "METADATA_SUFFIX",
    "NOW",
    "At",
    "PinnedTable",
    "TableFormat",
    "extra",
    "pin",
    "refuse_future",
    "refuse_other",
    "refuse_tables_within",
    "refuse_versions",
    "table_format",
]

TableFormat = Literal["delta", "iceberg"]
DELTA_LOG = "_delta_log"
ICEBERG_URL = "iceberg://"
METADATA_SUFFIX = ".metadata.json"
_EXTRAS: dict[TableFormat, tuple[str, str]] = {
    "delta": ("deltalake", 'pip install "churn-connector[delta]"'),
    "iceberg": ("pyiceberg", 'pip install "churn-connector[iceberg]"'),
}


@dataclass(frozen=True)
class At:
    """The version of a table a run reads: a Delta ``version``, an Iceberg ``snapshot_id``,
    or the one current at the instant ``as_of`` (a UTC Timestamp); none: the current one."""

    version: int | None = None
    as_of: pd.Timestamp | None = None
    snapshot_id: int | None = None

    def given(self) -> list[str]:
        """The options set, by name."""
        return [
            name for name in ("version", "as_of", "snapshot_id") if getattr(self, name) is not None
        ]


NOW = At()


class PinnedTable(ABC):
    """A table at one version: what a run reads, counts and fingerprints."""

    format: TableFormat
    location: str  # the table as given (a path made absolute, a URL), for people

    @property
    @abstractmethod
    def described(self) -> str:
        """The table and its version, as messages name it."""

    @property
    @abstractmethod
    def num_rows(self) -> int | None:
        """The rows of this version, when its metadata says exactly (None otherwise)."""

    @abstractmethod
    def batches(
        self, rows: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """The schema, and the rows as batches of at most ``rows``, in the same order at
        every read; ``columns``: only these (those the table has)."""

    @abstractmethod
    def fingerprint(self, rows: int) -> dict[str, Any]:
        """The input's identity for receipts, rows files and re-sends (``_read.fingerprint``)."""


def table_format(data: Any) -> TableFormat | None:
    """Which table ``data`` is, if it is one (no library imported to tell)."""
    if isinstance(data, PinnedTable):
        return data.format
    if isinstance(data, str | os.PathLike):
        text = os.fspath(data)
        if text.startswith(ICEBERG_URL):
            return "iceberg"
        path = Path(text)
        if path.is_dir():
            if (path / DELTA_LOG).is_dir():
                return "delta"
            if (path / "metadata").is_dir() and any(
                p.name.endswith(METADATA_SUFFIX) for p in (path / "metadata").iterdir()
            ):
                return "iceberg"
            return None
        return "iceberg" if path.name.endswith(METADATA_SUFFIX) and path.is_file() else None
    module = type(data).__module__.split(".")[0]
    if module == "deltalake" and type(data).__name__ == "DeltaTable":
        return "delta"
    if module == "pyiceberg" and any(
        kind.__module__ == "pyiceberg.table" and kind.__name__ == "Table"
        for kind in type(data).__mro__
    ):
        return "iceberg"
    return None


def refuse_tables_within(files: Sequence[Path], root: Path, what: str) -> None:
    """A folder or glob that reaches into a Delta or Iceberg table would read its files one
    by one, every version's: refused, naming the table to pass instead."""
    seen: set[Path] = set()
    for path in files:
        folder = path.parent
        while folder not in seen:
            seen.add(folder)
            form = table_format(folder)
            if form is not None:
                name = "a Delta" if form == "delta" else "an Iceberg"
                raise InputError(
                    f"{what} reaches into {name} table, {folder}: its files hold every version "
                    "it kept, so they are not read one by one; pass the table's folder to read "
                    "it as its table",
                    path=str(folder),
                )
            if folder == root or root not in folder.parents:
                break
            folder = folder.parent


def extra(form: TableFormat, what: str) -> Any:
    """The table format's library, imported now; without it, a ConfigurationError naming
    the extra that installs it (``what``: the input, as the message names it)."""
    module, install = _EXTRAS[form]
    try:
        return importlib.import_module(module)
    except ImportError:
        name = "a Delta table" if form == "delta" else "an Iceberg table"
        raise ConfigurationError(
            f"{what} is {name}, read through the {module} package, which is not installed: "
            f"{install}"
        ) from None


def pin(data: Any, at: At = NOW) -> PinnedTable:
    """The table ``data`` at the version ``at`` names (see the module)."""
    if isinstance(data, PinnedTable):
        return data
    form = table_format(data)
    if form == "delta":
        from .delta import open_delta  # noqa: PLC0415 (loads deltalake: only for a table)

        return open_delta(data, at)
    if form == "iceberg":
        from .iceberg import open_iceberg  # noqa: PLC0415 (loads pyiceberg: likewise)

        return open_iceberg(data, at)
    raise TypeError(f"not a table: {type(data).__name__}")


def refuse_versions(at: At, what: str) -> None:
    """A version named for an input that has none is refused, never ignored."""
    given = at.given()
    if given:
        options = ", ".join(named(n) for n in given)
        raise ConfigurationError(
            f"{options}: for a Delta or Iceberg table (a folder holding _delta_log/, an "
            f"Iceberg metadata file or table folder, iceberg://...); {what} is none: it has "
            "only one version (drop the option)"
        )


def refuse_other(at: At, form: TableFormat, what: str) -> None:
    """A Delta table has versions, an Iceberg table snapshots: the other is refused."""
    if form == "delta" and at.snapshot_id is not None:
        raise ConfigurationError(
            f"{named('snapshot_id')}: for an Iceberg table; {what} is a Delta table, read at "
            f"a version: {named('version')}, or {named('as_of')}"
        )
    if form == "iceberg" and at.version is not None:
        raise ConfigurationError(
            f"{named('version')}: for a Delta table; {what} is an Iceberg table, read at a "
            f"snapshot: {named('snapshot_id')}, or {named('as_of')}"
        )


def refuse_future(at: At, what: str) -> None:
    """``as_of`` after now names a state nobody can know yet (a writer may still commit)."""
    if at.as_of is not None and at.as_of > pd.Timestamp.now(tz="UTC"):
        raise ConfigurationError(
            f"{named('as_of')} {at.as_of.isoformat()} is in the future: {what} may still "
            "change before then; name a past instant, or drop the option for the current "
            "version"
        )
