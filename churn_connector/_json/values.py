"""Free-form values (properties, context, traits) made JSON-exact, or refused with a path.

JSON carries str, int (64-bit here), finite float, bool, null, arrays and objects with string
keys. Anything else (NaN, infinity, bytes, sets, Decimal, arbitrary objects, non-string keys)
cannot be sent exactly, so it makes the row invalid; the problem names the path of the value.
Datetimes become the wire's RFC 3339 millisecond strings; numpy scalars their Python values.

Two rules make a value's wire form independent of the reader that carried it (id format v2,
docs/concepts/message-ids.md): a float that holds an integer in the interoperable range
(|x| < 2**53, RFC 7493) is that integer (a pandas reader turns an int column with nulls
into float64), and a null member of an object (a struct field, a map value, a dict's None,
NA or NaT) is omitted, as an empty flat column cell is (a struct written from dicts with
different keys has null fields no one wrote). A null inside a list keeps its place as JSON
null, and a JSON null written in JSON text is data: both stay.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .._core import Decimals, IdFormat, named, not_json, option
from .repeats import may_repeat, repeat_in
from .timestamps import datetime_to_wire

_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1
# objects and arrays nested deeper than this, counted from the event (or identify body) as
# level 1, make the row invalid; the wire's JSON encoder stops at 254
MAX_DEPTH = 128
OBJECT_LEVEL = 2  # properties, context, traits: one level below the event
# floats strictly inside +-2**53 that hold an integer are that integer (RFC 7493's range:
# every integer in it has one float, so no reader's rounding can make two values one)
SAFE_INTEGER = 2**53


@dataclass(frozen=True)
class ValueRules:
    """How free-form values are made JSON-exact: the zone of naive datetimes, what a
    Decimal becomes (``error``: refused; ``float``: a float when that is exact; ``str``:
    its digits as written, scale kept), and the canonical form they follow (``v2``:
    integral floats as integers, null members omitted; ``v1``: as 0.1 wrote them)."""

    naive_timezone: str | None = None
    decimals: Decimals = "error"
    id_format: IdFormat = "v2"

    @property
    def v2(self) -> bool:
        return self.id_format != "v1"


def json_number(value: float) -> int | float:
    """A float as JSON means it: an integer when it holds one (|x| < 2**53), else itself."""
    if value.is_integer() and -SAFE_INTEGER < value < SAFE_INTEGER:
        return int(value)
    return value


def whole_floats(values: np.ndarray) -> np.ndarray:
    """Mask of the float64 values that ``json_number`` makes integers (NaN: False)."""
    with np.errstate(invalid="ignore"):
        whole: np.ndarray = (values == np.trunc(values)) & (np.abs(values) < SAFE_INTEGER)
    return whole


def json_floats(values: np.ndarray) -> list[Any]:
    """float64 values as Python numbers, integral ones (|x| < 2**53) as ints (vectorised)."""
    out: list[Any] = values.tolist()
    whole = whole_floats(values)
    if whole.any():
        at = np.flatnonzero(whole).tolist()
        for i, number in zip(at, values[whole].astype(np.int64).tolist(), strict=True):
            out[i] = number
    return out


def _is_null(value: Any) -> bool:
    """A member that stands for no value: None, NA, NaT (a float NaN is refused instead)."""
    return value is None or value is pd.NA or value is pd.NaT


def decimal_value(value: Decimal, path: str, decimals: Decimals) -> Any:
    """A Decimal as the caller asked for it, or InexactValue."""
    if not value.is_finite():
        raise InexactValue(path, f"Decimal {value} is not a JSON number")
    if decimals == "str":
        return format(value, "f")  # plain notation, the scale as written: 19.90, 0.0000001
    if decimals == "float":
        number = float(value)
        if Decimal(repr(number)) != value:
            raise InexactValue(
                path,
                f"Decimal {value} has no exact float; pass {option('decimals', 'str')} to send "
                "its digits",
            )
        return number
    raise InexactValue(
        path,
        f"Decimal {value} has no exact JSON form: pass {option('decimals', 'float')} (a JSON "
        f"number, when exact) or {option('decimals', 'str')} (its digits as text)",
    )


class InexactValue(ValueError):
    """A value JSON cannot carry exactly; ``path`` says where it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class Unencodable:
    """Stands in for a string with a lone surrogate, which pandas 3's pyarrow strings (and
    so pandera's failure reporting) cannot hold; it is reported like any bad value."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return ascii(self.text)


class TooDeep:
    """Stands in for a value nested so deep that printing it (as pandera's failure
    reporting does) would exceed Python's recursion limit; reported like any bad value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<nested deeper than {MAX_DEPTH} levels>"


class BadCell:
    """A CSV cell that did not parse as the type ``dtypes=`` gave its column."""

    __slots__ = ("dtype", "text")

    def __init__(self, text: str, dtype: str) -> None:
        self.text = text
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"{self.text!r} (not {self.dtype})"


class RepeatedKey:
    """Stands in for an Arrow map that holds a key twice, or for JSON text that names one
    twice (``where``: the object's path below the text's top): a JSON object cannot, and
    keeping either value would be a guess; reported like any bad value."""

    __slots__ = ("key", "where")

    def __init__(self, key: Any, where: str | None = None) -> None:
        self.key = key
        self.where = where

    def __repr__(self) -> str:
        if self.where is not None:
            return f"<JSON text naming the key {self.key!r} twice>"
        return f"<a map holding the key {self.key!r} twice>"


class RepeatedKeyError(InexactValue):
    """An object that holds one key twice (check ``repeated_key``): JSON text that repeats a
    name (RFC 8259: names SHOULD be unique, and readers then disagree on the value), or an
    Arrow map that repeats a key. Keeping either value would be a guess."""

    def __init__(self, path: str, reason: str, key: str) -> None:
        super().__init__(path, reason)
        self.key = key


def _repeated(path: str, value: RepeatedKey) -> InexactValue:
    if value.where is not None:
        return repeated_text_key(path, value.where, str(value.key))
    return RepeatedKeyError(
        path,
        f"the map holds the key {value.key!r} twice (an Arrow map may, a JSON object may "
        "not); keep one value per key",
        str(value.key),
    )


def repeated_text_key(path: str, where: str, key: str) -> RepeatedKeyError:
    """The error of JSON text whose object at ``path + where`` names ``key`` twice."""
    return RepeatedKeyError(
        path,
        f"the JSON text names the key {key!r} twice in one object"
        f"{f' (at {path}{where})' if where else ''}: which value is meant is a guess (RFC "
        "8259 leaves it to each reader); keep the key once",
        key,
    )


def _too_deep(path: str) -> InexactValue:
    return InexactValue(
        path, f"nested deeper than {MAX_DEPTH} levels (counted from the event); flatten it"
    )


def to_json(
    value: Any, path: str, rules: ValueRules, depth: int = OBJECT_LEVEL, *, nulls: bool = False
) -> Any:
    """Return ``value`` as plain JSON-able Python, or raise InexactValue naming the path.

    ``depth`` is the nesting level ``value`` sits at if it is an object or array. With id
    format v2 a null member of an object is omitted, unless ``nulls`` says the value was
    parsed from JSON text, where a null is written data.
    """
    if isinstance(value, str):
        if has_surrogate(value):
            raise InexactValue(path, "text holds a lone surrogate, which UTF-8 cannot carry")
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, TooDeep):
        raise _too_deep(path)
    if isinstance(value, BadCell):
        raise InexactValue(
            path, f"{value.text!r} is not a {value.dtype} (as {named('dtypes')} says)"
        )
    if isinstance(value, Unencodable):
        raise InexactValue(path, f"text {value!r} holds a lone surrogate, which UTF-8 cannot carry")
    if isinstance(value, RepeatedKey):
        raise _repeated(path, value)
    if isinstance(value, int):
        if not _INT_MIN <= value <= _UINT_MAX:
            raise InexactValue(path, f"integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InexactValue(path, f"{value} is not a JSON number (NaN/infinity)")
        value = float(value)  # numpy's float64 is a float that orjson does not serialise
        return json_number(value) if rules.v2 else value
    if isinstance(value, dict | list | tuple | np.ndarray) and depth > MAX_DEPTH:
        raise _too_deep(path)
    if isinstance(value, dict):
        omit = rules.v2 and not nulls
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InexactValue(path, f"key {key!r} is not a string")
            if has_surrogate(key):
                raise InexactValue(path, f"key {key!r} holds a lone surrogate")
            if omit and _is_null(item):
                continue  # a struct's null field, a map's null value: no value to send
            out[key] = to_json(item, f"{path}.{key}", rules, depth + 1, nulls=nulls)
        return out
    if isinstance(value, list | tuple):
        return [
            to_json(item, f"{path}[{i}]", rules, depth + 1, nulls=nulls)
            for i, item in enumerate(value)
        ]
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return to_json(value.tolist(), path, rules, depth, nulls=nulls)
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64 | np.timedelta64):
        return to_json(value.item(), path, rules, depth, nulls=nulls)
    if value is pd.NA or value is pd.NaT:
        raise InexactValue(path, "missing value (NA/NaT) inside an object; omit the key instead")
    if isinstance(value, dt.datetime):
        text = datetime_to_wire(value, rules.naive_timezone)
        if text is None:
            raise InexactValue(
                path,
                f"naive datetime {value}: give it a time zone, or pass {named('naive_timezone')} "
                "(a local time that is ambiguous or skipped by DST needs an explicit offset)",
            )
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        number = decimal_value(value, path, rules.decimals)
        return json_number(number) if rules.v2 and isinstance(number, float) else number
    kind = type(value).__name__
    article = "an" if kind[:1] in "aeiou" else "a"
    raise InexactValue(
        path, f"{article} {kind} has no exact JSON form; convert it to str, int or float"
    )


# orjson reads integers beyond 64 bits as floats (silently inexact): text with a long run of
# digits is parsed exactly instead, so that such an integer is refused, not rounded
_LONG_INT = re.compile(r"[0-9]{19,}")
_LONG_INT_BYTES = re.compile(rb"[0-9]{19,}")
# what orjson hands back that is exact as it is (it refuses lone surrogates and infinities)
_FLAT = frozenset({str, int, float, bool, type(None)})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_exact(text: str | bytes) -> Any:
    """Parse JSON with every integer exact; NaN and Infinity literals refused (ValueError)."""
    long = _LONG_INT.search(text) if isinstance(text, str) else _LONG_INT_BYTES.search(text)
    if long:
        return json.loads(text, parse_constant=_refuse_constant)
    return orjson.loads(text)


def refuse_repeats(text: str | bytes, path: str, parsed: Any) -> None:
    """Raise RepeatedKeyError when JSON ``text`` (parsed as ``parsed``) names a key twice
    in one of its objects, at any depth."""
    found = repeat_in(text, parsed)
    if found is not None:
        raise repeated_text_key(path, found.where, found.key)


def check_json_string(text: str, path: str, rules: ValueRules) -> dict[str, Any]:
    """Parse a JSON-object string strictly (no NaN literals, no key named twice in one
    object); raise InexactValue (RepeatedKeyError for a repeat) otherwise."""
    try:
        exact = _LONG_INT.search(text) is None
        parsed = orjson.loads(text) if exact else loads_exact(text)
    except (orjson.JSONDecodeError, ValueError) as exc:
        # orjson >= 3.12 says "depth limit exceeded", older 3.x "recursion depth exceeded"
        if "depth limit" in str(exc) or "recursion depth" in str(exc):
            raise InexactValue(path, f"nested deeper than {MAX_DEPTH} levels") from None
        raise InexactValue(path, not_json(text, exc, path)) from None
    if not isinstance(parsed, dict):
        raise InexactValue(path, f"must be a JSON object, got {type(parsed).__name__}")
    if exact and all(type(v) in _FLAT for v in parsed.values()):
        # a flat object as orjson read it is exact already
        if may_repeat(text, len(parsed)):
            refuse_repeats(text, path, parsed)
        if rules.v2 and float in map(type, parsed.values()):
            return {k: json_number(v) if type(v) is float else v for k, v in parsed.items()}
        return parsed
    # its nulls were written in the text: data, kept
    out = to_json(parsed, path, rules, nulls=True)
    refuse_repeats(text, path, parsed)  # after to_json: a value too deep is refused for that
    return out  # type: ignore[no-any-return]


def object_value(value: Any, path: str, rules: ValueRules) -> dict[str, Any]:
    """A ``properties``/``context``/``traits`` cell -> dict; null -> {}; else InexactValue."""
    if isinstance(value, dict):
        return to_json(value, path, rules)  # type: ignore[no-any-return]
    if isinstance(value, str):
        return check_json_string(value, path, rules)
    if is_missing(value):
        return {}
    if isinstance(value, RepeatedKey):
        raise _repeated(path, value)
    raise InexactValue(path, f"must be a dict or a JSON-object string, got {type(value).__name__}")


def is_missing(value: Any) -> bool:
    """None, NaN, NA and NaT: the cell is empty."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and math.isnan(value)


def mask_unreportable(df: Any) -> Any:
    """A copy of ``df`` whose cells pandera cannot report are stand-ins: strings with a lone
    surrogate (top level or nested) become Unencodable, values nested too deep TooDeep."""

    def fix(value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return Unencodable(value) if has_surrogate(value) else value
        if isinstance(value, dict | list | tuple) and depth > MAX_DEPTH:
            return TooDeep()
        if isinstance(value, dict):
            return {
                fix(k, depth) if isinstance(k, str) and has_surrogate(k) else k: fix(v, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [fix(v, depth + 1) for v in value]
        return value

    out = df.copy()
    for column in out.columns[[pd.api.types.is_object_dtype(t) for t in out.dtypes]]:
        out[column] = out[column].map(lambda v: fix(v, OBJECT_LEVEL)).astype(object)
    return out


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (which no UTF-8 encoder accepts)."""
    return not text.isascii() and any("\ud800" <= ch <= "\udfff" for ch in text)


def problem_of(fn: Any, value: Any, path: str, rules: ValueRules) -> str | None:
    """Run a converter and return its problem text, or None when the value is fine.

    Any exception counts as a problem of this one cell, so a surprising value can never
    make pandera fail the whole table.
    """
    try:
        fn(value, path, rules)
    except InexactValue as exc:
        return str(exc)
    except Exception as exc:
        return f"{path}: cannot be converted ({type(exc).__name__}: {exc})"
    return None
