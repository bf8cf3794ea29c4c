"""Free-form values (properties, context, traits) made JSON-exact, or refused with a path.

JSON carries str, int (64-bit here), finite float, bool, null, arrays and objects with string
keys. Anything else (NaN, infinity, bytes, sets, Decimal, arbitrary objects, non-string keys)
cannot be sent exactly, so it makes the row invalid; the problem names the path of the value.
Datetimes become the wire's RFC 3339 millisecond strings; numpy scalars their Python values.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ._timestamps import datetime_to_wire

_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1


class InexactValue(ValueError):
    """A value JSON cannot carry exactly; ``path`` says where it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def to_json(value: Any, path: str, naive_timezone: str | None) -> Any:
    """Return ``value`` as plain JSON-able Python, or raise InexactValue naming the path."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _UINT_MAX:
            raise InexactValue(path, f"integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InexactValue(path, f"{value} is not a JSON number (NaN/infinity)")
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InexactValue(path, f"key {key!r} is not a string")
            out[key] = to_json(item, f"{path}.{key}", naive_timezone)
        return out
    if isinstance(value, list | tuple):
        return [to_json(item, f"{path}[{i}]", naive_timezone) for i, item in enumerate(value)]
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return to_json(value.tolist(), path, naive_timezone)
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64 | np.timedelta64):
        return to_json(value.item(), path, naive_timezone)
    if value is pd.NA or value is pd.NaT:
        raise InexactValue(path, "missing value (NA/NaT) inside an object; omit the key instead")
    if isinstance(value, dt.datetime):
        text = datetime_to_wire(value, naive_timezone)
        if text is None:
            raise InexactValue(
                path, f"naive datetime {value}: give it a time zone or pass naive_timezone"
            )
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    kind = type(value).__name__
    raise InexactValue(path, f"a {kind} has no exact JSON form; convert it to str, int or float")


def check_json_string(text: str, path: str, naive_timezone: str | None) -> dict[str, Any]:
    """Parse a JSON-object string strictly (no NaN literals); raise InexactValue otherwise."""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InexactValue(path, f"not valid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise InexactValue(path, f"must be a JSON object, got {type(parsed).__name__}")
    return to_json(parsed, path, naive_timezone)  # type: ignore[no-any-return]


def object_value(value: Any, path: str, naive_timezone: str | None) -> dict[str, Any]:
    """A ``properties``/``context``/``traits`` cell -> dict; null -> {}; else InexactValue."""
    if isinstance(value, dict):
        return to_json(value, path, naive_timezone)  # type: ignore[no-any-return]
    if isinstance(value, str):
        return check_json_string(value, path, naive_timezone)
    if is_missing(value):
        return {}
    raise InexactValue(path, f"must be a dict or a JSON-object string, got {type(value).__name__}")


def is_missing(value: Any) -> bool:
    """None, NaN, NA and NaT: the cell is empty."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and math.isnan(value)


def problem_of(fn: Any, value: Any, path: str, naive_timezone: str | None) -> str | None:
    """Run a converter and return its problem text, or None when the value is fine."""
    try:
        fn(value, path, naive_timezone)
    except InexactValue as exc:
        return str(exc)
    return None
