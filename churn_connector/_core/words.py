"""How messages speak to a person: a row by its label, a value as written, an option as the
caller sets it.

Messages end up in reports, result files and terminals, so they show no Python internals
(``np.int64(6)``, ``Decimal('1.5')``, ``None``). A fix names an option the way the caller
sets it: ``extra_columns='ignore'`` from Python, ``--extra-columns ignore`` under the
command line, which says so with ``command_line()``. That is a context variable, so it
holds for the thread that builds requests too (it runs in a copy of the caller's context:
``_delivery.prefetch``), and a notebook or an Airflow task in the same process is not
affected.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import shlex
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .declarations import FLAGS  # keyword -> flag, from the options' declarations

_COMMAND_LINE: ContextVar[bool] = ContextVar("churn_connector_command_line", default=False)

_PLAIN_LABEL = re.compile(r"[\w.:/+-]+")


class Placeholder(str):
    """A value to fill in (``<IANA zone>``): written bare, never quoted."""

    __slots__ = ()


@contextmanager
def command_line() -> Iterator[None]:
    """Within: messages name options by their command-line flags."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def on_command_line() -> bool:
    return _COMMAND_LINE.get()


def named(name: str) -> str:
    """Option ``name`` as the caller names it: the keyword, or the command line's flag."""
    return FLAGS.get(name, name) if on_command_line() else name


def option(name: str, *values: Any) -> str:
    """Option ``name`` set to one of ``values`` (none: switched on), as the caller writes it:
    ``epoch_unit='s' or 'ms'`` or ``--epoch-unit s or ms``; a mapping is written as the
    command line's ``SRC=DEST`` pairs; a flag stands alone (``header=False``: ``--no-header``)."""
    cli = on_command_line() and name in FLAGS
    if not values or values == (False,):
        return FLAGS[name] if cli else f"{name}={not values}"
    if len(values) == 1 and isinstance(values[0], Mapping):
        pairs = values[0]
        if not cli:
            return f"{name}={{{', '.join(f'{k!r}: {v!r}' for k, v in pairs.items())}}}"
        return " ".join(f"{FLAGS[name]} {shlex.quote(f'{k}={v}')}" for k, v in pairs.items())
    texts = [_value_text(v, cli=cli) for v in values]
    return f"{FLAGS[name]} {alternatives(texts)}" if cli else f"{name}={alternatives(texts)}"


def _value_text(value: Any, *, cli: bool) -> str:
    if isinstance(value, Placeholder):
        return str(value) if cli else repr(str(value))
    if cli:
        return shlex.quote(str(value))
    return repr(value)


def alternatives(texts: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    if len(texts) <= 1:
        return "".join(texts)
    return f"{', '.join(texts[:-1])} or {texts[-1]}"


def row_label(label: Any) -> str:
    """A row's label as a person reads it: ``6``, ``part-0.csv:3``, ``'user a'``."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, tuple):
        return "(" + ", ".join(row_label(part) for part in label) + ")"
    if isinstance(label, dt.datetime):
        return label.isoformat()
    if isinstance(label, bool) or label is None:
        return repr(label)
    if isinstance(label, int | float):
        return str(label)
    text = str(label)
    return text if _PLAIN_LABEL.fullmatch(text) else repr(text)


def rows_text(labels: Sequence[Any]) -> str:
    """``row 6`` or ``rows 6, 9 and 12``."""
    texts = [row_label(label) for label in labels]
    if len(texts) == 1:
        return f"row {texts[0]}"
    return f"rows {', '.join(texts[:-1])} and {texts[-1]}"


def type_name(value: Any) -> str:
    """``int``, ``float``, ``Decimal``: the Python type a value stands for."""
    return type(value.item() if isinstance(value, np.generic) else value).__name__


class AsShown:
    """A value that formats (``{value}``, ``{value!r}``) as ``shown`` writes it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return shown(self.value)

    __str__ = __repr__


def shown(value: Any) -> str:
    """A value as the user wrote it: text quoted (so white space shows), numbers and times
    plain, null as null, objects and lists as ``json_like`` writes them; no numpy or
    Decimal wrappers."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "infinity" if value > 0 else "-infinity"
    if isinstance(value, _CONTAINERS):
        return json_like(value)
    return repr(value)


_CONTAINERS = (dict, list, tuple, set, frozenset, np.ndarray)
_DEEPEST = 32  # levels of a nested value written out; deeper ones are "…"
_LONGEST = 10_000  # characters of a nested value written out


def _missing(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, float) and math.isnan(value)


def value_text(value: Any) -> str | None:
    """A cell's value for people, one rule for result frames and files: text as it is,
    numbers and ``true``/``false`` as JSON writes them, times in ISO 8601, objects and
    lists as ``json_like`` writes them; ``None`` for an empty cell (None, NaN, NA, NaT)."""
    if isinstance(value, np.generic):
        value = value.item()
    if _missing(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return json_like(value)


def json_like(value: Any) -> str:
    """``value`` written as JSON, with what JSON cannot hold spelled readably: ``NaN``,
    ``Infinity``, a set as ``{1, 2}``, a non-text key bare (``{1: "a"}``), bytes as
    ``<3 bytes>``, any other object as ``<TypeName>``; never a Python repr like
    ``{'a': nan}``. Very deep or long values end in ``…``."""
    text = _json_like(value, 0)
    return text if len(text) <= _LONGEST else text[: _LONGEST - 1] + "…"


def _json_like(value: Any, depth: int) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return repr(value) if math.isfinite(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else "NaN" if value.is_nan() else f"{value}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return json.dumps(value.isoformat())
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if not isinstance(value, _CONTAINERS):
        return f"<{type(value).__name__}>"
    if depth >= _DEEPEST:
        return "…"
    if isinstance(value, dict):
        members = (
            f"{_json_like(k, depth + 1)}: {_json_like(v, depth + 1)}" for k, v in value.items()
        )
        return "{" + _joined(members) + "}"
    if isinstance(value, set | frozenset):
        items = [_json_like(v, depth + 1) for v in value]
        return "{" + _joined(sorted(items)) + "}"
    items_of = value.tolist() if isinstance(value, np.ndarray) else value
    return "[" + _joined(_json_like(v, depth + 1) for v in items_of) + "]"


def _joined(parts: Iterable[str]) -> str:
    out: list[str] = []
    size = 0
    for part in parts:
        out.append(part)
        size += len(part) + 2
        if size > _LONGEST:
            out.append("…")
            break
    return ", ".join(out)


_START = 40  # characters of a bad value a message shows
# how DuckDB prints a STRUCT (and Python a dict): single-quoted keys
_STRUCT_TEXT = re.compile(r"\{\s*'[^']*'\s*:")


def start_of(text: str) -> str:
    """The first characters of ``text``, quoted, for a message."""
    return repr(text if len(text) <= _START else text[: _START - 1] + "…")


def not_json(text: str, exc: Exception, path: str) -> str:
    """Why a JSON-text cell does not parse: its start, where and what went wrong, and, for
    DuckDB's struct text, how to export JSON instead."""
    if _STRUCT_TEXT.match(text.lstrip()):
        column = path.split(".")[0].split("[")[0]
        return (
            f"{start_of(text)} is DuckDB's text for a STRUCT (or a Python dict written as "
            f"text), not JSON: export JSON instead, in DuckDB to_json({column}) (or "
            f"{column}::JSON), from Python json.dumps(value)"
        )
    where = ""
    if isinstance(exc, json.JSONDecodeError):
        at = (
            f"character {exc.pos + 1}"
            if exc.lineno == 1
            else f"line {exc.lineno} column {exc.colno}"
        )
        where, said = f" at {at}", exc.msg
    else:
        said = str(exc)
    return f"{start_of(text)} is not valid JSON{where}: {said}"


_MIN_COLUMN = 12  # characters a cut column keeps
_MIN_WRAPPED = 40  # characters a wrapped column keeps a line, else it goes under its row


def text_table(frame: pd.DataFrame, width: int, *, wrap: str | None = None) -> str:
    """``frame`` as plain text at most ``width`` characters wide (a terminal's): empty cells
    blank, objects as JSON, numbers to the right, columns cut with … (widest first). The
    ``wrap`` column (a message) is never cut: it wraps in its column, or, where that would
    be too narrow, on indented lines under its row."""
    below = None
    if wrap in frame.columns:
        rest = frame.drop(columns=[wrap])
        side = _widths(rest) + 2 * len(rest.columns)
        if width - side < _MIN_WRAPPED:
            below = [_cell(v) for v in frame[wrap].tolist()]
            frame = rest
    columns = [str(c) for c in frame.columns]
    cells = [[_cell(v) for v in frame[c].tolist()] for c in frame.columns]
    right = [pd.api.types.is_numeric_dtype(frame[c].dtype) for c in frame.columns]
    widths = [max([len(c), *map(len, col)]) for c, col in zip(columns, cells, strict=True)]
    wrapped = columns.index(wrap) if wrap in columns else None
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    if wrapped is not None and excess > 0:
        widths[wrapped] -= excess  # it keeps _MIN_WRAPPED at least (checked above)
        excess = 0
    while excess > 0:
        widest = max(range(len(widths)), key=widths.__getitem__)
        cut = min(excess, widths[widest] - _MIN_COLUMN)
        if cut <= 0:
            break
        widths[widest] -= cut
        excess -= cut

    def lines(texts: Sequence[str]) -> list[str]:
        parts = [
            _wrapped(text, w) if k == wrapped else [_cut(text, w)]
            for k, (text, w) in enumerate(zip(texts, widths, strict=True))
        ]
        out = []
        for i in range(max(map(len, parts))):
            row = [p[i] if i < len(p) else "" for p in parts]
            padded = [
                t.rjust(w) if r else t.ljust(w) for t, w, r in zip(row, widths, right, strict=True)
            ]
            out.append("  ".join(padded).rstrip())
        return out

    out = lines(columns)
    for i, row in enumerate(zip(*cells, strict=True)):
        out.extend(lines(row))
        if below is not None:
            out.extend("    " + line for line in _wrapped(below[i], width - 4))
    return "\n".join(out)


def _widths(frame: pd.DataFrame) -> int:
    return sum(
        max([len(str(c)), *(len(_cell(v)) for v in frame[c].tolist())]) for c in frame.columns
    )


def _wrapped(text: str, width: int) -> list[str]:
    # a flag (--naive-timezone) or a value is never broken at its hyphens
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, dict | list | tuple | np.ndarray):
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return " ".join(str(value).split())  # one line per row


# ------------------------------------------------------------------------------------------
# Text echoed to a reader (a terminal, a CI log, a JUnit viewer): what the input wrote may
# ride in a column name or a cell, so no control character, line break, direction override
# or lone surrogate passes as itself, and no value is copied whole.

ECHO_CAP = 1_000  # characters of one echoed text (a failure line, a value, a message)
_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def echoed(text: str, cap: int | None = ECHO_CAP) -> str:
    """``text`` safe to show a person: control characters (tabs aside), line breaks, bidi
    overrides and lone surrogates as visible escapes (``\\x1b``, ``\\n`` as ``\\x0a``), and
    at most ``cap`` characters of it (then ``… (N more characters)``)."""
    if cap is not None and len(text) > cap:
        text = f"{text[:cap]}… ({len(text) - cap:,} more characters)"
    return _UNSAFE.sub(_escape, text)
