"""Vectorised timestamp normalisation: any accepted representation -> UTC epoch milliseconds.

Accepted: tz-aware datetime64 columns (any zone), RFC 3339 / ISO 8601 strings with an offset,
tz-aware ``datetime`` objects; naive values only when the caller names ``naive_timezone``.
Nothing is guessed: a naive value without ``naive_timezone`` is a problem, not UTC.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pandas as pd
import pyarrow as pa


class TimestampProblem(IntEnum):
    """What is wrong with one timestamp cell (stored as int8 per row; OK means usable)."""

    OK = 0
    NULL = 1
    BAD_TYPE = 2
    BAD_FORMAT = 3
    NAIVE = 4
    BAD_LOCAL_TIME = 5


OK, NULL, BAD_TYPE, BAD_FORMAT, NAIVE, BAD_LOCAL_TIME = TimestampProblem

# [0-9], not \d: \d also matches other scripts' digits
_ISO = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
)
_OFFSET_AT_END = r"(?:Z|[+-][0-9]{2}:?[0-9]{2})$"
_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_NAT = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Normalized:
    """Epoch milliseconds (floored) and a problem code for every row."""

    ms: np.ndarray  # int64; meaningless where problem != OK
    problem: np.ndarray  # int8


def _floor_ms(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """datetime64 array (any unit, UTC) -> (epoch ms floored, is_nat)."""
    unit, _ = np.datetime_data(values.dtype)
    raw = values.view("i8")
    is_nat = raw == _NAT
    per_ms = _NS_PER_UNIT[unit]
    # floor division keeps truncation exact for instants before 1970 too
    ms = raw * (per_ms // 1_000_000) if per_ms >= 1_000_000 else raw // (1_000_000 // per_ms)
    return np.where(is_nat, 0, ms), is_nat


def _aware_to_ms(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    # to_numpy() on a tz-aware Series builds Python objects; stripping the zone is 40x faster
    naive_utc = s.dt.tz_convert("UTC").dt.tz_localize(None)
    return _floor_ms(naive_utc.to_numpy())


def _localize(s: pd.Series, naive_timezone: str) -> tuple[np.ndarray, np.ndarray]:
    """Naive datetime64 Series -> (ms, is_bad_local_time) in the named zone."""
    local = s.dt.tz_localize(naive_timezone, ambiguous="NaT", nonexistent="NaT")
    ms, is_nat = _aware_to_ms(local)
    return ms, is_nat & s.notna().to_numpy()


def _parse_strings(s: pd.Series, naive_timezone: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Strings -> (ms, problem) for one Series of str values (no nulls)."""
    n = len(s)
    ms = np.zeros(n, dtype=np.int64)
    problem = np.full(n, OK, dtype=np.int8)
    text = s.astype("string[python]")
    well_formed = text.str.fullmatch(_ISO).fillna(False).to_numpy(dtype=bool)
    has_offset = text.str.contains(_OFFSET_AT_END, regex=True).fillna(False).to_numpy(dtype=bool)
    problem[~well_formed] = BAD_FORMAT
    with_offset = well_formed & has_offset
    if with_offset.any():
        parsed = pd.to_datetime(text[with_offset], format="ISO8601", utc=True, errors="coerce")
        part_ms, nat = _aware_to_ms(parsed)
        ms[with_offset] = part_ms
        problem[np.flatnonzero(with_offset)[nat]] = BAD_FORMAT
    naive = well_formed & ~has_offset
    if naive.any():
        if naive_timezone is None:
            problem[naive] = NAIVE
        else:
            parsed = pd.to_datetime(text[naive], format="ISO8601", errors="coerce")
            unparsed = parsed.isna().to_numpy()
            part_ms, bad_local = _localize(parsed, naive_timezone)
            ms[naive] = part_ms
            idx = np.flatnonzero(naive)
            problem[idx[unparsed]] = BAD_FORMAT
            problem[idx[bad_local & ~unparsed]] = BAD_LOCAL_TIME
    return ms, problem


def _is_aware(value: dt.datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() is not None


def _parse_objects(s: pd.Series, naive_timezone: str | None) -> tuple[np.ndarray, np.ndarray]:
    values = s.tolist()
    n = len(values)
    ms = np.zeros(n, dtype=np.int64)
    problem = np.full(n, OK, dtype=np.int8)
    strings: list[int] = []
    aware: list[int] = []
    naive: list[int] = []
    for i, v in enumerate(values):
        if isinstance(v, str):
            strings.append(i)
        elif isinstance(v, dt.datetime):  # includes pd.Timestamp; NaT is handled by the null mask
            (aware if _is_aware(v) else naive).append(i)
        else:
            problem[i] = BAD_TYPE
    if strings:
        part_ms, part_problem = _parse_strings(s.iloc[strings], naive_timezone)
        ms[strings], problem[strings] = part_ms, part_problem
    if aware:
        converted = pd.to_datetime(s.iloc[aware], utc=True)
        ms[aware] = _aware_to_ms(converted)[0]
    if naive:
        if naive_timezone is None:
            problem[naive] = NAIVE
        else:
            part_ms, bad_local = _localize(pd.to_datetime(s.iloc[naive]), naive_timezone)
            ms[naive] = part_ms
            problem[np.asarray(naive)[bad_local]] = BAD_LOCAL_TIME
    return ms, problem


def _plain(s: pd.Series) -> pd.Series:
    """Arrow timestamps -> numpy datetimes, categoricals -> their values (same instants)."""
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return s.astype(object)
    if isinstance(dtype, pd.ArrowDtype) and pa.types.is_timestamp(dtype.pyarrow_dtype):
        arrow_type = dtype.pyarrow_dtype
        unit = arrow_type.unit
        if arrow_type.tz is None:
            return s.astype(np.dtype(f"datetime64[{unit}]"))
        return s.astype(pd.DatetimeTZDtype(unit=unit, tz=arrow_type.tz))
    return s


def normalize(s: pd.Series, naive_timezone: str | None = None) -> Normalized:
    """Normalise one column of timestamps; see the module docstring for what is accepted."""
    s = _plain(s)
    n = len(s)
    null = s.isna().to_numpy(dtype=bool)
    ms = np.zeros(n, dtype=np.int64)
    problem = np.full(n, OK, dtype=np.int8)
    present = ~null
    dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        ms, _ = _aware_to_ms(s)
    elif pd.api.types.is_datetime64_dtype(dtype):
        if naive_timezone is None:
            problem[present] = NAIVE
        else:
            ms, bad_local = _localize(s, naive_timezone)
            problem[bad_local] = BAD_LOCAL_TIME
    elif pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        if present.any():
            sub = s[present]
            all_str = not pd.api.types.is_object_dtype(dtype)
            parse = _parse_strings if all_str else _parse_objects
            part_ms, part_problem = parse(sub, naive_timezone)
            ms[present], problem[present] = part_ms, part_problem
    else:
        problem[present] = BAD_TYPE
    problem[null] = NULL
    return Normalized(ms=ms, problem=problem)


def format_ms(ms: np.ndarray) -> list[str]:
    """Epoch milliseconds -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` strings (vectorised)."""
    text = np.datetime_as_string(ms.astype("datetime64[ms]"), unit="ms", timezone="UTC")
    return text.tolist()  # type: ignore[no-any-return]


def datetime_to_wire(value: dt.datetime, naive_timezone: str | None) -> str | None:
    """One datetime -> wire string; None when it is naive and no zone was named.

    Plain datetime arithmetic, not pandas: any year 1-9999 works, and ``fold`` (the second
    01:30 of a DST change) is respected. A naive local time that is ambiguous or does not
    exist in ``naive_timezone`` gives None.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        if naive_timezone is None:
            return None
        zone = zoneinfo.ZoneInfo(naive_timezone)
        early, late = value.replace(tzinfo=zone, fold=0), value.replace(tzinfo=zone, fold=1)
        if early.utcoffset() != late.utcoffset():
            return None  # ambiguous: the clock showed this time twice
        round_trip = early.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None)
        if round_trip != value.replace(tzinfo=None, fold=0):
            return None  # nonexistent: skipped by a DST change
        value = early
    try:
        utc = value.astimezone(dt.UTC)
    except OverflowError:
        return None
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )
