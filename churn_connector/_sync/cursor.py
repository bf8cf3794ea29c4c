"""Cursor values: what a cursor column may hold, and each value as a sortable 64-bit code,
as the ledger's text, and as the bound a query, a Delta scan or an Iceberg scan compares with.

A cursor is an integer, an instant (a timestamp with a time zone: kept in UTC, to the
nanosecond), a timestamp without a time zone (compared as written, on the column's own
clock: never converted, since any zone would be a guess) or a date. Text and floats are
refused: text compares as text (``"9" > "10"``) and a float does not hold a value exactly;
cast the column in the query. Each value has a code, an int64 that sorts as the values
do (nanoseconds since the epoch, days since the epoch, the integer itself), so that a run's
cursors are kept as 8 bytes a row, on disk.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import ConfigurationError, named

__all__ = [
    "CURSOR_TYPES",
    "CursorType",
    "Value",
    "codes_of",
    "lookback_of",
    "parse_bound",
    "type_of_series",
]

CursorType = Literal["integer", "timestamp", "local_timestamp", "date"]
CURSOR_TYPES: tuple[CursorType, ...] = ("integer", "timestamp", "local_timestamp", "date")
_WORDS = {
    "integer": "integers",
    "timestamp": "timestamps with a time zone",
    "local_timestamp": "timestamps without a time zone",
    "date": "dates",
}
_NS_PER_DAY = 86_400 * 10**9
_FIX = (
    "a cursor is an integer, a timestamp or a date column that grows as rows arrive: cast it "
    "in the query (CAST(x AS BIGINT), CAST(x AS TIMESTAMPTZ))"
)


def words(kind: CursorType) -> str:
    return _WORDS[kind]


@dataclass(frozen=True, order=True)
class Value:
    """One cursor value: its type and its code (see the module)."""

    type: CursorType
    code: int

    @property
    def text(self) -> str:
        """As the ledger records it and people read it."""
        if self.type == "integer":
            return str(self.code)
        if self.type == "date":
            return str(np.datetime64(self.code, "D"))
        moment = pd.Timestamp(self.code, unit="ns")
        text = moment.isoformat()
        return text + "Z" if self.type == "timestamp" else text

    @classmethod
    def parse(cls, kind: CursorType, text: str) -> Value:
        """A value of ``kind`` written as ``text`` (the ledger's, or a person's)."""
        try:
            if kind == "integer":
                return cls(kind, int(text))
            if kind == "date":
                return cls(
                    kind, int(np.datetime64(dt.date.fromisoformat(text), "D").astype(np.int64))
                )
            moment = pd.Timestamp(text)
        except (ValueError, TypeError, OverflowError):
            raise ConfigurationError(f"{text!r} is not one of the {words(kind)}") from None
        if kind == "timestamp":
            if moment.tzinfo is None:
                raise ConfigurationError(
                    f"{text!r} has no time zone: the cursor holds timestamps with a time zone; "
                    "give the instant with its offset (…Z, …+02:00)"
                )
            return cls(kind, int(moment.tz_convert("UTC").as_unit("ns").value))
        if moment.tzinfo is not None:
            raise ConfigurationError(
                f"{text!r} has a time zone, but the cursor holds timestamps without one "
                "(compared as written): give the value as the column writes it, without an offset"
            )
        return cls(kind, int(moment.as_unit("ns").value))

    def minus(self, lookback: Any) -> Value:
        """This value moved back by ``lookback`` (see :func:`lookback_of`)."""
        step = lookback_of(lookback, self.type)
        return Value(self.type, self.code - step)

    def bound(self, *, upper: bool = False) -> Any:
        """The value as a query binds it: an int, a UTC datetime, a naive datetime or a
        date. A database keeps microseconds: a lower bound is rounded down, an upper one up,
        so that the rows read are never fewer than the range holds."""
        if self.type == "integer":
            return self.code
        if self.type == "date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=self.code)
        micros, rest = divmod(self.code, 1000)
        if upper and rest:
            micros += 1
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
        return moment.replace(tzinfo=dt.UTC) if self.type == "timestamp" else moment

    def literal(self, arrow_type: pa.DataType) -> str:
        """The value as a DataFusion literal of the column's own Arrow type (a Delta scan's
        filter): our own text, never a caller's."""
        if self.type == "integer":
            return str(int(self.code))
        if self.type == "date":
            return f"arrow_cast('{self.text}', 'Date32')"
        units = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}
        unit = units[arrow_type.unit] if pa.types.is_timestamp(arrow_type) else "Nanosecond"
        zone = f'Some("{arrow_type.tz}")' if getattr(arrow_type, "tz", None) else "None"
        text = self.text.removesuffix("Z")
        value = f"arrow_cast('{text}', 'Timestamp(Nanosecond, None)')"
        if self.type == "timestamp":
            value = f"arrow_cast({value}, 'Timestamp(Nanosecond, Some(\"UTC\"))')"
        return f"arrow_cast({value}, 'Timestamp({unit}, {zone})')"

    def python(self) -> Any:
        """The value as Python compares it with a column's cells (filters applied after
        reading, Iceberg's literals)."""
        if self.type == "integer":
            return self.code
        if self.type == "date":
            return self.bound()
        moment = pd.Timestamp(self.code, unit="ns")
        return moment.tz_localize("UTC") if self.type == "timestamp" else moment


def type_of_series(column: pd.Series, name: str) -> CursorType:
    """What a cursor column holds (refused when it is not a cursor: see the module)."""
    dtype = column.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "timestamp"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "local_timestamp"
    if pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return "integer"
    if pd.api.types.is_object_dtype(dtype):
        found = column.dropna()
        if len(found) == 0:
            return "integer"  # only nulls: nothing to compare yet
        first = found.iloc[0]
        if isinstance(first, dt.datetime):
            return "timestamp" if first.tzinfo is not None else "local_timestamp"
        if isinstance(first, dt.date):
            return "date"
    raise ConfigurationError(f"{named('cursor')} {name!r} holds {_described(column)}: {_FIX}")


def _described(column: pd.Series) -> str:
    if pd.api.types.is_float_dtype(column.dtype):
        return "floats (a float does not hold its value exactly)"
    if pd.api.types.is_bool_dtype(column.dtype):
        return "booleans"
    if pd.api.types.is_string_dtype(column.dtype) or column.dtype == object:
        return "text (text compares as text: '9' sorts after '10')"
    return f"values of type {column.dtype}"


def codes_of(column: pd.Series, kind: CursorType) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes, null mask) of a cursor column of type ``kind``."""
    nulls = column.isna().to_numpy(dtype=bool)
    if kind == "integer":
        return column.to_numpy(dtype=np.int64, na_value=0), nulls
    if kind == "date":
        days = pd.to_datetime(column).to_numpy(dtype="datetime64[D]")
        return np.where(nulls, 0, days.astype(np.int64)), nulls
    stamps = pd.to_datetime(column) if column.dtype == object else column
    if kind == "timestamp":
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    ns = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return np.where(nulls, 0, ns), nulls


def lookback_of(lookback: Any, kind: CursorType) -> int:
    """``lookback`` as a number of codes of ``kind`` (see :func:`check_lookback`)."""
    if kind == "integer":
        if isinstance(lookback, str) and lookback.strip().lstrip("-").isdigit():
            lookback = int(lookback)
        if isinstance(lookback, bool) or not isinstance(lookback, int):
            raise ConfigurationError(
                f"{named('lookback')} {lookback!r}: the cursor holds integers, so the lookback "
                "is a number (of the cursor's units), e.g. 1000"
            )
        return lookback
    span = duration(lookback)
    if span is None:
        raise ConfigurationError(
            f"{named('lookback')} {lookback!r}: the cursor holds {words(kind)}, so the lookback "
            "is a duration, e.g. 2h, 30min, 1d"
        )
    if kind == "date":
        if span.value % _NS_PER_DAY:
            raise ConfigurationError(
                f"{named('lookback')} {lookback!r}: the cursor holds dates: give whole days (1d)"
            )
        return int(span.value // _NS_PER_DAY)
    return int(span.value)


def duration(value: Any) -> pd.Timedelta | None:
    """A duration (``"2h"``, ``"30min"``, ``"1d"``, ISO 8601 ``"PT2H"``, a timedelta), or
    None when ``value`` is not one (a plain number is not: it would need a unit)."""
    if isinstance(value, bool | int | float):
        return None
    if isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit():
        return None
    try:
        span = pd.Timedelta(value)
    except (ValueError, TypeError):
        return None
    return None if pd.isna(span) else span


def check_lookback(lookback: Any) -> None:
    """A lookback is a whole number of at least 0 (integer cursors) or a duration of at
    least 0 (timestamps, dates); which one the cursor needs is known once it is read."""
    if lookback is None:
        return
    if isinstance(lookback, str) and lookback.strip().isdigit():
        return
    if isinstance(lookback, int) and not isinstance(lookback, bool):
        if lookback < 0:
            raise ConfigurationError(f"{named('lookback')} must be 0 or more, not {lookback}")
        return
    span = duration(lookback)
    if span is None:
        raise ConfigurationError(
            f"{named('lookback')} must be a duration (2h, 30min, 1d) for a timestamp or date "
            f"cursor, or a whole number for an integer one, not {lookback!r}"
        )
    if span < pd.Timedelta(0):
        raise ConfigurationError(f"{named('lookback')} must be 0 or more, not {lookback!r}")


def parse_bound(name: str, value: Any) -> Value | None:
    """``since`` / ``until``: an integer, a date, an instant (aware, or text with an
    offset) or a timestamp without a time zone (naive: the column's own clock)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigurationError(f"{named(name)} must be a cursor value, not {value!r}")
    if isinstance(value, int | np.integer):
        return Value("integer", int(value))
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return Value("integer", int(text))
        if len(text) == 10 and text[4] == "-" and text[7] == "-":
            return Value.parse("date", text)
        value = text
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return Value.parse("date", value.isoformat())
    try:
        moment = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ConfigurationError(
            f"{named(name)} {value!r} is not a cursor value (an integer, a date, or a timestamp "
            "such as 2026-11-20T00:00:00Z)"
        ) from None
    if pd.isna(moment):
        raise ConfigurationError(f"{named(name)} must be a cursor value, not {value!r}")
    if moment.tzinfo is not None:
        return Value("timestamp", int(moment.tz_convert("UTC").as_unit("ns").value))
    return Value("local_timestamp", int(moment.as_unit("ns").value))
