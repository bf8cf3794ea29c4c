"""NDJSON (``.ndjson``, ``.jsonl``, ``.json`` with one object per line), labelled by line.

Values keep their JSON types (integers beyond 64 bits included, so that validation can refuse
them); object columns avoid int -> float promotion on nulls. Blank lines are skipped (their
numbers still count). A line that is not a JSON object stops the read with an InputError
naming the file and line: nothing after it can be trusted to be what the export meant.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from .._core.exceptions import InputError
from .._json.values import loads_exact
from .compression import open_stream


def _parse(line: bytes, path: Path, name: str, number: int) -> dict[str, Any]:
    try:
        record = loads_exact(line)
    except (orjson.JSONDecodeError, ValueError) as exc:
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


def read_ndjson(path: Path, name: str, rows: int) -> Iterator[pd.DataFrame]:
    records: list[dict[str, Any]] = []
    labels: list[int] = []
    produced = False
    number = 0
    with open_stream(path) as raw:
        lines = io.BufferedReader(raw, buffer_size=1 << 20)
        while True:
            try:
                line = lines.readline()
            except (OSError, EOFError) as exc:
                raise InputError(
                    f"{name} cannot be read after line {number}: {exc}",
                    path=str(path),
                    line=number + 1,
                ) from None
            if not line:
                break
            number += 1
            if not line.strip():
                continue
            records.append(_parse(line, path, name, number))
            labels.append(number)
            if len(records) >= rows:
                yield records_frame(records, labels)
                produced = True
                records, labels = [], []
    if records or not produced:
        yield records_frame(records, labels)


def records_frame(records: list[dict[str, Any]], labels: list[int]) -> pd.DataFrame:
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    index = pd.Index(labels, dtype="int64")
    # object columns keep each JSON value's own type (no int -> float promotion on nulls)
    data = {c: pd.Series([r.get(c) for r in records], index=index, dtype=object) for c in columns}
    return pd.DataFrame(data, index=index)
