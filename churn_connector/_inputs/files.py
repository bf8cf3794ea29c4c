"""Files, folders of part files and globs -> DataFrame slices, each row labelled.

Formats by name: ``.parquet`` (``.pq``), ``.csv``, ``.tsv`` (``.tab``), NDJSON (``.ndjson``,
``.jsonl``, ``.json`` holding one object per line), text formats optionally compressed
(``.gz``, ``.zst``, ``.bz2``, ``.lz4``). A folder (or a glob) is read as warehouse unloads
write it: its part files in name order (sub-folders included, as Hive-style partitions
write them), zero-byte parts skipped, marker and hidden files (``_SUCCESS``, ``*.crc``,
names starting with ``.`` or ``_``) ignored; all parts must have one format.

Labels: a single CSV/NDJSON file's rows are labelled by their line number (as an editor shows
it), a single Parquet file's by their 0-based row number; rows of several files carry the
part's name too (``part-00001.csv:12``). A file that cannot be read, or that breaks part way,
raises InputError naming the file and the place; nothing else escapes from a reader.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._exceptions import InputError
from .arrow import arrow_to_pandas
from .csv import read_csv
from .ndjson import read_ndjson
from .streams import SUFFIXES

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "ndjson",
}
_ACCEPTED = ".parquet, .csv, .tsv, .ndjson/.jsonl/.json (text formats also .gz/.zst/.bz2/.lz4)"


def format_of(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in SUFFIXES:
        suffixes = suffixes[:-1]
    return FORMATS.get(suffixes[-1]) if suffixes else None


def _ignored(relative: Path) -> bool:
    return any(part.startswith((".", "_")) for part in relative.parts) or relative.suffix in (
        ".crc",
    )


def expand(data: str | Path) -> tuple[list[Path], Path | None]:
    """The files an argument names, and the folder their labels are relative to (None: one
    file given by itself)."""
    path = Path(data)
    if path.is_file():
        return [path], None
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file())
        parts = [p for p in found if not _ignored(p.relative_to(path)) and p.stat().st_size]
        if not parts:
            raise InputError(f"folder {path} holds no part files", path=str(path))
        _one_format(parts, path)
        return parts, path
    if glob.has_magic(str(data)):
        matches = sorted(Path(p) for p in glob.glob(str(data), recursive=True))
        parts = [p for p in matches if p.is_file() and not _ignored(Path(p.name))]
        parts = [p for p in parts if p.stat().st_size]
        if not parts:
            raise InputError(f"no files match {data}", path=str(data))
        _one_format(parts, Path(str(data)))
        return parts, Path(".")
    raise InputError(f"no such file or folder: {path}", path=str(path))


def _one_format(parts: Sequence[Path], where: Path) -> None:
    kinds = {p.name: format_of(p) for p in parts}
    unknown = [name for name, kind in kinds.items() if kind is None]
    if unknown:
        raise InputError(
            f"{where}: {unknown[0]} is not a data file this package reads ({_ACCEPTED})",
            path=str(where),
        )
    if len(set(kinds.values())) > 1:
        examples = {kind: name for name, kind in kinds.items()}
        listed = ", ".join(f"{name} ({kind})" for kind, name in examples.items())
        raise InputError(
            f"{where} mixes formats ({listed}): one format per folder", path=str(where)
        )


def read_paths(
    data: str | Path,
    rows: int,
    *,
    columns: Sequence[str] | None = None,
    encoding: str = "utf-8",
) -> Iterator[pd.DataFrame]:
    """Every row of the file, folder or glob ``data``, in slices of at most ``rows``."""
    paths, base = expand(data)
    several = base is not None
    for path in paths:
        name = str(path.relative_to(base)) if base is not None and base != Path(".") else path.name
        if not several and path.stat().st_size == 0:
            raise InputError(f"{path.name} is empty (0 bytes)", path=str(path))
        for frame in read_file(path, name, rows, columns=columns, encoding=encoding):
            if several:
                labels = [f"{name}:{label}" for label in frame.index.tolist()]
                frame = frame.set_axis(pd.Index(labels, dtype=object), axis=0)
            yield frame


def read_file(
    path: Path,
    name: str,
    rows: int,
    *,
    columns: Sequence[str] | None = None,
    encoding: str = "utf-8",
) -> Iterator[pd.DataFrame]:
    kind = format_of(path)
    if kind == "parquet":
        if path.suffix.lower() in SUFFIXES:
            raise InputError(
                f"{name}: Parquet compresses itself; name the file .parquet", path=str(path)
            )
        return read_parquet(path, name, rows, columns)
    if kind in ("csv", "tsv"):
        delimiter = "\t" if kind == "tsv" else ","
        return read_csv(path, name, rows, delimiter=delimiter, encoding=encoding)
    if kind == "ndjson":
        return read_ndjson(path, name, rows)
    raise InputError(f"unsupported file type {path.name!r}: use {_ACCEPTED}", path=str(path))


def read_parquet(
    path: Path, name: str, rows: int, columns: Sequence[str] | None
) -> Iterator[pd.DataFrame]:
    try:
        # page checksums, where the writer stored them, catch corruption instead of garbage
        file = pq.ParquetFile(path, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{name} is not a readable Parquet file: {exc}", path=str(path)) from None
    offset = 0
    with file:
        if columns is not None:
            present = set(file.schema_arrow.names)
            columns = [c for c in columns if c in present]
        batches = file.iter_batches(batch_size=rows, columns=columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (pa.ArrowException, OSError) as exc:
                group = _row_group_of(file, offset)
                raise InputError(
                    f"{name} breaks at row {offset} (row group {group} of "
                    f"{file.metadata.num_row_groups}): {exc}; the rows before it were read",
                    path=str(path),
                ) from None
            yield arrow_to_pandas(batch, pd.RangeIndex(offset, offset + batch.num_rows))
            offset += batch.num_rows
        if offset == 0:
            schema = file.schema_arrow
            if columns is not None:
                schema = pa.schema([schema.field(c) for c in columns])
            empty = pa.RecordBatch.from_pylist([], schema=schema)
            yield arrow_to_pandas(empty, pd.Index([], dtype=np.int64))


def _row_group_of(file: pq.ParquetFile, row: int) -> int:
    seen = 0
    for group in range(file.metadata.num_row_groups):
        seen += int(file.metadata.row_group(group).num_rows)
        if row < seen:
            return group
    last: int = file.metadata.num_row_groups - 1
    return last
