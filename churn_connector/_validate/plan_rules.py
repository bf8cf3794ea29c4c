"""A tracking plan's JSON Schemas compiled into checks over columns of values: each keyword
of the supported subset judges all the values at one place at once (numpy over arrays of
values; lengths, patterns and membership in C loops), never one row at a time in Python.

A compiled schema (``Rules``) is given the values found at its place (the ``properties``
objects of the rows of one event type, then the values under each key, the items of each
array, ...) with the row each came from, and adds what fails to a list of ``Found``. A
keyword applies to the values of its kind only, as in JSON Schema (``minimum`` to numbers,
``minLength`` to strings, ``required`` to objects); ``type`` says which kinds are allowed.
Equality (``enum``, ``const``) is JSON's: ``1`` equals ``1.0``, ``true`` is no ``1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

import numpy as np
import orjson
import pandas as pd

__all__ = ["MISSING", "Found", "Members", "Rules", "kind_words"]

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()
"""The value of a required key an object lacks."""

NULL, BOOL, INT, FLOAT, STR, ARRAY, OBJECT, OTHER = range(8)
_TYPE_CODES = {
    "null": (NULL,),
    "boolean": (BOOL,),
    "integer": (INT,),
    "number": (INT, FLOAT),
    "string": (STR,),
    "array": (ARRAY,),
    "object": (OBJECT,),
}
_WORDS = {
    NULL: "null",
    BOOL: "a boolean",
    INT: "an integer",
    FLOAT: "a number",
    STR: "a string",
    ARRAY: "an array",
    OBJECT: "an object",
    OTHER: "a value",
}
# the email columns' rule (churn_connector._options.identities.EMAIL_PATTERN)
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# RFC 3339 date-time (JSON Schema's "date-time"): the fields are range-checked below
_DATE_TIME = (
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?"
    r"(?:[Zz]|[+-](\d{2}):(\d{2}))$"
)


Members = dict[str, tuple[np.ndarray, np.ndarray]]
"""Objects given as columns: key -> (where the key is present, the values there)."""


class _Codes(dict[type, int]):
    def __missing__(self, key: type) -> int:
        return OTHER


_CODES = _Codes(
    {type(None): NULL, bool: BOOL, int: INT, float: FLOAT, str: STR, list: ARRAY, dict: OBJECT}
)


_ONE_KIND = {"string": STR, "integer": INT, "floating": FLOAT, "boolean": BOOL}


def kinds_of(values: np.ndarray) -> np.ndarray:
    """Each value's JSON kind (``NULL`` .. ``OBJECT``), as small integers (a column of one
    kind, the common case, is told by pandas' C-level inference)."""
    one = _ONE_KIND.get(pd.api.types.infer_dtype(values, skipna=False))
    if one is not None:
        return np.full(len(values), one, dtype=np.int8)
    return np.fromiter(map(_CODES.__getitem__, map(type, values)), dtype=np.int8, count=len(values))


def kind_words(value: Any) -> str:
    """What a value is, in words: "a string", "null"."""
    return _WORDS[_CODES[type(value)]]


@dataclass
class Found:
    """Values at one place that break one keyword: ``rows`` (the row each came from),
    ``path`` (``amount``, ``items[].price``), ``keyword`` (``minimum``), ``rule`` as the plan
    says it (``minimum 0``) and ``why`` (what is wrong with such a value)."""

    keyword: str
    path: str
    rule: str
    why: str
    rows: np.ndarray
    values: list[Any]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _canon(value: Any) -> Any:
    """A hashable stand-in that is equal exactly when JSON values are (1 == 1.0, true != 1)."""
    kind = _CODES[type(value)]
    if kind == OBJECT:
        return ("o", frozenset((k, _canon(v)) for k, v in value.items()))
    if kind == ARRAY:
        return ("a", tuple(map(_canon, value)))
    if kind == BOOL:
        return ("b", value)
    if kind in (INT, FLOAT):
        return ("n", value)
    return ("s", value) if kind == STR else ("z", None)


class _Members:
    """The values of an ``enum`` (or a ``const``), by kind, for membership in C loops."""

    def __init__(self, values: Sequence[Any]) -> None:
        self.strings = {v for v in values if type(v) is str}
        self.numbers = {v for v in values if type(v) in (int, float)}
        self.booleans = {v for v in values if type(v) is bool}
        self.null = any(v is None for v in values)
        self.nested = {_canon(v) for v in values if type(v) in (list, dict)}

    def contain(self, values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        ok = np.zeros(len(values), dtype=bool)
        for codes, members in (
            ((STR,), self.strings),
            ((INT, FLOAT), self.numbers),
            ((BOOL,), self.booleans),
        ):
            at = np.isin(kinds, codes)
            if members and at.any():
                ok[at] = np.fromiter(
                    map(members.__contains__, values[at]), dtype=bool, count=int(at.sum())
                )
        if self.null:
            ok[kinds == NULL] = True
        nested = np.isin(kinds, (ARRAY, OBJECT))
        if self.nested and nested.any():
            ok[nested] = [_canon(v) in self.nested for v in values[nested]]
        return ok


def _shown(value: Any) -> str:
    """A value of the plan as JSON writes it (``["usd", "eur"]``)."""
    return orjson.dumps(value).decode()


class Rules:
    """One schema of a plan, compiled (its keywords were checked when the plan was loaded)."""

    def __init__(self, schema: Mapping[str, Any], path: str = "") -> None:
        self.path = path
        kinds = schema.get("type")
        names = (kinds,) if isinstance(kinds, str) else tuple(kinds or ())
        self.types = names
        self.type_codes = np.array(sorted({c for n in names for c in _TYPE_CODES[n]}), np.int8)
        self.whole_floats = "integer" in names and "number" not in names
        self.members: list[tuple[str, _Members, str]] = []  # (keyword, values, rule)
        if "enum" in schema:
            self.members.append(
                ("enum", _Members(schema["enum"]), "enum " + _shown(list(schema["enum"])))
            )
        if "const" in schema:
            self.members.append(
                ("const", _Members([schema["const"]]), "const " + _shown(schema["const"]))
            )
        self.bounds = [
            (k, schema[k])
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            if k in schema
        ]
        self.lengths = [(k, int(schema[k])) for k in ("minLength", "maxLength") if k in schema]
        self.pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
        self.format: str | None = schema.get("format")
        self.sizes = [(k, int(schema[k])) for k in ("minItems", "maxItems") if k in schema]
        self.properties = {
            key: Rules(sub, _join(path, key)) for key, sub in schema.get("properties", {}).items()
        }
        self.required = tuple(schema.get("required", ()))
        extra = schema.get("additionalProperties", True)
        self.closed = extra is False
        self.extra = Rules(extra, _join(path, "*")) if isinstance(extra, Mapping) else None
        items = schema.get("items")
        self.items = Rules(items, f"{path}[]") if isinstance(items, Mapping) else None

    @property
    def takes_members(self) -> bool:
        """Objects may be checked as columns (``check_members``): the keywords that judge
        an object as a whole (``enum``, ``const``) are absent, and ``type`` allows it."""
        return not self.members and (not len(self.types) or "object" in self.types)

    def check_members(self, members: Members, rows: np.ndarray, out: list[Found]) -> None:
        """``check`` for objects given as columns (``takes_members``): one per row."""
        n = len(rows)
        for key in self.required:
            found = members.get(key)
            missing = np.ones(n, dtype=bool) if found is None else ~found[0]
            self._add(
                out,
                "required",
                f"required {key}",
                "is missing",
                missing,
                np.full(n, MISSING, dtype=object),
                rows,
                path=_join(self.path, key),
            )
        for key, (present, values) in members.items():
            rules = self.properties.get(key)
            if rules is not None:
                rules.check(values, rows[present], out)
            elif self.closed:
                self._add(
                    out,
                    "additionalProperties",
                    "additionalProperties false",
                    "is not in the plan",
                    np.ones(len(values), dtype=bool),
                    values,
                    rows[present],
                    path=_join(self.path, key),
                )
            elif self.extra is not None:
                self.extra.check(values, rows[present], out)

    def check(self, values: np.ndarray, rows: np.ndarray, out: list[Found]) -> None:
        """Add to ``out`` what ``values`` (from ``rows``) break."""
        if not len(values):
            return
        kinds = kinds_of(values)
        if len(self.types):
            self._type(values, rows, kinds, out)
        for keyword, members, rule in self.members:
            bad = ~members.contain(values, kinds)
            why = "is not one of its values" if keyword == "enum" else "is not its value"
            self._add(out, keyword, rule, why, bad, values, rows)
        if self.bounds:
            self._numbers(values, rows, kinds, out)
        if self.lengths or self.pattern is not None or self.format is not None:
            self._strings(values, rows, kinds, out)
        if self.properties or self.required or self.closed or self.extra is not None:
            self._objects(values, rows, kinds, out)
        if self.sizes or self.items is not None:
            self._arrays(values, rows, kinds, out)

    def _add(
        self,
        out: list[Found],
        keyword: str,
        rule: str,
        why: str,
        bad: np.ndarray,
        values: np.ndarray,
        rows: np.ndarray,
        path: str | None = None,
    ) -> None:
        if bad.any():
            out.append(
                Found(
                    keyword,
                    self.path if path is None else path,
                    rule,
                    why,
                    rows[bad],
                    list(values[bad]),
                )
            )

    def _type(
        self, values: np.ndarray, rows: np.ndarray, kinds: np.ndarray, out: list[Found]
    ) -> None:
        ok = np.isin(kinds, self.type_codes)
        floats = kinds == FLOAT
        if self.whole_floats and floats.any():
            # JSON Schema: 1.0 is an integer
            whole = np.asarray(values[floats], dtype=np.float64)
            ok[floats] = np.mod(whole, 1) == 0
        spelled = self.types[0] if len(self.types) == 1 else _shown(list(self.types))
        self._add(out, "type", f"type {spelled}", f"is not of type {spelled}", ~ok, values, rows)

    def _numbers(
        self, values: np.ndarray, rows: np.ndarray, kinds: np.ndarray, out: list[Found]
    ) -> None:
        at = (kinds == INT) | (kinds == FLOAT)
        if not at.any():
            return
        numbers, where = values[at], rows[at]
        for keyword, limit in self.bounds:
            # Python's comparisons on the values themselves: exact for any int and float
            if keyword == "minimum":
                bad, why = numbers < limit, f"is below the minimum {limit}"
            elif keyword == "maximum":
                bad, why = numbers > limit, f"is above the maximum {limit}"
            elif keyword == "exclusiveMinimum":
                bad, why = numbers <= limit, f"is not above {limit}"
            else:
                bad, why = numbers >= limit, f"is not below {limit}"
            self._add(out, keyword, f"{keyword} {limit}", why, bad.astype(bool), numbers, where)

    def _strings(
        self, values: np.ndarray, rows: np.ndarray, kinds: np.ndarray, out: list[Found]
    ) -> None:
        at = kinds == STR
        n = int(at.sum())
        if not n:
            return
        strings, where = values[at], rows[at]
        if self.lengths:
            lengths = np.fromiter(map(len, strings), dtype=np.int64, count=n)
            for keyword, limit in self.lengths:
                if keyword == "minLength":
                    bad, why = lengths < limit, f"is shorter than {limit} characters"
                else:
                    bad, why = lengths > limit, f"is longer than {limit} characters"
                self._add(out, keyword, f"{keyword} {limit}", why, bad, strings, where)
        if self.pattern is not None:
            hits = np.fromiter(map(bool, map(self.pattern.search, strings)), dtype=bool, count=n)
            rule = f"pattern {self.pattern.pattern}"
            self._add(out, "pattern", rule, "does not match the pattern", ~hits, strings, where)
        if self.format == "email":
            hits = np.fromiter(map(bool, map(_EMAIL.fullmatch, strings)), dtype=bool, count=n)
            why = "is not an email address (name@domain.tld)"
            self._add(out, "format", "format email", why, ~hits, strings, where)
        elif self.format == "date-time":
            why = "is not an RFC 3339 date-time (2026-11-20T09:30:00Z)"
            self._add(out, "format", "format date-time", why, ~_date_times(strings), strings, where)

    def _objects(
        self, values: np.ndarray, rows: np.ndarray, kinds: np.ndarray, out: list[Found]
    ) -> None:
        at = kinds == OBJECT
        n = int(at.sum())
        if not n:
            return
        objects, where = values[at], rows[at]
        present: dict[str, np.ndarray] = {}

        def has(key: str) -> np.ndarray:
            if key not in present:
                present[key] = np.fromiter(
                    map(dict.__contains__, objects, repeat(key)), dtype=bool, count=n
                )
            return present[key]

        for key in self.required:
            missing = ~has(key)
            self._add(
                out,
                "required",
                f"required {key}",
                "is missing",
                missing,
                np.full(n, MISSING, dtype=object),
                where,
                path=_join(self.path, key),
            )
        for key, rules in self.properties.items():
            inside = has(key)
            k = int(inside.sum())
            if k:
                found = np.fromiter(
                    map(dict.__getitem__, objects[inside], repeat(key)), dtype=object, count=k
                )
                rules.check(found, where[inside], out)
        if self.closed or self.extra is not None:
            named = frozenset(self.properties)
            only = np.fromiter(map(named.issuperset, objects), dtype=bool, count=n)
            if only.all():
                return
            extra_rows, extra_keys, extra_values = [], [], []
            for obj, row in zip(objects[~only], where[~only], strict=True):
                for key, value in obj.items():
                    if key not in named:
                        extra_rows.append(row)
                        extra_keys.append(key)
                        extra_values.append(value)
            if self.closed:
                for key in dict.fromkeys(extra_keys):
                    mine = np.array([k == key for k in extra_keys])
                    self._add(
                        out,
                        "additionalProperties",
                        "additionalProperties false",
                        "is not in the plan",
                        mine,
                        np.array(extra_values, dtype=object),
                        np.array(extra_rows),
                        path=_join(self.path, key),
                    )
            elif self.extra is not None:
                found = np.empty(len(extra_values), dtype=object)
                found[:] = extra_values
                self.extra.check(found, np.array(extra_rows), out)

    def _arrays(
        self, values: np.ndarray, rows: np.ndarray, kinds: np.ndarray, out: list[Found]
    ) -> None:
        at = kinds == ARRAY
        n = int(at.sum())
        if not n:
            return
        arrays, where = values[at], rows[at]
        sizes = np.fromiter(map(len, arrays), dtype=np.int64, count=n)
        for keyword, limit in self.sizes:
            if keyword == "minItems":
                bad, why = sizes < limit, f"has fewer than {limit} items"
            else:
                bad, why = sizes > limit, f"has more than {limit} items"
            self._add(out, keyword, f"{keyword} {limit}", why, bad, arrays, where)
        if self.items is not None:
            total = int(sizes.sum())
            items = np.fromiter(chain.from_iterable(arrays), dtype=object, count=total)
            self.items.check(items, np.repeat(where, sizes), out)


def _date_times(strings: np.ndarray) -> np.ndarray:
    """Which strings are RFC 3339 date-times of real dates and times (column-wise)."""
    parts = pd.Series(strings, dtype=object).str.extract(_DATE_TIME)
    ok = parts[0].notna().to_numpy().copy()
    if not ok.any():
        return ok
    fields = parts[ok].fillna("0").astype(np.int64).to_numpy()
    year, month, day, hour, minute, second, off_h, off_m = fields.T
    month_ok = (month >= 1) & (month <= 12)
    last = _month_days(year, month)
    good = (
        month_ok
        & (day >= 1)
        & (day <= last)
        & (hour <= 23)
        & (minute <= 59)
        & (second <= 60)
        & (off_h <= 23)
        & (off_m <= 59)
    )
    ok[ok] = good
    return ok


_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def _month_days(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    """The days of each (year, month): a month out of range has none."""
    safe = np.clip(month, 0, 12)
    days = _DAYS[safe].copy()
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    days[(safe == 2) & leap] = 29
    found: np.ndarray = days
    return found
