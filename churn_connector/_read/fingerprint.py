"""The input's fingerprint: what was read, in a form a later run (``resend``) can compare.

What "what was read" is depends on the input:

* a file: the SHA-256 of its bytes as stored (compressed or not), so ``sha256sum FILE``
  prints the same digest;
* a folder, a manifest or a glob: the SHA-256 of the ``sha256sum`` lines of its part files,
  in the order they are read (``<digest>  <name relative to the folder>\\n`` each), so the
  parts' names and contents both count, and the bytes of files the reader skips do not;
* a table (a DataFrame, Arrow, polars, DuckDB, an iterable of them): the SHA-256 of its
  column names and of pandas' 64-bit hash of every row read, labels included
  (``pandas.util.hash_pandas_object``; cells pandas cannot hash, such as dicts, by their
  text). A table is only known by reading it, so its digest covers the rows read;
* a Delta or Iceberg table (``tables``): its identity at the version read, which its log
  or metadata fixes: kind ``"delta"`` with ``version``, or ``"iceberg"`` with
  ``snapshot_id``, and ``table`` (where it is); the SHA-256 of the table's id, the version
  and what that version consists of (``delta``, ``iceberg`` say what), so re-reading the
  same version gives the same fingerprint without hashing its rows;
* a database query (``query``): kind ``"query"``, its text, the connection without its
  password and, when a sync narrowed it, the ``range`` read; the SHA-256 of these.

``size`` is the bytes of the files (a Delta or Iceberg version's data files; None for a
table in memory); ``rows`` the rows read.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._core import InputError, value_text
from .files import expand, format_of, part_name
from .query import Query
from .spool import SpooledArrow
from .tables import PinnedTable
from .text import DEFAULT_TEXT, TextFormat

_CHUNK = 1 << 20
TEXT_LINES = ("csv", "tsv", "ndjson")  # formats whose row labels are line numbers


@dataclass(frozen=True)
class Part:
    """One file of the input: its name (relative to the folder), path, format and size."""

    name: str
    path: Path
    format: str | None
    size: int


@dataclass(frozen=True)
class Source:
    """What the input is: one file, the parts of a folder/manifest/glob, or a table."""

    kind: str  # "file", "folder", "table", "query", or "delta" / "iceberg" (at a version)
    path: str | None  # as the caller gave it (a Delta or Iceberg table: where it is)
    parts: tuple[Part, ...] = ()

    @classmethod
    def of(cls, data: Any, text: TextFormat = DEFAULT_TEXT) -> Source:
        if isinstance(data, PinnedTable):
            return cls(data.format, data.location)
        query = query_of(data)
        if query is not None:
            return cls("query", query.where)
        if not isinstance(data, str | os.PathLike):
            return cls("table", None)
        given = os.fspath(data)
        found = expand(data, text)
        base = found.base
        parts = tuple(
            Part(
                part_name(p, base),
                p,
                format_of(p, text),
                p.stat().st_size,
            )
            for p in found.files
        )
        return cls("file" if base is None else "folder", given, parts)

    def locate(self, label: Any) -> tuple[str | None, int | None]:
        """The file (as a path people can open) and line a row label points at: a CSV or
        NDJSON row's line, None for a Parquet or Avro row (its label is a row number) or a
        table's."""
        if self.kind in ("table", "query", "delta", "iceberg") or not self.parts:
            return None, None
        if self.kind == "file":
            part = self.parts[0]
            line = _int(label) if part.format in TEXT_LINES else None
            return str(part.path), line
        name, sep, rest = str(label).rpartition(":")
        by_name = {p.name: p for p in self.parts}
        if not sep or name not in by_name:
            return None, None
        part = by_name[name]
        return str(part.path), _int(rest) if part.format in TEXT_LINES else None


def query_of(data: Any) -> Query | None:
    """The database query ``data`` is (spooled or not), if it is one."""
    if isinstance(data, SpooledArrow):
        data = data.source
    return data if isinstance(data, Query) else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class Fingerprinter:
    """Accumulates an input's fingerprint while its slices are read (see the module)."""

    def __init__(
        self, data: Any, text: TextFormat = DEFAULT_TEXT, *, upto: int | None = None
    ) -> None:
        self.data = data
        self.text = text
        self.upto = upto  # a table: hash its first rows only (what a stopped run read)
        self.rows = 0
        self._pinned = data if isinstance(data, PinnedTable) else None
        self._query = query_of(data)
        self._tables = (
            self._pinned is None and self._query is None and not isinstance(data, str | os.PathLike)
        )
        self._hash = hashlib.sha256()
        self._columns: list[str] | None = None
        self._source: Source | None = None

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = Source.of(self.data, self.text)
        return self._source

    def add(self, df: pd.DataFrame) -> None:
        """Count one slice's rows (and hash them, for a table)."""
        seen = self.rows
        self.rows += len(df)
        if not self._tables:
            return
        if self.upto is not None:
            if seen >= self.upto:
                return
            df = df.iloc[: self.upto - seen]
        columns = [str(c) for c in df.columns]
        if columns != self._columns:
            self._columns = columns
            self._hash.update(("\x1f".join(columns) + "\x1e").encode("utf-8", "surrogatepass"))
        self._hash.update(frame_hashes(df).tobytes())

    def result(self) -> dict[str, Any]:
        """``{"kind", "size", "rows", "sha256"}`` (see the module); files that can no longer
        be read (a run stopped by a broken input) have a ``sha256`` of None."""
        if self._tables:
            rows = self.rows if self.upto is None else min(self.rows, self.upto)
            return {"kind": "table", "size": None, "rows": rows, "sha256": self._hash.hexdigest()}
        if self._pinned is not None:
            return self._pinned.fingerprint(self.rows)
        if self._query is not None:
            return self._query.fingerprint(self.rows)
        try:
            return self._of_files()
        except (OSError, InputError):
            kind = "file" if not isinstance(self._source, Source) else self._source.kind
            return {"kind": kind, "size": None, "rows": self.rows, "sha256": None}

    def _of_files(self) -> dict[str, Any]:
        source = self.source
        lines = [f"{file_sha256(p.path)}  {p.name}\n" for p in source.parts]
        if source.kind == "file":
            digest = lines[0].split()[0] if lines else hashlib.sha256().hexdigest()
        else:
            digest = hashlib.sha256("".join(lines).encode()).hexdigest()
        return {
            "kind": source.kind,
            "size": sum(p.size for p in source.parts),
            "rows": self.rows,
            "sha256": digest,
        }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def frame_hashes(df: pd.DataFrame) -> np.ndarray:
    """One 64-bit hash per row (its label and cells, column by column), as pandas hashes
    them; a column pandas cannot hash (dicts, lists, mixed objects, lone surrogates) by its
    cells' text."""
    with np.errstate(over="ignore"):
        out = _hashed(df.index.to_series())
        for i in range(df.shape[1]):
            out = out * np.uint64(1_000_003) ^ _hashed(df.iloc[:, i])
    return out


def _hashed(column: pd.Series) -> np.ndarray:
    try:
        return pd.util.hash_pandas_object(column, index=False).to_numpy(np.uint64)
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        text = column.map(lambda v: ascii(value_text(v)))
        return pd.util.hash_pandas_object(text, index=False).to_numpy(np.uint64)
