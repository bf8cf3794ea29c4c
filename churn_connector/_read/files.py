"""Files, folders of part files and globs -> slices of the input, each row labelled.

Formats by name: ``.parquet`` (``.pq``), ``.csv``, ``.tsv`` (``.tab``), NDJSON (``.ndjson``,
``.jsonl``, ``.json`` holding one object per line), ``.avro`` (the ``[avro]`` extra),
``.orc``, Arrow IPC (``.arrow``, ``.feather``: the file format or the stream format, told by
their first bytes; ``.arrows``), text formats optionally compressed (``.gz``, ``.zst``,
``.bz2``, ``.lz4``); a file whose name says no format (Redshift's ``0000_part_00``) is read as
``TextFormat.format`` says. A compressed Parquet, Avro, ORC or Arrow file is refused: their
readers cannot open it, and they compress inside. A folder (or a glob) is read as warehouse
unloads write it: through its Redshift manifest when it holds one (``manifest``), else its
part files in name order (sub-folders included), only what the job committed (``commits``:
never ``_temporary/``, markers, checksums or hidden files; a Databricks folder's parts only
as its ``_committed_<tid>`` list them), zero-byte parts skipped; all parts must have one
format; ``key=value`` folders restore their columns (``hive``). A folder whose parts are all
empty, or that holds only a marker, is an export day without rows (0 rows); a folder with no
file at all is an error (a wrong path is likelier). A Delta or Iceberg table's folder is not
read here, file by file, but as its table (``tables``).

Labels: a single CSV/NDJSON file's rows are labelled by their line number (as an editor shows
it), a single Parquet, Avro, ORC or Arrow file's by their 0-based row number; rows of several
files carry the part's name too (``part-00001.csv:12``). A file that cannot be read, or that
breaks part way, raises InputError naming the file and the place; nothing else escapes from a
reader.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._core import InputError, option
from .arrow import arrow_to_pandas
from .avro import read_avro
from .columnar import read_arrow, read_orc
from .commits import committed, hidden
from .compression import SUFFIXES
from .csv import is_empty, read_csv
from .hive import Layout, layout_of
from .manifest import Manifest, is_manifest_name, manifests_in, read_manifest
from .ndjson import read_ndjson
from .read_slice import Slice
from .tables import refuse_tables_within
from .text import DEFAULT_TEXT, TEXT_FORMATS, TextFormat

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "ndjson",
    ".avro": "avro",
    ".orc": "orc",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".arrows": "arrow",
}
_ACCEPTED = (
    ".parquet, .csv, .tsv, .ndjson/.jsonl/.json, .avro, .orc, .arrow/.feather (text formats "
    "also .gz/.zst/.bz2/.lz4)"
)
# formats that compress inside: their readers cannot open a compressed file
_SELF_COMPRESSED = {"parquet": "Parquet", "avro": "Avro", "orc": "ORC", "arrow": "Arrow IPC"}


def format_of(path: Path, text: TextFormat = DEFAULT_TEXT) -> str | None:
    """The file's format: by its name, else ``text.format``; a name that says another
    format than ``text.format`` is refused."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in SUFFIXES:
        suffixes = suffixes[:-1]
    named = FORMATS.get(suffixes[-1]) if suffixes else None
    if text.format is None or named == text.format:
        return named
    if named is None:
        return text.format
    if named in TEXT_FORMATS and text.format in TEXT_FORMATS:
        return named  # a .tsv stays tab-separated under format="csv"
    raise InputError(
        f"{path.name}: its name says {named}, but format={text.format!r}: rename the file or "
        "drop format= (it is for files whose name says no format)",
        path=str(path),
    )


@dataclass(frozen=True)
class Parts:
    """The files an argument names, the folder their labels are relative to (None: one file
    given by itself), and the manifest that listed them, if one did."""

    files: list[Path]
    base: Path | None
    manifest: Manifest | None = None
    root: Path | None = None  # where partition folders start: the folder, a glob's fixed part


@dataclass(frozen=True)
class FileSubset:
    """Some of the part files of a folder or glob (``names``: as ``part_name`` gives them),
    read, labelled, partitioned and fingerprinted as the folder's (a folder sync's new
    files). A path to the folder as far as ``os.fspath`` goes."""

    path: str
    names: frozenset[str]

    def __fspath__(self) -> str:
        return self.path


def part_name(path: Path, base: Path | None) -> str:
    """A part file's name in its rows' labels (``part:row``): its path below the folder."""
    return str(path.relative_to(base)) if base is not None else path.name


def expand(data: str | os.PathLike[str], text: TextFormat = DEFAULT_TEXT) -> Parts:
    """The files ``data`` names (see the module docstring)."""
    if isinstance(data, FileSubset):
        whole = expand(data.path, text)
        chosen = [p for p in whole.files if part_name(p, whole.base) in data.names]
        return replace(whole, files=chosen)
    path = Path(data)
    if path.is_file():
        if is_manifest_name(path):
            return _through(read_manifest(path), path.parent, text)
        return Parts([path], None)
    if path.is_dir():
        manifests = manifests_in(path)
        if len(manifests) > 1:
            listed = ", ".join(p.name for p in manifests)
            raise InputError(
                f"folder {path} holds {len(manifests)} Redshift manifests ({listed}): pass the "
                "one to read",
                path=str(path),
            )
        if manifests:
            return _through(read_manifest(manifests[0]), path, text)
        found = sorted(p for p in path.rglob("*") if p.is_file())
        if not found:
            raise InputError(f"folder {path} holds no part files", path=str(path))
        kept = committed([p for p in found if not hidden(p.relative_to(path))])
        refuse_tables_within(kept, path, f"folder {path}")
        parts = [p for p in kept if p.stat().st_size]
        # empty parts or a marker (_SUCCESS) prove the writer ran: a day without rows
        if not kept and not any(p.name.startswith("_") for p in found):
            raise InputError(f"folder {path} holds no part files", path=str(path))
        _one_format(parts, path, text)
        return Parts(parts, path, root=path)
    if glob.has_magic(str(data)):
        root = _fixed_start(str(data))
        matches = sorted(Path(p) for p in glob.glob(str(data), recursive=True))
        # below the glob's fixed start, as in a folder: never a marker, _temporary/, .hidden
        files = committed([p for p in matches if p.is_file() and not hidden(p.relative_to(root))])
        if not files:
            raise InputError(f"no files match {data}", path=str(data))
        refuse_tables_within(files, root, f"the glob {data}")
        parts = [p for p in files if p.stat().st_size]
        _one_format(parts, Path(str(data)), text)
        # labelled below the fixed start, as a folder's parts are: part-0.parquet in two
        # partition folders are two parts
        return Parts(parts, root, root=root)
    raise InputError(f"no such file or folder: {path}", path=str(path))


def _fixed_start(pattern: str) -> Path:
    """The folder a glob's matches lie below: its components before the first wildcard."""
    fixed: list[str] = []
    for part in Path(pattern).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _through(manifest: Manifest, base: Path, text: TextFormat) -> Parts:
    if manifest.columns and text.columns and len(manifest.columns) != len(text.columns):
        raise InputError(
            f"columns= names {len(text.columns)} columns, but {manifest.path.name} says the "
            f"unload has {len(manifest.columns)}: {', '.join(manifest.columns)}",
            path=str(manifest.path),
        )
    parts = [p for p in manifest.parts if p.stat().st_size]
    _one_format(parts, base, text)
    return Parts(parts, base, manifest, root=base)


def _one_format(parts: Sequence[Path], where: Path, text: TextFormat) -> None:
    kinds = {p.name: format_of(p, text) for p in parts}
    unknown = [name for name, kind in kinds.items() if kind is None]
    if unknown:
        raise InputError(
            f"{where}: {unknown[0]} is not a data file this package reads by its name "
            f"({_ACCEPTED}); if it is a part without a suffix, such as Redshift UNLOAD's "
            f"0000_part_00, say its format: {option('format', 'csv')}",
            path=str(where),
        )
    if len(set(kinds.values())) > 1:
        examples = {kind: name for name, kind in kinds.items()}
        listed = ", ".join(f"{name} ({kind})" for kind, name in examples.items())
        raise InputError(
            f"{where} mixes formats ({listed}): one format per folder", path=str(where)
        )


def read_paths(
    data: str | os.PathLike[str],
    rows: int,
    *,
    columns: Sequence[str] | None = None,
    encoding: str = "utf-8",
    text: TextFormat = DEFAULT_TEXT,
    partitioning: bool = True,
) -> Iterator[Slice]:
    """Every row of the file, folder or glob ``data``, in slices of at most ``rows``; with
    ``partitioning``, each with the columns of its ``key=value`` folders (``hive``)."""
    found = expand(data, text)
    base = found.base
    several = base is not None
    layout = partitions(found) if partitioning else None
    for path in found.files:
        name = part_name(path, base)
        if not several and path.stat().st_size == 0 and text.header:
            raise InputError(f"{path.name} is empty (0 bytes)", path=str(path))
        if several and format_of(path, text) in TEXT_FORMATS and is_empty(path):
            continue  # a compressed part holding nothing: no rows, and no header to read
        for part in read_file(path, name, rows, columns=columns, encoding=encoding, text=text):
            if layout is not None:
                part = layout.restore(part, path, name)
            if several:
                labels = [f"{name}:{label}" for label in part.frame.index.tolist()]
                part = part.with_frame(part.frame.set_axis(pd.Index(labels, dtype=object), axis=0))
            yield part


def partitions(found: Parts) -> Layout | None:
    """The ``key=value`` layout of the parts (None: they have none)."""
    return layout_of(found.files, found.root)


def read_file(
    path: Path,
    name: str,
    rows: int,
    *,
    columns: Sequence[str] | None = None,
    encoding: str = "utf-8",
    text: TextFormat = DEFAULT_TEXT,
) -> Iterator[Slice]:
    """The slices of one file: a text file's with what its reader says of their rows (a
    line it could not split, a last line without its newline); the others' say nothing."""
    kind = format_of(path, text)
    if kind is None:
        raise InputError(
            f"unsupported file type {path.name!r}: use {_ACCEPTED}, or say the format of a "
            "file whose name says none (Redshift UNLOAD's 0000_part_00): "
            f"{option('format', 'csv')}",
            path=str(path),
        )
    if kind not in TEXT_FORMATS and (given := text.given()):
        raise InputError(
            f"{', '.join(given)}: for CSV/TSV files; {name} is {kind}, which carries its own "
            "columns and nulls (drop the option)",
            path=str(path),
        )
    if kind in _SELF_COMPRESSED and path.suffix.lower() in SUFFIXES:
        raise InputError(
            f"{name} is a {SUFFIXES[path.suffix.lower()]}-compressed {_SELF_COMPRESSED[kind]} "
            f"file, which {_SELF_COMPRESSED[kind]} readers cannot open ({_SELF_COMPRESSED[kind]} "
            f"compresses inside): decompress it and pass {path.stem}",
            path=str(path),
        )
    if kind == "parquet":
        return map(Slice, read_parquet(path, name, rows, columns))
    if kind == "avro":
        return map(Slice, read_avro(path, name, rows, columns))
    if kind == "orc":
        return map(Slice, read_orc(path, name, rows, columns))
    if kind == "arrow":
        return map(Slice, read_arrow(path, name, rows, columns))
    if kind in TEXT_FORMATS:
        return read_csv(path, name, rows, kind=kind, text=text, encoding=encoding)
    if kind == "ndjson":
        return read_ndjson(path, name, rows)
    raise InputError(f"unsupported file type {path.name!r}: use {_ACCEPTED}", path=str(path))


def read_parquet(
    path: Path, name: str, rows: int, columns: Sequence[str] | None
) -> Iterator[pd.DataFrame]:
    try:
        # page checksums, where the writer stored them, catch corruption instead of garbage;
        # no pre-buffering: its cache keeps every row group's bytes read so far until the
        # file closes (about 10 bytes a row, 300 MB for 30M rows; apache/arrow#39808), and
        # a local file read column chunk by column chunk is no slower
        file = pq.ParquetFile(path, page_checksum_verification=True, pre_buffer=False)
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
