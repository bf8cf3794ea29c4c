"""Vectorised timestamp normalisation: any accepted representation -> UTC epoch milliseconds.

Accepted: tz-aware datetime columns (any zone, any unit), tz-aware ``datetime`` objects, and
text in every unambiguous spelling (``_timetext``: RFC 3339, ISO 8601 with offsets, the text
exports of PostgreSQL, Redshift, BigQuery and Snowflake); naive values only when the caller
names ``naive_timezone``; epoch numbers only when the caller names ``epoch_unit``. Nothing
is guessed: a naive value without ``naive_timezone`` is a problem, not UTC, and an epoch
number without a unit is a problem, not seconds.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import timestamp_text as _timetext
from .timestamp_text import EXAMPLE, NS_PER_UNIT

__all__ = ["EXAMPLE", "NormalizeCache", "Normalized", "TimestampProblem", "normalize_timestamps"]


class TimestampProblem(IntEnum):
    """What is wrong with one timestamp cell (stored as int8 per row; OK means usable)."""

    OK = 0
    NULL = 1
    BAD_TYPE = 2
    BAD_FORMAT = 3
    NAIVE = 4
    BAD_LOCAL_TIME = 5
    ZONE_NAME = 6


OK, NULL, BAD_TYPE, BAD_FORMAT, NAIVE, BAD_LOCAL_TIME, ZONE_NAME = TimestampProblem
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
    per_unit = NS_PER_UNIT[unit]
    # floor division keeps truncation exact for instants before 1970 too
    ms = raw * (per_unit // 1_000_000) if per_unit >= 1_000_000 else raw // (1_000_000 // per_unit)
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


def _localize_ms(wall_ms: np.ndarray, naive_timezone: str) -> tuple[np.ndarray, np.ndarray]:
    """Wall-clock epoch ms (naive) -> (UTC ms, is_bad_local_time) in the named zone."""
    return _localize(pd.Series(wall_ms.astype("datetime64[ms]")), naive_timezone)


def _text(arr: pa.Array, tz: str | None, unit: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A string array without nulls -> (ms, problem)."""
    canonical = _wire_spelled(arr)
    if canonical is not None:
        return canonical, np.full(len(arr), OK, dtype=np.int8)
    parsed = _timetext.parse_text(arr)
    ms = parsed.ms.copy()
    problem = np.where(parsed.ok, OK, BAD_FORMAT).astype(np.int8)
    problem[parsed.zone_name] = ZONE_NAME
    numbers = ~parsed.ok & ~parsed.zone_name
    if numbers.any():
        numbers[numbers] = _timetext.is_epoch_text(arr.filter(pa.array(numbers)))
    if numbers.any():
        if unit is None:
            problem[numbers] = BAD_TYPE  # a number written as text: which unit is it in?
        else:
            idx = np.flatnonzero(numbers)
            texts = arr.filter(pa.array(numbers)).to_pylist()
            part_ms, inside = _timetext.epoch_text_ms(texts, unit)
            ms[idx] = part_ms
            problem[idx] = np.where(inside, OK, BAD_FORMAT)
    naive = parsed.ok & ~parsed.has_zone
    if naive.any():
        idx = np.flatnonzero(naive)
        if tz is None:
            problem[idx] = NAIVE
        else:
            ms[idx], bad_local = _localize_ms(parsed.ms[idx], tz)
            problem[idx[bad_local]] = BAD_LOCAL_TIME
    return ms, problem


def _wire_spelled(arr: pa.Array) -> np.ndarray | None:
    """The epoch ms of a column whose every text is spelled as the wire spells instants
    (``YYYY-MM-DDTHH:MM:SS.mmmZ``, what most exports write) or as that local time with an
    offset (``YYYY-MM-DDTHH:MM:SS.mmm+02:00``), in any mix, read by Arrow's ISO 8601 cast
    and proved by spelling each result back: the result plus the offset written in the
    text must spell the text's local time byte for byte, and equal bytes mean the one
    instant the grammar reads there. None when any text is spelled otherwise (the general
    parser then runs)."""
    n = len(arr)
    large = pa.types.is_large_string(arr.type)
    if n == 0 or arr.null_count or not (large or pa.types.is_string(arr.type)):
        return None
    width = np.int64 if large else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset : arr.offset + n + 1]
    lengths = np.diff(offsets)
    utc = lengths == _WIRE_LEN
    zone_ms = None
    if utc.all():  # one spelling, one stride: the texts are an (n, 24) view of the bytes
        data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        texts = data.reshape(n, _WIRE_LEN)
    else:
        zoned = _zoned(arr, offsets, utc, lengths == _ZONED_LEN)
        if zoned is None:
            return None
        texts, zone_ms = zoned
    try:
        ms: np.ndarray = pc.cast(arr, pa.timestamp("ms", "UTC")).cast(pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    spelled = ms_text(ms if zone_ms is None else ms + zone_ms)
    if spelled is None or not np.array_equal(spelled[:, : texts.shape[1]], texts):
        return None
    return ms


_WIRE_LEN, _LOCAL_LEN, _ZONED_LEN = 24, 23, 29  # ...00.123Z, ...00.123, ...00.123+02:00
_Z, _PLUS, _MINUS, _COLON = 90, 43, 45, 58


def _zoned(
    arr: pa.Array, offsets: np.ndarray, utc: np.ndarray, zoned: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """For a column of 24-byte texts ending in ``Z`` and 29-byte ones ending in ``±HH:MM``:
    (the first 23 bytes of each as an (n, 23) array, the offset in ms of each, 0 for
    ``Z``). None when a length or a zone is anything else, or an offset is one the general
    parser refuses (hours above 23, minutes above 59; ``-00:00`` is UTC to it, and here)."""
    if not (utc | zoned).all():
        return None
    binary = pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()
    local = pc.binary_slice(arr.view(binary), 0, _LOCAL_LEN)  # one copy, 23 bytes a text
    local_offsets = np.frombuffer(local.buffers()[1], dtype=offsets.dtype)
    local_offsets = local_offsets[local.offset : local.offset + len(arr) + 1]
    if int(local_offsets[-1] - local_offsets[0]) != _LOCAL_LEN * len(arr):
        return None  # slices are at most 23 bytes: this total means all are; always so here
    local_bytes = np.frombuffer(local.buffers()[2], dtype=np.uint8)
    texts = local_bytes[local_offsets[0] : local_offsets[-1]].reshape(-1, _LOCAL_LEN)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    starts = offsets[:-1].astype(np.int64) + _LOCAL_LEN
    if not (data[starts[utc]] == _Z).all():
        return None
    zone = data[starts[zoned, None] + np.arange(_ZONED_LEN - _LOCAL_LEN)]  # (k, 6): ±HH:MM
    digits = zone[:, [1, 2, 4, 5]].astype(np.int64) - 48
    sign = zone[:, 0]
    if not (
        ((sign == _PLUS) | (sign == _MINUS)).all()
        and (zone[:, 3] == _COLON).all()
        and ((digits >= 0) & (digits <= 9)).all()
    ):
        return None
    hours, minutes = digits[:, 0] * 10 + digits[:, 1], digits[:, 2] * 10 + digits[:, 3]
    if (hours > 23).any() or (minutes > 59).any():
        return None
    zone_ms = np.zeros(len(arr), dtype=np.int64)
    zone_ms[zoned] = np.where(sign == _MINUS, -60_000, 60_000) * (hours * 60 + minutes)
    return texts, zone_ms


def _string_array(values: list[str]) -> tuple[pa.Array, np.ndarray]:
    """Python strings -> (Arrow strings, encodable); a lone surrogate becomes null."""
    try:
        return pa.array(values, pa.string()), np.ones(len(values), dtype=bool)
    except (UnicodeEncodeError, pa.ArrowException):
        ok = np.array([_encodable(v) for v in values], dtype=bool)
        kept = [v if k else None for v, k in zip(values, ok, strict=True)]
        return pa.array(kept, pa.string()), ok


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_aware(value: dt.datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() is not None


def _epoch(values: np.ndarray, unit: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Numbers -> (ms, problem): refused without a unit, or as float nanoseconds."""
    n = len(values)
    if unit is None or (values.dtype.kind == "f" and unit == "ns"):
        return np.zeros(n, dtype=np.int64), np.full(n, BAD_TYPE, dtype=np.int8)
    if values.dtype.kind == "f":
        ms, inside = _timetext.epoch_float_ms(values, unit)
    else:
        ms, inside = _timetext.epoch_int_ms(values, unit)
    return ms, np.where(inside, OK, BAD_FORMAT).astype(np.int8)


def _classify(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if isinstance(value, dt.datetime):  # includes pd.Timestamp; NaT is in the null mask
        return "aware" if _is_aware(value) else "naive"
    if isinstance(value, bool | np.bool_):
        return "other"
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        return "float"
    return "other"


def _parse_objects(s: pd.Series, tz: str | None, unit: str | None) -> tuple[np.ndarray, np.ndarray]:
    values = s.tolist()
    n = len(values)
    ms = np.zeros(n, dtype=np.int64)
    problem = np.full(n, BAD_TYPE, dtype=np.int8)
    groups: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault(_classify(v), []).append(i)
    if strings := groups.get("str"):
        arr, encodable = _string_array([values[i] for i in strings])
        part_ms, part_problem = _text(arr, tz, unit)
        part_problem[~encodable] = BAD_FORMAT
        ms[strings], problem[strings] = part_ms, part_problem
    if aware := groups.get("aware"):
        ms[aware] = _aware_to_ms(pd.to_datetime(s.iloc[aware], utc=True))[0]
        problem[aware] = OK
    if naive := groups.get("naive"):
        if tz is None:
            problem[naive] = NAIVE
        else:
            part_ms, bad_local = _localize(pd.to_datetime(s.iloc[naive]), tz)
            ms[naive] = part_ms
            problem[naive] = np.where(bad_local, BAD_LOCAL_TIME, OK)
    for kind, dtype in (("int", np.int64), ("float", np.float64)):
        if where := groups.get(kind):
            try:
                numbers = np.array([values[i] for i in where], dtype=dtype)
            except OverflowError:
                continue  # an integer beyond 64 bits: no instant, BAD_TYPE stays
            ms[where], problem[where] = _epoch(numbers, unit)
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


def _arrow_strings(s: pd.Series) -> pa.Array:
    arr = pa.array(s)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr


def normalize_timestamps(
    s: pd.Series, naive_timezone: str | None = None, epoch_unit: str | None = None
) -> Normalized:
    """Normalise one column of timestamps; see the module docstring for what is accepted."""
    s = _plain(s)
    n = len(s)
    null = s.isna().to_numpy(dtype=bool)
    ms = np.zeros(n, dtype=np.int64)
    problem = np.full(n, OK, dtype=np.int8)
    present = ~null
    dtype = s.dtype
    api = pd.api.types
    if isinstance(dtype, pd.DatetimeTZDtype):
        ms, _ = _aware_to_ms(s)
    elif api.is_datetime64_dtype(dtype):
        if naive_timezone is None:
            problem[present] = NAIVE
        else:
            ms, bad_local = _localize(s, naive_timezone)
            problem[bad_local] = BAD_LOCAL_TIME
    elif api.is_bool_dtype(dtype):
        problem[present] = BAD_TYPE
    elif api.is_integer_dtype(dtype) or api.is_float_dtype(dtype):
        kind = "float64" if api.is_float_dtype(dtype) else "int64"
        if api.is_unsigned_integer_dtype(dtype):
            kind = "uint64"
        numbers = s[present].to_numpy(dtype=kind)
        ms[present], problem[present] = _epoch(numbers, epoch_unit)
    elif api.is_string_dtype(dtype) and not api.is_object_dtype(dtype):
        if present.any():
            arr = _arrow_strings(s[present])
            ms[present], problem[present] = _text(arr, naive_timezone, epoch_unit)
    elif api.is_object_dtype(dtype):
        if present.any():
            ms[present], problem[present] = _parse_objects(s[present], naive_timezone, epoch_unit)
    else:
        problem[present] = BAD_TYPE
    problem[null] = NULL
    ms[problem != OK] = 0
    return Normalized(ms=ms, problem=problem)


class NormalizeCache:
    """``normalize_timestamps`` with the options of one schema, remembering its last column.

    The schema's five timestamp checks (and the wire) look at the same column of the same
    slice; pandera hands each check its own Series object, so the cache compares values
    (cheap next to parsing them) instead of identities.
    """

    def __init__(self, naive_timezone: str | None, epoch_unit: str | None) -> None:
        self.naive_timezone = naive_timezone
        self.epoch_unit = epoch_unit
        self._last: tuple[pd.Series, Normalized] | None = None

    def __call__(self, s: pd.Series) -> Normalized:
        last = self._last
        if last is not None and _same_values(last[0], s):
            return last[1]
        result = normalize_timestamps(s, self.naive_timezone, self.epoch_unit)
        self._last = (s, result)
        return result


def _same_values(a: pd.Series, b: pd.Series) -> bool:
    if a is b:
        return True
    if len(a) != len(b) or a.dtype != b.dtype or not a.array.equals(b.array):
        return False
    if pd.api.types.is_object_dtype(a.dtype):
        # 1 == True == 1.0 in Python: equal objects of other types may normalise differently
        return all(type(x) is type(y) for x, y in zip(a.tolist(), b.tolist(), strict=True))
    return True


# -- the one spelling of an instant on the wire ------------------------------------------
# ``YYYY-MM-DDTHH:MM:SS.mmmZ``: UTC, floored to the millisecond, years 0001..9999. Both wire
# paths spell columns with ``ms_text`` (the per-row one through ``format_ms``, the
# column-wise one through ``_json.arrow.format_ms_binary``); ``datetime_to_wire`` spells one
# ``datetime`` (a dict's value) the same way.

_T2 = np.array([[48 + i // 10, 48 + i % 10] for i in range(100)], dtype=np.uint8)
_T3 = np.array([[48 + i // 100, 48 + i // 10 % 10, 48 + i % 10] for i in range(1000)], np.uint8)
_MS_PER_DAY, _MS_PER_MINUTE = 86_400_000, 60_000
_DATE_TABLE_DAYS = 4096  # a span of dates this short is spelled once per date


def _time_tables() -> tuple[np.ndarray, np.ndarray]:
    """``HH:MM:`` of every minute of a day, ``SS.mmmZ`` of every ms of a minute (6- and
    7-byte items, 0.4 MB): a time of day is two lookups and two copies per instant, where
    a copy per pair of digits (each a strided copy of 2 or 3 bytes a row) cost ~1,000
    instructions an instant more."""
    minute = np.arange(1_440)
    hm = np.empty((len(minute), 6), dtype=np.uint8)
    hm[:, 0:2], hm[:, 3:5] = _T2[minute // 60], _T2[minute % 60]
    hm[:, 2] = hm[:, 5] = 58  # ':'
    milli = np.arange(_MS_PER_MINUTE)
    sm = np.empty((len(milli), 7), dtype=np.uint8)
    sm[:, 0:2], sm[:, 3:6] = _T2[milli // 1000], _T3[milli % 1000]
    sm[:, 2], sm[:, 6] = 46, 90  # '.', 'Z'
    return hm.view("V6")[:, 0], sm.view("V7")[:, 0]


_HH_MM, _SS_MMM_Z = _time_tables()
# one spelled instant as its three looked-up parts
_SPELLED = np.dtype({"names": ["date", "hm", "smz"], "formats": ["V11", "V6", "V7"]})


def ms_text(ms: np.ndarray) -> np.ndarray | None:
    """Epoch ms -> (n, 24) uint8: the wire spelling of each instant; None when one is
    outside years 1..9999 (validation refuses those: they are never sent)."""
    n = len(ms)
    if n and not (ms.min() >= _timetext.MIN_MS and ms.max() <= _timetext.MAX_MS):
        return None
    days, rem = np.divmod(ms, _MS_PER_DAY)
    out = np.empty((n, 24), dtype=np.uint8)
    parts = out.view(_SPELLED)[:, 0]
    lo = int(days.min()) if n else 0
    span = int(days.max()) - lo + 1 if n else 0
    if span <= _DATE_TABLE_DAYS:  # typical: a few weeks of events -> each date spelled once
        table = np.empty((span, 11), dtype=np.uint8)
        _civil(table, np.arange(lo, lo + span))
        parts["date"] = table.view("V11")[:, 0][days - lo]
    else:
        _civil(out, days)
    minute, milli = np.divmod(rem, _MS_PER_MINUTE)
    parts["hm"] = _HH_MM[minute]
    parts["smz"] = _SS_MMM_Z[milli]
    return out


def _civil(out: np.ndarray, days: np.ndarray) -> None:
    """``YYYY-MM-DDT`` into out[:, :11] for days since 1970 (years 1..9999)."""
    z = days + 719_468  # civil_from_days (H. Hinnant), proleptic Gregorian
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    century, yy = np.divmod(year, 100)
    out[:, 0:2] = _T2[century]
    out[:, 2:4] = _T2[yy]
    out[:, 5:7] = _T2[month]
    out[:, 8:10] = _T2[day]
    out[:, 4] = out[:, 7] = 45  # '-'
    out[:, 10] = 84  # 'T'


def format_ms(ms: np.ndarray) -> list[str]:
    """Epoch milliseconds -> wire strings (``ms_text``), vectorised."""
    text = ms_text(ms)
    if text is None:  # never sent; only spelled for messages: numpy's way
        spelled = np.datetime_as_string(ms.astype("datetime64[ms]"), unit="ms", timezone="UTC")
        return spelled.tolist()  # type: ignore[no-any-return]
    texts: list[str] = text.view("S24").ravel().astype("U24").tolist()
    return texts


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
    # ms_text's spelling, one value at a time (25x cheaper than a numpy call per value;
    # tests/events/test_wire_columnar.py holds the two equal)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )
