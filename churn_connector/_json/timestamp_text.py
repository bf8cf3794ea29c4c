"""Timestamp text and epoch numbers -> epoch milliseconds, vectorised, without guessing.

The text grammar (one value: date, separator, time, fraction, zone):

    date      YYYY-MM-DD                      (years 0001-9999; a real calendar date)
    separator T, t or one space
    time      HH:MM[:SS]                      (23:59:59 at most: no 24:00, no leap second)
    fraction  . or , then 1 to 9 digits       (floored to the millisecond, before 1970 too)
    zone      an optional space, then Z, z, UTC, ±HH, ±HHMM, ±HH:MM or ±HH:MM:SS

That covers RFC 3339, ISO 8601 with offsets, and the text exports of PostgreSQL/Redshift
``timestamptz`` (``2026-11-20 09:30:00.123456+00``), BigQuery ``TIMESTAMP`` CSV
(``2026-11-20 09:30:00.123456 UTC``) and Snowflake ``TIMESTAMP_TZ``/``TIMESTAMP_LTZ`` CSV
(``2026-11-20 09:30:00.123 +0000``). A date alone (``2026-11-20``) and a date-time without a
zone are naive. A zone *name* or abbreviation (``EST``, ``CET``, ``America/New_York``, a
``[zone]`` suffix) is refused with its own reason: ``CST`` is both US Central and China, and
a name does not say which offset applied at that instant.

One cheap regular-expression *match* validates the grammar; the fields are then read straight
from the Arrow string buffer with numpy (the grammar is ASCII and its date-time part sits at
fixed positions), with the calendar arithmetic done in integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_TIME = r"[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]{1,9})?"
_ZONE = r"(?: ?(?:[Zz]|UTC|[+-][0-9]{2}(?::[0-9]{2}(?::[0-9]{2})?|[0-9]{2})?))?"
PATTERN = f"^{_DATE}(?:{_TIME}{_ZONE})?$"
# a well-formed date-time followed by a zone name or abbreviation, or an RFC 9557 suffix
ZONE_NAME_PATTERN = (
    f"^{_DATE}{_TIME}(?:{_ZONE}\\[[^\\]]*\\]| ?[A-Za-z][A-Za-z0-9/_+-]*(?:\\[[^\\]]*\\])?)$"
)
EPOCH_TEXT = r"^-?[0-9]{1,30}(?:\.[0-9]{1,30})?$"
EXAMPLE = "2026-11-20T09:30:00.123+01:00"

# the instants a wire timestamp can spell: 0001-01-01 .. 9999-12-31T23:59:59.999
MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999
NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
_COLON, _SPACE, _PLUS, _MINUS = 58, 32, 43, 45


@dataclass(frozen=True)
class ParsedText:
    """Per value: ``ok`` (the grammar matched and the date is real), wall-clock ms, whether
    a zone was written (then ``ms`` is UTC), and ``zone_name`` (refused: a named zone)."""

    ok: np.ndarray
    ms: np.ndarray
    has_zone: np.ndarray
    zone_name: np.ndarray


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Proleptic Gregorian date -> days since 1970-01-01 (H. Hinnant's algorithm)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468  # type: ignore[no-any-return]


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data bytes) of a string array."""
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    if data_buf is None or data_buf.size == 0:
        return offsets.astype(np.int64), np.zeros(1, dtype=np.uint8)
    return offsets.astype(np.int64), np.frombuffer(data_buf, dtype=np.uint8)


def parse_text(arr: pa.Array) -> ParsedText:
    """Parse a string array (nulls allowed: they come back not ok, not zone_name)."""
    n = len(arr)
    ms = np.zeros(n, dtype=np.int64)
    has_zone = np.zeros(n, dtype=bool)
    matched = _mask(pc.match_substring_regex(arr, PATTERN))
    bad = ~matched & _mask(arr.is_valid())
    zone_name = np.zeros(n, dtype=bool)
    if bad.any():
        named = pc.match_substring_regex(arr.filter(pa.array(bad)), ZONE_NAME_PATTERN)
        zone_name[np.flatnonzero(bad)] = _mask(named)
    idx = np.flatnonzero(matched)
    ok = np.zeros(n, dtype=bool)
    if len(idx) == 0:
        return ParsedText(ok, ms, has_zone, zone_name)
    offsets, data = _buffers(arr)
    start = offsets[idx]
    length = offsets[idx + 1] - start
    last = len(data) - 1

    def byte(pos: np.ndarray | int) -> np.ndarray:
        return data[np.minimum(start + pos, last)].astype(np.int64)  # type: ignore[no-any-return]

    def num(pos: np.ndarray | int, width: int) -> np.ndarray:
        value = np.zeros(len(start), dtype=np.int64)
        for k in range(width):
            value = value * 10 + byte(pos + k) - 48
        return value

    year, month, day = num(0, 4), num(5, 2), num(8, 2)
    timed = length > 10
    hour = np.where(timed, num(11, 2), 0)
    minute = np.where(timed, num(14, 2), 0)
    has_s = timed & (length > 16) & (byte(16) == _COLON)
    second = np.where(has_s, num(17, 2), 0)
    p = 16 + 3 * has_s
    has_f = timed & (length > p) & np.isin(byte(p), (44, 46))  # ',' or '.'
    frac = np.zeros(len(start), dtype=np.int64)
    digits = np.zeros(len(start), dtype=np.int64)
    going = has_f.copy()
    for k in range(1, 10):
        c = byte(p + k)
        going &= (p + k < length) & (c >= 48) & (c <= 57)
        frac = np.where(going, frac * 10 + c - 48, frac)
        digits += going
    frac_ns = frac * 10 ** (9 - digits)
    p = p + has_f * (1 + digits)
    p = p + ((length > p) & (byte(p) == _SPACE))
    zone_len = np.where(timed, length - p, 0)
    c0 = byte(p)
    signed = (zone_len > 0) & ((c0 == _PLUS) | (c0 == _MINUS))
    sign = np.where(c0 == _MINUS, -1, 1)
    off_h = np.where(signed, num(p + 1, 2), 0)
    off_m = np.where(
        signed & (zone_len == 5),
        num(p + 3, 2),
        np.where(signed & (zone_len >= 6), num(p + 4, 2), 0),
    )
    off_s = np.where(signed & (zone_len == 9), num(p + 7, 2), 0)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    month_days = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & leap)
    real = (
        (year >= 1)
        & (month >= 1)
        & (month <= 12)
        & (day >= 1)
        & (day <= month_days)
        & (hour <= 23)
        & (minute <= 59)
        & (second <= 59)
        & (off_h <= 23)
        & (off_m <= 59)
        & (off_s <= 59)
    )
    secs = _days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
    # the fraction is never negative, so adding its floor keeps the floor before 1970 too
    wall = secs * 1_000 + frac_ns // 1_000_000
    offset = sign * (off_h * 3_600 + off_m * 60 + off_s) * 1_000
    zoned = zone_len > 0
    ok[idx] = real
    ms[idx] = np.where(real, wall - np.where(zoned, offset, 0), 0)
    has_zone[idx] = zoned & real
    return ParsedText(ok, ms, has_zone, zone_name)


def _mask(arr: pa.Array) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)  # type: ignore[no-any-return]


def is_epoch_text(arr: pa.Array) -> np.ndarray:
    """True where the text is a plain decimal number (an epoch value written as text)."""
    return _mask(pc.match_substring_regex(arr, EPOCH_TEXT))


def epoch_text_ms(texts: list[str], unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Decimal texts in ``unit`` -> (epoch ms floored, in range), parsed exactly (no float)."""
    per_unit = NS_PER_UNIT[unit]
    ms = np.zeros(len(texts), dtype=np.int64)
    inside = np.zeros(len(texts), dtype=bool)
    for i, text in enumerate(texts):
        whole, _, fraction = text.partition(".")
        negative = whole.startswith("-")
        digits = int(whole.lstrip("-") + fraction)
        # Python integers: exact whatever the digits, and // floors below zero too
        value = (-digits if negative else digits) * per_unit // (10 ** len(fraction) * 1_000_000)
        if MIN_MS <= value <= MAX_MS:
            ms[i], inside[i] = value, True
    return ms, inside


def epoch_int_ms(values: np.ndarray, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Integers (int64 or uint64) in ``unit`` -> (epoch ms floored, in range); exact."""
    per_unit = NS_PER_UNIT[unit]
    approx = values.astype(np.float64) * (per_unit / 1_000_000)
    inside = (approx >= MIN_MS - 1) & (approx <= MAX_MS + 1)
    exact = np.where(inside, values, 0).astype(np.int64)
    if per_unit >= 1_000_000:
        ms = exact * (per_unit // 1_000_000)
    else:
        ms = np.floor_divide(exact, 1_000_000 // per_unit)
    inside &= (ms >= MIN_MS) & (ms <= MAX_MS)
    return np.where(inside, ms, 0), inside


def epoch_float_ms(values: np.ndarray, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Floats in ``unit`` (not ns) -> (epoch ms, in range).

    A float of seconds with six decimals (what ``epoch()`` functions return) is the nearest
    double to a whole microsecond: rounding to the microsecond recovers it exactly, then the
    millisecond is floored. Nanosecond floats are not exact at today's dates and are refused
    by the caller.
    """
    us_per_unit = NS_PER_UNIT[unit] // 1_000
    finite = np.isfinite(values)
    us = np.round(np.where(finite, values, 0) * us_per_unit)
    inside = finite & (us >= MIN_MS * 1_000) & (us <= MAX_MS * 1_000 + 999)
    ms = np.floor_divide(np.where(inside, us, 0).astype(np.int64), 1_000)
    return ms, inside
