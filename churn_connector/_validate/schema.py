"""Building blocks shared by the events and identities schemas (pandera).

Each wing's ``schema.py`` assembles its table schema from these: named, vectorised checks
whose names come from the registry in ``_checks`` and whose explanations turn a failing
cell into a message with its fix. Nothing is coerced: ``coerce`` stays off so that each
bad cell is a row-level failure case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .._core.contract import FUTURE_WINDOW, PAST_WINDOW
from .._core.types import EpochUnit
from .._core.words import AsShown, Placeholder, alternatives, option, shown, type_name
from .._json.repeats import repeat_in
from .._json.timestamps import EXAMPLE, NormalizeCache, TimestampProblem
from .._json.values import (
    RepeatedKeyError,
    ValueRules,
    object_value,
    problem_of,
    repeated_text_key,
    to_json,
)
from .._read.names import NAME_STYLES, near_misses, styler
from .._read.text import header_hint
from . import columns as _columns
from .checks import require
from .pandera import pa

Explain = Callable[[str | None, Any], str]
EXPLAIN_KEY = "churn_connector.explain"
TIMESTAMPS_KEY = "churn_connector.timestamps"
OWNERS_KEY = "churn_connector.frame_check_columns"
REPEATED = "repeated"  # a cell's problem is a key named twice (check repeated_key)


def message(text: str) -> Explain:
    """An explanation from a template with ``{column}`` and ``{value}``."""
    return lambda column, value: text.format(column=column, value=AsShown(value))


class SchemaBuilder:
    """Builds named checks and their explanations for one set of options."""

    def __init__(
        self,
        rules: ValueRules,
        now: pd.Timestamp | None = None,
        epoch_unit: EpochUnit | None = None,
    ) -> None:
        self.now = now  # anchors the time window of timestamp checks
        self.rules = rules
        self.naive_timezone = rules.naive_timezone
        self.timestamps = NormalizeCache(rules.naive_timezone, epoch_unit)
        self.owners: dict[str, str] = {}
        self.explain: dict[str, Explain] = {
            "not_nullable": message("{column} is required but the cell is empty"),
            "column_in_dataframe": message("required column {value!r} is missing"),
        }

    def add(self, name: str, fn: Callable[[Any], Any], explain: Explain) -> pa.Check:
        """A pandera check named from the registry; ``fn`` gets a Series (or the frame)."""
        self.explain[require(name)] = explain
        return pa.Check(fn, name=name, error=name)

    # -- shared column rules --------------------------------------------------------------
    def user_id(self) -> pa.Column:
        return pa.Column(
            nullable=False,
            required=True,
            checks=[
                self.add(
                    "external_user_id_type",
                    _columns.id_type_ok,
                    lambda c, v: (
                        f"external_user_id must be a string or an integer, got {shown(v)} "
                        f"({type_name(v)}); a float id like 12345.0 is a warehouse bug: "
                        "cast the column to Int64 or to string"
                    ),
                ),
                self.add(
                    "external_user_id_not_blank",
                    _columns.not_blank,
                    message("external_user_id must not be empty or blank"),
                ),
            ],
        )

    def timestamp_checks(self, prefix: str) -> list[pa.Check]:
        assert self.now is not None, "timestamp checks need now"
        lo = self.now - PAST_WINDOW
        hi = self.now + FUTURE_WINDOW
        tz = self.naive_timezone
        normalized = self.timestamps
        unit = normalized.epoch_unit

        def code_is_not(code: TimestampProblem) -> Callable[[pd.Series], pd.Series]:
            def check(s: pd.Series) -> pd.Series:
                return pd.Series(normalized(s).problem != code, index=s.index)

            return check

        # bounds in whole milliseconds (ceil / floor), so nothing is multiplied into overflow
        lo_ms = -(-lo.value // 1_000_000)
        hi_ms = hi.value // 1_000_000

        def in_window(s: pd.Series) -> pd.Series:
            norm = normalized(s)
            inside = (norm.ms >= lo_ms) & (norm.ms <= hi_ms)
            return pd.Series(inside | (norm.problem != TimestampProblem.OK), index=s.index)

        def bad_type(c: str | None, v: Any) -> str:
            if isinstance(v, bool | np.bool_) or not _is_number(v):
                return (
                    f"{c} must be a tz-aware datetime or a timestamp text, got "
                    f"{type(v).__name__} {shown(v)}"
                )
            if unit is None:
                return (
                    f"{c} {shown(v)} is a number: epoch numbers are ambiguous, so pass "
                    f"{option('epoch_unit', 's', 'ms', 'us', 'ns')} to say what it counts"
                )
            return (
                f"{c} {shown(v)} is a float of nanoseconds, which is not exact at today's "
                "dates: give whole numbers"
            )

        def naive_fix() -> str:
            zone = Placeholder("<IANA zone>")
            return f"pass {option('naive_timezone', zone)} if the column is local time"

        return [
            self.add(f"{prefix}_type", code_is_not(TimestampProblem.BAD_TYPE), bad_type),
            self.add(
                f"{prefix}_format",
                code_is_not(TimestampProblem.BAD_FORMAT),
                lambda c, v: (
                    f"{c} {shown(v)} is not a timestamp of a real date that can be read "
                    f"exactly: write it like {EXAMPLE}"
                ),
            ),
            self.add(
                f"{prefix}_zone_name",
                code_is_not(TimestampProblem.ZONE_NAME),
                lambda c, v: (
                    f"{c} {shown(v)} names its zone instead of writing the offset (a name such "
                    "as CST or EST is ambiguous): write the offset, like "
                    f"{EXAMPLE}, or Z for UTC"
                ),
            ),
            self.add(
                f"{prefix}_naive",
                code_is_not(TimestampProblem.NAIVE),
                lambda c, v: f"{c} {shown(v)} has no time zone and none is guessed: {naive_fix()}",
            ),
            self.add(
                f"{prefix}_local_time",
                code_is_not(TimestampProblem.BAD_LOCAL_TIME),
                lambda c, v: (
                    f"{c} {shown(v)} does not exist or is ambiguous in {tz} (a DST change); "
                    "give it an explicit offset"
                ),
            ),
            self.add(
                f"{prefix}_window",
                in_window,
                lambda c, v: (
                    f"{c} {shown(v)} is outside the accepted window "
                    f"[{lo.isoformat()}, {hi.isoformat()}] (now − 30 days .. now + 5 minutes)"
                ),
            ),
        ]

    def object_column(self, name: str, *, hand_over: bool = False) -> pa.Column:
        """``hand_over``: leave JSON texts' sorted members for a wire step that takes them.

        Two checks: ``<name>_json`` (an exact JSON object) and ``repeated_key`` (no object
        names a key twice). The first computes both verdicts of a text column in one pass
        and leaves the second's for it, found by the column's values (pandera gives each
        check a new Series of the same array; an object column's is made afresh, and is
        then checked again)."""
        tz = self.rules
        last: list[tuple[Any, np.ndarray]] = []  # (the column's array, its repeats), once

        def ok(s: pd.Series) -> pd.Series:
            texts = _columns.text_objects(s, name, tz, hand_over=hand_over)
            last.clear()
            if texts is not None:
                last.append((s.array, texts.repeated))
                return pd.Series(texts.ok, index=s.index)
            bad = _columns.struct_problems(s, tz)
            if bad is None:
                return _columns.elementwise(s, lambda v: _problem(v, name) in (None, REPEATED))
            last.append((s.array, np.zeros(len(s), dtype=bool)))  # a struct cannot repeat a field
            out = np.ones(len(s), dtype=bool)
            out[bad] = False
            return pd.Series(out, index=s.index)

        def unique_keys(s: pd.Series) -> pd.Series:
            found = last.pop() if last else None
            if found is not None and found[0] is s.array:
                return pd.Series(~found[1], index=s.index)
            texts = _columns.text_objects(s, name, tz)
            if texts is not None:
                return pd.Series(~texts.repeated, index=s.index)
            if _columns.struct_problems(s, tz) is not None:
                return pd.Series(True, index=s.index)  # a struct cannot repeat a field
            return _columns.elementwise(s, lambda v: _problem(v, name) is not REPEATED)

        def _problem(value: Any, path: str) -> str | None:
            try:
                object_value(value, path, tz)
            except RepeatedKeyError:
                return REPEATED
            except Exception:
                return "invalid"
            return None

        return pa.Column(
            nullable=True,
            required=False,
            checks=[
                self.add(
                    f"{name}_json",
                    ok,
                    lambda c, v: str(problem_of(object_value, v, c or name, tz)),
                ),
                self.add("repeated_key", unique_keys, self.repeated_key_message),
            ],
        )

    def repeated_key_message(self, column: str | None, value: Any) -> str:
        """The message of a cell that names a key twice: JSON text (an object, or a list of
        objects as ``channels`` holds), or an Arrow map."""
        path = column or "value"
        if isinstance(value, str):
            try:
                found = repeat_in(value, orjson.loads(value))
            except orjson.JSONDecodeError:
                found = None
            if found is not None:
                return str(repeated_text_key(path, found.where, found.key))
        if isinstance(value, dict | str):
            return str(problem_of(object_value, value, path, self.rules))
        return str(problem_of(_to_json, value, path, self.rules))  # a list, a stand-in

    def conflicts(self, *kinds: str) -> list[pa.Check]:
        return [self._conflict(kind) for kind in kinds]

    def _conflict(self, kind: str) -> pa.Check:
        tz = self.rules

        def check(df: pd.DataFrame) -> pd.Series:
            return _columns.key_conflicts(df, kind, tz)

        self.owners[f"{kind}_key_conflict"] = kind
        return self.add(
            f"{kind}_key_conflict",
            check,
            message(
                f"a key is set both in the {kind} object and in a {kind}.<key> column; "
                "keep one of them"
            ),
        )

    def flat_column(self, kind: str) -> pa.Column:
        tz = self.rules
        name = f"{kind}_value_json"

        def ok(s: pd.Series) -> pd.Series:
            out = np.ones(len(s), dtype=bool)
            out[_columns.column_problems(s, str(s.name), tz)] = False
            return pd.Series(out, index=s.index)

        def explain(column: str | None, value: Any) -> str:
            probe = pd.Series([value], name=column)
            problems = _columns.scalar_column(probe, str(column), tz)[1]
            return problems.get(0, f"{column}: {shown(value)} cannot be sent exactly")

        def unique_keys(s: pd.Series) -> pd.Series:
            out = np.ones(len(s), dtype=bool)
            out[_columns.column_repeats(s)] = False
            return pd.Series(out, index=s.index)

        return pa.Column(
            nullable=True,
            required=False,
            regex=True,
            checks=[
                self.add(name, ok, explain),
                self.add("repeated_key", unique_keys, self.repeated_key_message),
            ],
        )


def _to_json(value: Any, path: str, rules: ValueRules) -> Any:
    return to_json(value, path, rules)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating | str)


class UnknownColumn:
    """The message for an unknown column; a near miss of a known name gets "did you mean"
    (case, spaces and punctuation aside, or a name other tools use for it), unless the
    table has that column already (``among``)."""

    def __init__(self, prefix: str, known: Iterable[str], present: Iterable[str] = ()) -> None:
        self.prefix = prefix
        self.known = [k for k in known if not k.startswith("^")]
        self.present = set(present)

    def among(self, present: Iterable[Any]) -> UnknownColumn:
        """The same, for a table with the columns ``present``."""
        return UnknownColumn(self.prefix, self.known, map(str, present))

    def __call__(self, column: str | None, value: Any) -> str:
        name = str(value)
        hint = header_hint(name)
        if hint is not None:
            return f"unknown column {name!r}: {hint}"
        matches = [m for m in near_misses(name, self.known) if m not in self.present]
        if not matches:
            nested = f"{self.prefix}.{name}"
            return (
                f"unknown column {name!r}: drop it, or send it as {nested!r} "
                f"({option('rename', {name: nested})}), or pass {option('extra_columns', 'ignore')}"
            )
        text = (
            f"unknown column {name!r}: did you mean "
            f"{alternatives([repr(m) for m in matches])}? Rename it: "
            f"{option('rename', {name: matches[0]})}"
        )
        for style in NAME_STYLES:
            if styler(style)(name) == matches[0]:
                return text + f" (or {option('rename_style', style)} for every column)"
        return text


def unknown_column(prefix: str, known: Iterable[str]) -> Explain:
    """The explanation of ``column_in_schema`` (see ``UnknownColumn``)."""
    return UnknownColumn(prefix, known)


def frame_owners(schema: pa.DataFrameSchema) -> dict[str, str]:
    """Frame-level check name -> the column its failures are reported under."""
    found: dict[str, str] = (schema.metadata or {}).get(OWNERS_KEY, {})
    return found


def timestamp_cache(schema: pa.DataFrameSchema) -> NormalizeCache | None:
    """The cache the schema's timestamp checks share (the wire reads the same result)."""
    found: NormalizeCache | None = (schema.metadata or {}).get(TIMESTAMPS_KEY)
    return found


def explanations(schema: pa.DataFrameSchema) -> dict[str, Explain]:
    """The message builders of a schema made by this module, by check name."""
    found: dict[str, Explain] = (schema.metadata or {}).get(EXPLAIN_KEY, {})
    return found
