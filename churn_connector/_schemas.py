"""pandera schemas for raw event and identity tables, usable on their own.

The schemas accept every representation PRODUCT.md allows (string or integer ids, tz-aware
datetimes or offset strings, dicts or JSON strings, flattened ``properties.<key>`` columns)
and check every rule of the contract with named, vectorised checks. Nothing is coerced:
``coerce`` stays off so that each bad cell is a row-level failure case.

    schema = cc.events_schema(now=pd.Timestamp.now(tz="UTC"))
    schema.validate(df, lazy=True)   # raises pandera's SchemaErrors listing every bad cell

``cc.validate_events`` runs the same schema and turns pandera's failure cases into a
``ValidationReport`` with a message and a fix for each.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

import pandas as pd
import pandera.pandas as pa

from . import _columns, _timestamps
from ._exceptions import ConfigurationError
from ._values import object_value, problem_of

EVENT_TYPE_PATTERN = r"[a-z0-9]+(?:_[a-z0-9]+)*"
E164_PATTERN = r"\+[1-9][0-9]{1,14}"
EMAIL_PATTERN = r"[^@\s]+@[^@\s]+\.[^@\s]+"
CHANNELS = ("email", "sms", "push")
FLAGS = tuple(f"{c}_{f}" for c in CHANNELS for f in ("opted_in", "verified"))
PAST_WINDOW = timedelta(days=30)
FUTURE_WINDOW = timedelta(minutes=5)
ExtraColumns = Literal["error", "ignore"]
Duplicates = Literal["error", "keep_last", "in_order"]
Explain = Callable[[str | None, Any], str]
EXPLAIN_KEY = "churn_connector.explain"
OWNERS_KEY = "churn_connector.frame_check_columns"

_FLAT_PROPERTIES = r"^properties\..+$"
_FLAT_CONTEXT = r"^context\..+$"


def _msg(text: str) -> Explain:
    return lambda column, value: text.format(column=column, value=value)


def _utc_now(now: Any) -> pd.Timestamp:
    ts = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    if ts.tzinfo is None:
        raise ValueError("now must be timezone-aware (it is compared with UTC instants)")
    return ts.tz_convert("UTC")


class _Checks:
    """Builds named checks and their explanations for one set of options."""

    def __init__(self, now: pd.Timestamp, naive_timezone: str | None) -> None:
        self.now = now
        self.naive_timezone = naive_timezone
        self.owners: dict[str, str] = {}
        self.explain: dict[str, Explain] = {
            "not_nullable": _msg("{column} is required but the cell is empty"),
            "column_in_dataframe": _msg("required column {value!r} is missing"),
        }

    def add(self, name: str, fn: Callable[[Any], pd.Series], explain: Explain) -> pa.Check:
        self.explain[name] = explain
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
                        f"external_user_id must be a string or an integer, got {v!r} "
                        f"({type(v).__name__}); a float id like 12345.0 is a warehouse bug: "
                        "cast the column to Int64 or to string"
                    ),
                ),
                self.add(
                    "external_user_id_not_blank",
                    _columns.not_blank,
                    _msg("external_user_id must not be empty or blank"),
                ),
            ],
        )

    def timestamp_checks(self, prefix: str) -> list[pa.Check]:
        lo = self.now - PAST_WINDOW
        hi = self.now + FUTURE_WINDOW
        tz = self.naive_timezone

        def code_is_not(code: int) -> Callable[[pd.Series], pd.Series]:
            def check(s: pd.Series) -> pd.Series:
                return pd.Series(_timestamps.normalize(s, tz).problem != code, index=s.index)

            return check

        # bounds in whole milliseconds (ceil / floor), so nothing is multiplied into overflow
        lo_ms = -(-lo.value // 1_000_000)
        hi_ms = hi.value // 1_000_000

        def in_window(s: pd.Series) -> pd.Series:
            norm = _timestamps.normalize(s, tz)
            inside = (norm.ms >= lo_ms) & (norm.ms <= hi_ms)
            return pd.Series(inside | (norm.problem != _timestamps.OK), index=s.index)

        naive_fix = "pass naive_timezone='<IANA zone>' if the column is local time"
        return [
            self.add(
                f"{prefix}_type",
                code_is_not(_timestamps.BAD_TYPE),
                lambda c, v: (
                    f"{c} must be a tz-aware datetime or an RFC 3339 string, got "
                    f"{type(v).__name__} {v!r}; epoch numbers are ambiguous: convert them "
                    "with pd.to_datetime(..., unit=..., utc=True)"
                ),
            ),
            self.add(
                f"{prefix}_format",
                code_is_not(_timestamps.BAD_FORMAT),
                _msg(
                    "{column} {value!r} is not an RFC 3339 timestamp "
                    "(e.g. 2026-11-20T09:30:00.123+01:00) or not a real date"
                ),
            ),
            self.add(
                f"{prefix}_naive",
                code_is_not(_timestamps.NAIVE),
                lambda c, v: f"{c} {v!r} has no time zone and none is guessed: {naive_fix}",
            ),
            self.add(
                f"{prefix}_local_time",
                code_is_not(_timestamps.BAD_LOCAL_TIME),
                lambda c, v: (
                    f"{c} {v!r} does not exist or is ambiguous in {tz} (a DST change); "
                    "give it an explicit offset"
                ),
            ),
            self.add(
                f"{prefix}_window",
                in_window,
                lambda c, v: (
                    f"{c} {v!r} is outside the accepted window "
                    f"[{lo.isoformat()}, {hi.isoformat()}] (now − 30 days .. now + 5 minutes)"
                ),
            ),
        ]

    def object_column(self, name: str) -> pa.Column:
        tz = self.naive_timezone

        def ok(s: pd.Series) -> pd.Series:
            return _columns.elementwise(s, lambda v: problem_of(object_value, v, name, tz) is None)

        return pa.Column(
            nullable=True,
            required=False,
            checks=[
                self.add(
                    f"{name}_json",
                    ok,
                    lambda c, v: str(problem_of(object_value, v, c or name, tz)),
                )
            ],
        )

    def conflicts(self, *kinds: str) -> list[pa.Check]:
        return [self._conflict(kind) for kind in kinds]

    def _conflict(self, kind: str) -> pa.Check:
        tz = self.naive_timezone

        def check(df: pd.DataFrame) -> pd.Series:
            return _columns.key_conflicts(df, kind, tz)

        self.owners[f"{kind}_key_conflict"] = kind
        return self.add(
            f"{kind}_key_conflict",
            check,
            _msg(
                f"a key is set both in the {kind} object and in a {kind}.<key> column; "
                "keep one of them"
            ),
        )

    def flat_column(self, kind: str) -> pa.Column:
        tz = self.naive_timezone
        name = f"{kind}_value_json"

        def ok(s: pd.Series) -> pd.Series:
            _, problems = _columns.scalar_column(s, str(s.name), tz)
            out = pd.Series(True, index=s.index)
            if problems:
                out.iloc[list(problems)] = False
            return out

        def explain(column: str | None, value: Any) -> str:
            probe = pd.Series([value], name=column)
            problems = _columns.scalar_column(probe, str(column), tz)[1]
            return problems.get(0, f"{column}: {value!r} cannot be sent exactly")

        return pa.Column(
            nullable=True, required=False, regex=True, checks=[self.add(name, ok, explain)]
        )


def events_schema(
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
) -> pa.DataFrameSchema:
    """The pandera schema of a raw events table (see PRODUCT.md's events table).

    ``now`` anchors the accepted time window (default: the current UTC time).
    ``extra_columns="ignore"`` lets unknown columns through (they are never sent).
    """
    check_timezone(naive_timezone)
    checks = _Checks(_utc_now(now), naive_timezone)
    message_id_checks = [
        checks.add(
            "message_id_type",
            _columns.strings_ok,
            _msg("message_id must be a string, got {value!r}"),
        ),
        checks.add(
            "message_id_not_blank",
            _columns.not_blank,
            _msg("message_id must not be empty: fill it, or drop the column to use hashed ids"),
        ),
    ]
    reserved_context = checks.add(
        "context_reserved_key",
        lambda s: _columns.elementwise(
            s, lambda v: "$message_id" not in _object_or_empty(v, naive_timezone)
        ),
        _msg("context must not carry '$message_id': put it in a message_id column instead"),
    )
    context = checks.object_column("context")
    context.checks.append(reserved_context)
    columns: dict[str, pa.Column] = {
        "external_user_id": checks.user_id(),
        "event_type": pa.Column(
            nullable=False,
            checks=[
                checks.add(
                    "event_type_type",
                    _columns.strings_ok,
                    _msg("event_type must be a string, got {value!r}"),
                ),
                checks.add(
                    "event_type_pattern",
                    lambda s: _columns.fullmatch(s, EVENT_TYPE_PATTERN),
                    lambda c, v: (
                        f"event_type {v!r} must be lowercase snake_case matching "
                        f"^{EVENT_TYPE_PATTERN}$ (whole value; no spaces, capitals or newlines)"
                    ),
                ),
            ],
        ),
        "occurred_at": pa.Column(nullable=False, checks=checks.timestamp_checks("occurred_at")),
        "properties": checks.object_column("properties"),
        "context": context,
        "message_id": pa.Column(nullable=False, required=False, checks=message_id_checks),
        _FLAT_PROPERTIES: checks.flat_column("property"),
        _FLAT_CONTEXT: checks.flat_column("context"),
    }
    flat_reserved = r"^context\.\$message_id$"
    checks.owners["context_reserved_column"] = "context.$message_id"
    checks.explain["column_in_schema"] = _unknown_column("properties")
    return pa.DataFrameSchema(
        columns,
        strict=extra_columns == "error",
        checks=[
            *checks.conflicts("properties", "context"),
            checks.add(
                "context_reserved_column",
                lambda df: pd.Series(
                    not df.columns.str.fullmatch(flat_reserved).any(), index=df.index
                ),
                _msg("column 'context.$message_id' is reserved: name it message_id instead"),
            ),
        ],
        name="events",
        metadata={EXPLAIN_KEY: checks.explain, OWNERS_KEY: checks.owners},
    )


def _object_or_empty(value: Any, naive_timezone: str | None) -> dict[str, Any]:
    """The object a cell holds (dict or JSON string); {} when it holds none."""
    try:
        return object_value(value, "context", naive_timezone)
    except ValueError:
        return {}


def check_timezone(naive_timezone: str | None) -> None:
    """Refuse an unknown zone name up front (it would otherwise fail every row)."""
    if naive_timezone is None:
        return
    try:
        zoneinfo.ZoneInfo(naive_timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(
            f"naive_timezone {naive_timezone!r} is not a known IANA zone (e.g. 'Europe/Paris')"
        ) from None


def _unknown_column(prefix: str) -> Explain:
    return lambda column, value: (
        f"unknown column {value!r}: drop it, or rename it to '{prefix}.{value}' to send it "
        f"(or pass extra_columns='ignore')"
    )


def frame_owners(schema: pa.DataFrameSchema) -> dict[str, str]:
    """Frame-level check name -> the column its failures are reported under."""
    found: dict[str, str] = (schema.metadata or {}).get(OWNERS_KEY, {})
    return found


def explanations(schema: pa.DataFrameSchema) -> dict[str, Explain]:
    """The message builders of a schema made by this module, by check name."""
    found: dict[str, Explain] = (schema.metadata or {}).get(EXPLAIN_KEY, {})
    return found
