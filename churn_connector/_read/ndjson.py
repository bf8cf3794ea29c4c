"""NDJSON (``.ndjson``, ``.jsonl``, ``.json`` with one object per line), labelled by line.

Values keep their JSON types (integers beyond 64 bits included, so that validation can refuse
them); object columns avoid int -> float promotion on nulls. Blank lines are skipped (their
numbers still count). A line that is not a JSON object stops the read with an InputError
naming the file and line: nothing after it can be trusted to be what the export meant. The
one exception is the file's last line, without its newline, stopping inside its JSON: the
file was cut there, so that row is invalid (``truncated``, see ``ending``) and the rest is
read; a whole last line without its newline is read, with a note. A file of no lines (a
compressed empty one) gives no frame: 0 rows, and no columns to find missing.

A line that names a key twice in one object (``{"event_type": "a", "event_type": "b"}``, or
inside ``properties``) is valid JSON whose meaning is a guess (RFC 8259: readers differ): its
row is refused, check ``repeated_key``, with the column and the key (the slice's
``repeats``), and the rest of the file is read on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .._core import InputError, Note
from .._json import (
    Repeat,
    first_repeat,
    key_count,
    loads_exact,
    names_per_line,
    repeat_in,
    repeated_text_key,
)
from .compression import open_stream
from .ending import cut_json, unterminated
from .read_slice import RowProblem, RowRepeat, Slice


def _parse(line: bytes, path: Path, name: str, number: int) -> dict[str, Any]:
    try:
        record = loads_exact(line)
    except (orjson.JSONDecodeError, ValueError) as exc:
        if _cut(line, exc):
            raise _Cut from None
        hint = ""
        if number == 1 and line.lstrip().startswith(b"["):
            hint = " (the file holds a JSON array: write one object per line, NDJSON)"
        raise InputError(
            f"{name} line {number} is not valid JSON{hint}: {exc}", path=str(path), line=number
        ) from None
    if not isinstance(record, dict):
        hint = "one object per line"
        if number == 1 and isinstance(record, list):
            hint = "the file holds a JSON array: write one object per line, NDJSON"
        raise InputError(
            f"{name} line {number} is not a JSON object ({hint})",
            path=str(path),
            line=number,
        )
    return record


class _Cut(Exception):
    """The file's last line, without its newline, stops inside its JSON: it was cut."""


def _cut(line: bytes, exc: Exception) -> bool:
    # only the file's last line can lack its newline; a parse that ran out of text there
    # (orjson's position, in characters, at the end) is a cut, not a line of bad JSON
    if line.endswith(b"\n") or not isinstance(exc, json.JSONDecodeError):
        return False
    return exc.pos >= len(line.decode("utf-8", "replace").rstrip())


def repeat_of(line: str | bytes, record: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(column, key, message)`` when the line names a key twice in one object: at the top
    (the column is the key) or in a member's value (that member's column)."""
    found = repeat_in(line, record)
    return None if found is None else _described(found)


def _described(found: Repeat) -> tuple[str, str, str]:
    if found.top is None:
        message = (
            f"the line names the key {found.key!r} twice: which value is meant is a guess "
            "(RFC 8259 leaves it to each reader); keep the key once"
        )
        return found.key, found.key, message
    where = found.where[len(found.top) + 1 :]
    return found.top, found.key, str(repeated_text_key(found.top, where, found.key))


def _repeats(lines: list[bytes], records: list[dict[str, Any]]) -> dict[int, RowRepeat]:
    """The records whose line names a key twice, by position: the names each line writes,
    counted for the whole slice at once, against the names its parse kept; only a line that
    wrote more is parsed again keeping repeats."""
    written = names_per_line(lines)
    out: dict[int, RowRepeat] = {}
    for i in np.flatnonzero(written != [key_count(r) for r in records]).tolist():
        found = first_repeat(lines[i])
        if found is not None:
            out[i] = _described(found)
    return out


LONGEST_LINE = 64 << 20  # bytes of one NDJSON line (a record), as a CSV block's limit


def read_ndjson(path: Path, name: str, rows: int) -> Iterator[Slice]:
    """Slices of at most ``rows`` records, labelled by line; none for a file that holds no
    record (a compressed empty file: 0 rows, as an export day without any is)."""
    records: list[dict[str, Any]] = []
    texts: list[bytes] = []
    labels: list[int] = []
    number = 0
    # what the slice holding the last line says of it, if it is odd: cut, or unterminated
    cut: dict[int, RowProblem] = {}
    notes: tuple[Note, ...] = ()
    with open_stream(path) as raw:
        lines = io.BufferedReader(raw, buffer_size=1 << 20)
        while True:
            try:
                # at most the longest line we read: a longer one (a decompression bomb, a
                # file with no line breaks) is refused before it fills the memory
                line = lines.readline(LONGEST_LINE + 1)
            except (OSError, EOFError) as exc:
                raise InputError(
                    f"{name} cannot be read after line {number}: {exc}",
                    path=str(path),
                    line=number + 1,
                ) from None
            if not line:
                break
            number += 1
            if len(line) > LONGEST_LINE:
                raise InputError(
                    f"{name} line {number} is longer than {LONGEST_LINE >> 20} MiB (the "
                    "longest line read; a file that decompresses to far more than it holds, "
                    "or that has no line breaks, is refused so): split the record, or export "
                    "the file as Parquet",
                    path=str(path),
                    line=number,
                )
            if not line.strip():
                continue
            try:
                records.append(_parse(line, path, name, number))
                texts.append(line)
            except _Cut:  # a row of nulls keeps its place; its problem says why
                records.append({})
                texts.append(b"{}")
                cut = {len(records) - 1: cut_json(number)}
            else:
                if not line.endswith(b"\n"):
                    notes = (unterminated(name, number, None),)
            labels.append(number)
            if len(records) >= rows or cut or notes:
                yield _sliced(records, labels, texts, cut, notes)
                records, texts, labels = [], [], []
    if records:
        yield _sliced(records, labels, texts, cut, notes)


def _sliced(
    records: list[dict[str, Any]],
    labels: list[int],
    texts: list[bytes],
    cut: dict[int, RowProblem],
    notes: tuple[Note, ...],
) -> Slice:
    frame = records_frame(records, labels)
    return Slice(frame, cut, _repeats(texts, records), notes)


def records_frame(records: list[dict[str, Any]], labels: list[int]) -> pd.DataFrame:
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    index = pd.Index(labels, dtype="int64")
    # object columns keep each JSON value's own type (no int -> float promotion on nulls)
    data = {c: pd.Series([r.get(c) for r in records], index=index, dtype=object) for c in columns}
    return pd.DataFrame(data, index=index)
