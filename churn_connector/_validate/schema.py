"""Building blocks shared by the events and identities schemas (pandera).

Each wing's ``schema.py`` assembles its table schema from these: named, vectorised checks
whose names come from the registry in ``_checks`` and whose explanations turn a failing
cell into a message with its fix. Nothing is coerced: ``coerce`` stays off so that each
bad cell is a row-level failure case.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .._core import (
    FUTURE_WINDOW,
    PAST_WINDOW,
    AsShown,
    EpochUnit,
    Placeholder,
    alternatives,
    option,
    shown,
    type_name,
)
from .._json import (
    EXAMPLE,
    NormalizeCache,
    RepeatedKeyError,
    TextParses,
    TimestampProblem,
    ValueRules,
    is_missing,
    object_value,
    problem_of,
    repeat_in,
    repeated_text_key,
    to_json,
)
from .._read import NAME_STYLES, header_hint, near_misses, styler
from . import columns as _columns
from .checks import require
from .pandera import pa

Explain = Callable[[str | None, Any], str]
EXPLAIN_KEY = "churn_connector.explain"
TIMESTAMPS_KEY = "churn_connector.timestamps"
OWNERS_KEY = "churn_connector.frame_check_columns"
PARSES_KEY = "churn_connector.text_parses"


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
        self.parses = TextParses()  # what the JSON-text checks parse, for the wire step
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
        """``hand_over``: leave JSON texts' sorted members in ``parses`` while a run of the
        schema collects them (``run_schema`` returns them, for the wire step).

        Two checks: ``<name>_json`` (an exact JSON object) and ``repeated_key`` (no object
        names a key twice). The first computes both verdicts in one pass and leaves the
        second's for it: pandera runs a column's checks one after the other in one thread,
        each on a new Series of the column (a copy without its nulls when it has some), so
        the verdicts are left per thread and taken by the Series of the same name and rows."""
        tz, parses = self.rules, self.parses
        left = threading.local()  # .last: (the Series, its repeats), the first check's

        def ok(s: pd.Series) -> pd.Series:
            left.last = None
            texts = _columns.text_objects(s, name, tz, hand_over=hand_over and parses.wanted)
            if texts is not None:
                if texts.members is not None and texts.texts is not None:
                    parses.keep(name, texts.texts, texts.members)
                good, repeated = texts.ok, texts.repeated
            else:
                bad = _columns.struct_problems(s, tz)
                if bad is None:
                    good, repeated = _verdicts(s)
                else:
                    good = np.ones(len(s), dtype=bool)
                    good[bad] = False
                    repeated = np.zeros(len(s), dtype=bool)  # a struct cannot repeat a field
            left.last = (s, repeated)
            return pd.Series(good, index=s.index)

        def unique_keys(s: pd.Series) -> pd.Series:
            found: tuple[pd.Series, np.ndarray] | None = getattr(left, "last", None)
            left.last = None
            if found is None or not _same_rows(found[0], s):
                ok(s)  # not this column's verdicts (never so under pandera): made afresh
                found = left.last
                left.last = None
            assert found is not None
            return pd.Series(~found[1], index=s.index)

        def _verdicts(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
            good = np.ones(len(s), dtype=bool)
            repeated = np.zeros(len(s), dtype=bool)
            values = (
                _columns.values_of(s)
                if isinstance(s.dtype, pd.ArrowDtype)
                else s.to_numpy(dtype=object)
            )
            for i, v in enumerate(values):
                if not is_missing(v):
                    try:
                        object_value(v, name, tz)
                    except RepeatedKeyError:
                        repeated[i] = True
                    except Exception:  # any failure is this cell's, never the table's
                        good[i] = False
            return good, repeated

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

        def exact_floats(s: pd.Series) -> pd.Series:
            out = np.ones(len(s), dtype=bool)
            out[_columns.floats_beyond_exact(s)] = False
            return pd.Series(out, index=s.index)

        def beyond(column: str | None, value: Any) -> str:
            return (
                f"{column} holds {value!r} in a float column: beyond ±2^53 a float no longer "
                "holds every integer, so an int64 column a reader turned into float64 (pandas "
                "does when it has nulls) has changed numbers here, and the event's id with "
                'them; read the file with dtype_backend="pyarrow" (or with pyarrow, or the '
                "command line), which keeps integers"
            )

        return pa.Column(
            nullable=True,
            required=False,
            regex=True,
            checks=[
                self.add(name, ok, explain),
                self.add("repeated_key", unique_keys, self.repeated_key_message),
                self.add("float_beyond_2_53", exact_floats, beyond),
            ],
        )


def _same_rows(a: pd.Series, b: pd.Series) -> bool:
    """The same column's rows: its name, and the row labels in order."""
    return a.name == b.name and len(a) == len(b) and a.index.equals(b.index)


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
        self.header = tuple(present)  # in the table's order, for the messages' examples
        self.present = set(self.header)

    def among(self, present: Iterable[Any]) -> UnknownColumn:
        """The same, for a table with the columns ``present``."""
        return UnknownColumn(self.prefix, self.known, map(str, present))

    def __call__(self, column: str | None, value: Any) -> str:
        name = str(value)
        hint = header_hint(name, self.header, self.known)
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


def text_parses(schema: pa.DataFrameSchema) -> TextParses | None:
    """Where the schema's JSON-text checks leave their parses (None: they leave none)."""
    found: TextParses | None = (schema.metadata or {}).get(PARSES_KEY)
    return found


def timestamp_cache(schema: pa.DataFrameSchema) -> NormalizeCache | None:
    """The cache the schema's timestamp checks share (the wire reads the same result)."""
    found: NormalizeCache | None = (schema.metadata or {}).get(TIMESTAMPS_KEY)
    return found


def explanations(schema: pa.DataFrameSchema) -> dict[str, Explain]:
    """The message builders of a schema made by this module, by check name."""
    found: dict[str, Explain] = (schema.metadata or {}).get(EXPLAIN_KEY, {})
    return found
