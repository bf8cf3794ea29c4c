"""``dtypes=``: CSV cells are text; a caller may say what some columns hold instead.

Each named column is converted cell by cell, exactly: ``int64`` reads whole numbers (any
size: validation refuses those beyond 64 bits), ``float64`` decimal or scientific notation
(never ``nan``/``inf``), ``bool`` the flag words (true/false, t/f, yes/no, y/n, 1/0, any
case), ``json`` any JSON value, ``str`` keeps the text. A cell that does not parse becomes
a ``BadCell``, which makes its row invalid with the value and the type it failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
import pandas as pd

from .._exceptions import InputError
from .._values import BadCell, is_missing

DTYPES = {
    "str": "str",
    "string": "str",
    "int": "int64",
    "int64": "int64",
    "Int64": "int64",
    "float": "float64",
    "float64": "float64",
    "bool": "bool",
    "boolean": "bool",
    "json": "json",
}
TRUE_WORDS = ("true", "t", "yes", "y", "1")
FALSE_WORDS = ("false", "f", "no", "n", "0")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _int(text: str) -> Any:
    return int(text) if _INT.fullmatch(text) else None


def _float(text: str) -> Any:
    return float(text) if _FLOAT.fullmatch(text) else None


def _bool(text: str) -> Any:
    low = text.strip().lower()
    return True if low in TRUE_WORDS else False if low in FALSE_WORDS else None


def _json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int64": _int,
    "float64": _float,
    "bool": _bool,
    "json": _json,
}


def convert(s: pd.Series, dtype: str) -> pd.Series:
    """One text column as ``dtype`` (see the module docstring); nulls stay null."""
    kind = DTYPES[dtype]
    if kind == "str":
        return s
    parse = _PARSERS[kind]
    out: list[Any] = []
    for cell in s.tolist():
        if is_missing(cell):
            out.append(None)
            continue
        value = parse(cell)
        # JSON null is a value the caller wrote, but never a parse failure
        out.append(BadCell(cell, dtype) if value is None and cell.strip() != "null" else value)
    return pd.Series(out, index=s.index, dtype=object, name=s.name)


def typed(frame: pd.DataFrame, dtypes: dict[str, str], source: str) -> pd.DataFrame:
    missing = [c for c in dtypes if c not in frame.columns]
    if missing:
        raise InputError(
            f"dtypes names column {missing[0]!r}, which {source} does not have "
            f"(its columns: {', '.join(map(str, frame.columns))})",
            path=source,
        )
    out = frame.copy()
    for column, dtype in dtypes.items():
        out[column] = convert(frame[column], dtype)
    return out
