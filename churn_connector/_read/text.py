"""``TextFormat``: how a text export is laid out, as the warehouse that wrote it says.

One frozen value, checked when it is made: ``delimiter`` (one character; None: ``,`` for
CSV, a tab for TSV), ``quote`` (a character, or None: no quoting, as Redshift's UNLOAD
writes), ``escape`` (None, or the character that makes the next one literal: Spark writes
``\\"``), ``null`` (the cells that mean null: None keeps the default, an empty cell quoted or
not; a marker or a list of them replaces it, so ``null="\\N"`` reads an empty cell as an empty
string, as Snowflake and Redshift mean it, and ``null=["", "\\N"]`` takes both), ``header``
(False: the first line is data, and ``columns`` names the columns) and ``format`` (``"csv"``,
``"tsv"``, ``"parquet"``, ``"ndjson"``, ``"avro"``; None: by the file's suffix; needed for
parts without one, such as Redshift's ``0000_part_00``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict, get_args

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._core import (
    FLAGS,
    ConfigurationError,
    InputError,
    Placeholder,
    declare,
    on_command_line,
    option,
    registered,
)
from .._json import BadCell, RepeatedKey, is_missing, repeat_in

Format = Literal["csv", "tsv", "parquet", "ndjson", "avro"]
TEXT_FORMATS = ("csv", "tsv")
# the options that only mean something for CSV/TSV, by their public names
TEXT_ONLY = ("delimiter", "quote", "escape", "null", "header", "columns")
TEXT_FIELDS = (*TEXT_ONLY, "format")

# a column name that is a value: the file's first line was data, not a header
_VALUE_LIKE = re.compile(
    r"[+-]?[0-9]+(?:\.[0-9]+)?"  # a number or an integer id
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?"
    # a zone, with or without a space before it: Z, +01:00, Redshift's +00, Snowflake's -0800
    r"(?: ?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)| ?UTC)?)?"  # a date or a timestamp
    r"|[^@\s]+@[^@\s]+\.[^@\s]+"  # an email address
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # a UUID
    r"|\{.*\}|\[.*\]"  # a JSON object or array (properties, channels)
    r"|\\N|NULL|null|true|false",
    re.DOTALL,
)
_PANDAS_INDEX = ("", "Unnamed: 0")
# delimiters a header may be split by when the file was read with another one
_OTHER_DELIMITERS = (";", "\t", "|")


def _columns() -> str:
    return "--columns a,b,c" if on_command_line() else "columns=[...]"


def _no_header() -> str:
    return f"{option('header', False)}, {_columns()}".replace(", --", " --")


def _value_like(name: str) -> bool:
    return _VALUE_LIKE.fullmatch(name.strip()) is not None


def header_hint(name: str, header: Collection[str] = (), known: Collection[str] = ()) -> str | None:
    """Why an unknown column ``name`` is there, when its name (or ``header``, all the
    table's column names, beside ``known``, the names a table may have) says so; else None."""
    if name in _PANDAS_INDEX:
        return (
            "the first column has no name: it looks like a pandas index; pass index=False "
            f"when writing, or {option('extra_columns', 'ignore')}"
        )
    split = _split_by(name, header, known)
    if split is not None:
        return split
    if _value_like(name):
        seen = "it looks"
    else:
        # a header that names none of the table's columns is data when one of its cells
        # is a value: then 'signup' or 'u1' beside that cell is data too
        values = [] if set(header) & set(known) else [h for h in header if _value_like(h)]
        if not values:
            return None
        seen = f"{values[0]!r} beside it looks"
    count = f" (its {len(header)} columns, in order)" if len(header) > 1 else ""
    return (
        f"{seen} like a value, not a name: the file seems to have no header (its first "
        f"line is data); pass {_no_header()}{count}"
    )


def _split_by(name: str, header: Collection[str], known: Collection[str]) -> str | None:
    """The hint for a header cell that holds several names split by another delimiter
    (``external_user_id;event_type``): the file was read with the wrong one."""
    for sep in _OTHER_DELIMITERS:
        parts = [part.strip() for part in name.split(sep)]
        if len(parts) < 2 or not all(parts):
            continue
        if len(header) <= 1 or any(part in known for part in parts):
            shown = "a tab" if sep == "\t" else repr(sep)
            value = Placeholder("tab") if sep == "\t" and on_command_line() else sep
            return (
                f"the header seems delimited by {shown}, which this read did not split on: "
                f"pass {option('delimiter', value)}"
            )
    return None


def _one_character(name: str, value: Any) -> None:
    if not isinstance(value, str) or len(value) != 1:
        raise ConfigurationError(f"{name} must be one character, not {value!r}")
    if value in "\r\n":
        raise ConfigurationError(f"{name} cannot be a line break")


def _character(text: str) -> str:
    # a tab is hard to type in a shell: \t and "tab" say it
    return "\t" if text in ("\\t", "tab") else text


def _quote(text: str) -> str | None:
    return None if text.lower() == "none" else text


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


@registered
@dataclass(frozen=True, kw_only=True)
class TextFormat:
    """How CSV/TSV files are read, and which format files without a known suffix have:
    the text-export keywords of :func:`validate_events` and the other calls, as one value
    (immutable, checked when made) for ``cc.EventOptions(text=...)`` and
    ``cc.IdentityOptions(text=...)``. ::

        layout = cc.TextFormat(delimiter="|", quote=None, null=r"\\N")
    """

    # every field is a keyword of the public calls (``spark=False``: a Spark partition is
    # a frame, not a file)
    delimiter: str | None = declare(
        None,
        doc="CSV/TSV: the field delimiter (one character; `\\t` or `tab` on the CLI)",
        help="cell delimiter (default , or tab)",
        metavar="C",
        parse=_character,
        spark=False,
        shown_default='`","` (`"\\t"` for `.tsv`)',
    )
    quote: str | None = declare(
        '"',
        doc="CSV/TSV: the quote character, or `None` for none",
        help='quote character (default "; none)',
        metavar="C",
        parse=_quote,
        spark=False,
        shown_flag="`--quote C\\|none`",
    )
    escape: str | None = declare(
        None,
        doc="CSV/TSV: the escape character (Spark and Redshift `ESCAPE` write `\\`)",
        help="escape character (Spark: \\)",
        metavar="C",
        spark=False,
    )
    null: str | Sequence[str] | None = declare(
        None,
        doc='CSV/TSV: the text(s) that mean null, e.g. `"\\\\N"` (Snowflake, Redshift); '
        "replaces the default",
        help="a cell that means null (repeatable; e.g. \\N); default: an empty cell",
        metavar="MARKER",
        repeat=True,
        spark=False,
        shown_default="only an empty cell",
    )
    header: bool = declare(
        True,
        doc="CSV/TSV: `False` when the first line is data; then `columns` names the columns",
        help="the first line is data (Redshift, Snowflake, Spark defaults); needs --columns",
        flag="--no-header",
        spark=False,
    )
    columns: Sequence[str] | None = declare(
        None,
        doc="CSV/TSV without a header: the column names, in order",
        help="the column names of a file with no header",
        metavar="A,B,C",
        parse=_names,
        spark=False,
        shown_flag="`--columns a,b,c`",
    )
    format: Format | None = declare(
        None,
        doc='read files as `"csv"`, `"tsv"`, `"parquet"`, `"ndjson"` or `"avro"` (parts named '
        "without a suffix, like Redshift's `0000_part_00`)",
        help="the format of files whose name says none (Redshift's 0000_part_00: csv)",
        spark=False,
        shown_default="by the file's suffix",
    )

    def __post_init__(self) -> None:
        if self.delimiter is not None:
            _one_character("delimiter", self.delimiter)
        for name in ("quote", "escape"):
            value = getattr(self, name)
            if value is not None:
                _one_character(name, value)
        chosen = [c for c in (self.delimiter, self.quote, self.escape) if c is not None]
        if len(set(chosen)) != len(chosen):
            raise ConfigurationError(
                f"delimiter, quote and escape must differ (delimiter={self.delimiter!r}, "
                f"quote={self.quote!r}, escape={self.escape!r})"
            )
        if self.null is not None:
            if isinstance(self.null, str):
                object.__setattr__(self, "null", (self.null,))
            markers = tuple(self.null)
            if not markers or not all(isinstance(m, str) for m in markers):
                raise ConfigurationError(
                    f"null must be a marker like '\\\\N' or a list of them, not {self.null!r}"
                )
            object.__setattr__(self, "null", markers)
        if not isinstance(self.header, bool):
            raise ConfigurationError(f"header must be True or False, not {self.header!r}")
        self._check_columns()
        if self.format is not None and self.format not in get_args(Format):
            raise ConfigurationError(
                f"format must be one of {', '.join(map(repr, get_args(Format)))} (or None: "
                f"by the file's suffix), not {self.format!r}"
            )

    def _check_columns(self) -> None:
        if self.columns is not None:
            if isinstance(self.columns, str):
                raise ConfigurationError(
                    f"columns must be a list of names, not the string {self.columns!r}"
                )
            names = tuple(self.columns)
            if not names or not all(isinstance(c, str) and c for c in names):
                raise ConfigurationError(f"columns must be a list of names, not {self.columns!r}")
            if len(set(names)) != len(names):
                raise ConfigurationError(f"columns names a column twice: {list(names)}")
            object.__setattr__(self, "columns", names)
        if not self.header and self.columns is None:
            raise ConfigurationError(
                f"{option('header', False)} needs {_columns()}: the names of the file's "
                "columns, in order"
            )
        if self.header and self.columns is not None:
            raise ConfigurationError(
                f"{_columns()} names the columns of a file without a header (pass "
                f"{option('header', False)} too); to rename the columns of a file with one, "
                f"use {option('rename', {'SRC': 'dest'})}"
            )

    def given(self, names: Sequence[str] = TEXT_ONLY) -> list[str]:
        """Which of ``names`` differ from their defaults (for refusing them where they make
        no sense), as ``name=`` / ``--flag``."""
        return [
            f"{f.name}= ({FLAGS[f.name]})"
            for f in fields(self)
            if f.name in names and getattr(self, f.name) != f.default
        ]

    def delimiter_for(self, kind: str) -> str:
        """The delimiter of a ``kind`` ("csv"/"tsv") file."""
        if self.delimiter is not None:
            return self.delimiter
        return "\t" if kind == "tsv" else ","


DEFAULT_TEXT = TextFormat()


class TextOptions(TypedDict, total=False):
    """The text-export keywords of every entry point (their TypedDicts extend this one)."""

    delimiter: str | None
    header: bool
    columns: Sequence[str] | None
    escape: str | None
    null: str | Sequence[str] | None
    quote: str | None
    format: Format | None


# ------------------------------------------------------------------------------------------
# ``dtypes=``: CSV cells are text; a caller may say what some columns hold instead.

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
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    found = repeat_in(text, parsed)
    # a key named twice: either value would be a guess, so the row is refused by name
    return parsed if found is None else RepeatedKey(found.key, found.where)


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
    whole = _whole_column(s, kind)
    if whole is not None:
        return whole
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


# the fullmatch of _INT and _FLOAT for Arrow's RE2, whose ``$`` is the end of the text only
_WHOLE_PATTERNS = {"int64": f"^(?:{_INT.pattern})$", "float64": f"^(?:{_FLOAT.pattern})$"}
_WHOLE_TYPES = {"int64": pa.int64(), "float64": pa.float64()}


def _whole_column(s: pd.Series, kind: str) -> pd.Series | None:
    """An int64 or float64 column whose every cell parses, typed in one pass of Arrow
    kernels (a nullable dtype, as Parquet's columns are read); None when any cell is not
    a plain number Arrow reads to the same value as ``_int``/``_float`` (a sign ``+``, an
    integer beyond 64 bits, a float beyond the double range, a cell that does not parse,
    a column that is not text): the per-cell loop then does the column, and reports."""
    pattern = _WHOLE_PATTERNS.get(kind)
    if pattern is None or not pd.api.types.is_string_dtype(s.dtype):
        return None
    try:
        cells = pa.array(s, pa.large_string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # cells that are not all strings
        return None
    if not pc.all(pc.match_substring_regex(cells, pattern)).as_py():  # None: all null
        return None
    try:
        values = pc.cast(cells, _WHOLE_TYPES[kind])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. an integer beyond int64
        return None
    numbers = values.fill_null(0).to_numpy(zero_copy_only=False)
    mask = values.is_null().to_numpy(zero_copy_only=False)
    if kind == "int64":
        array: pd.api.extensions.ExtensionArray = pd.arrays.IntegerArray(numbers, mask)
    elif np.isfinite(numbers).all():  # 1e400: float() says inf, and the loop reports it
        array = pd.arrays.FloatingArray(numbers, mask)
    else:
        return None
    return pd.Series(array, index=s.index, name=s.name)


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
