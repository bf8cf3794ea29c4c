"""One event checked without a DataFrame: the one-event checks, before the events engine's
fast path for one event makes it wire (``_wire.one_event``).

For the values of one event this gives the verdict and the check names that the batch path
(the pandera schema of ``_events.schema``) gives a one-row table of the same values, and the
wire bytes (message id included) its per-row path writes, by the same writer;
``tests/track/test_scalar.py`` holds the two equal over generated rows, invalid ones
included.

The common spellings are checked here in plain Python, in a few microseconds: a string id, a
snake_case event type, an aware ``datetime`` or an RFC 3339 text with its offset, dicts of
plain values. Anything rarer (a naive time in a named zone, white space Python and Arrow may
trim differently, numpy scalars, ...) goes to the batch path's own vectorised function on a
one-element Series, so it agrees by construction, only slower.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .._core import FUTURE_WINDOW, PAST_WINDOW, DataValidationError, IdFormat
from .._events import EVENT_TYPE_PATTERN, build_schema
from .._json import (
    RepeatedKeyError,
    TimestampProblem,
    is_missing,
    normalize_timestamps,
    object_value,
)
from .._options import EventOptions, utc_now
from .._validate import (
    PlanSource,
    TrackingPlan,
    as_plan,
    explanations,
    fullmatch,
    id_type_ok,
    ids_to_wire,
    not_blank,
    plan_failures,
    strings_ok,
)
from .._wire import Event, make_event

log = logging.getLogger("churn_connector")

__all__ = ["PlanSource", "Window", "event_of", "options_for", "planned", "problems"]

_EVENT_TYPE = re.compile(EVENT_TYPE_PATTERN)
# the text grammar of ``_json.timestamp_text`` where a zone is written (RFC 3339 and its
# relatives): the common case, read here; everything else goes to the vectorised parser
_ZONED = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?"
    r"(?:[.,]([0-9]{1,9}))? ?"
    r"(?:[Zz]|UTC|([+-])([0-9]{2})(?::([0-9]{2})(?::([0-9]{2}))?|([0-9]{2}))?)"
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)
_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_CODES = {
    TimestampProblem.BAD_TYPE: "occurred_at_type",
    TimestampProblem.BAD_FORMAT: "occurred_at_format",
    TimestampProblem.ZONE_NAME: "occurred_at_zone_name",
    TimestampProblem.NAIVE: "occurred_at_naive",
    TimestampProblem.BAD_LOCAL_TIME: "occurred_at_local_time",
    TimestampProblem.NULL: "not_nullable",
}
_PAST_MS = int(PAST_WINDOW / _MS)
_FUTURE_MS = int(FUTURE_WINDOW / _MS)


@dataclass(frozen=True)
class Window:
    """The accepted occurred_at range in epoch ms (``now - 30 days .. now + 5 minutes``),
    and ``now`` itself (the default occurred_at)."""

    now_ms: int
    lo_ms: int
    hi_ms: int
    now: pd.Timestamp | None = None  # the caller's, when given (for messages)

    @classmethod
    def at(cls, now: Any = None) -> Window:
        """The window of ``now`` (default: the clock), in the batch path's whole ms."""
        if now is None:
            ns = time.time_ns()
            stamp = None
        else:
            stamp = utc_now(now)
            ns = stamp.value
        # bounds as the schema rounds them (ceil / floor to whole ms)
        lo = -(-(ns - _PAST_MS * 1_000_000) // 1_000_000)
        hi = (ns + _FUTURE_MS * 1_000_000) // 1_000_000
        return cls(ns // 1_000_000, lo, hi, stamp)


@functools.lru_cache(maxsize=64)
def options_for(
    naive_timezone: str | None, namespace: str | None, id_format: IdFormat
) -> EventOptions:
    """The batch path's options for these keywords, checked once (cached)."""
    return EventOptions(naive_timezone=naive_timezone, namespace=namespace, id_format=id_format)


def _one(value: Any) -> pd.Series:
    """The column a one-row table of ``value`` has (what the batch path would check)."""
    return pd.Series([value])


def _passes(check: Callable[[pd.Series], pd.Series], column: pd.Series) -> bool:
    """Whether the one cell passes a schema check; a check that raises fails (as pandera
    counts it)."""
    try:
        return bool(check(column).iloc[0])
    except Exception:
        return False


def _plain_text(value: Any) -> bool:
    """An ASCII string that neither Python nor Arrow could read as blank."""
    return (
        type(value) is str
        and value.isascii()
        and value != ""
        and not value[0].isspace()
        and not value[-1].isspace()
    )


def _user(value: Any, found: list[str]) -> str | None:
    if is_missing(value):
        found.append("not_nullable")
        return None
    if _plain_text(value):
        return str(value)
    if type(value) is int:
        return str(value)
    column = _one(value)
    before = len(found)
    if not _passes(id_type_ok, column):
        found.append("external_user_id_type")
    if not _passes(not_blank, column):
        found.append("external_user_id_not_blank")
    return ids_to_wire(column)[0] if len(found) == before else None


def _event_type(value: Any, found: list[str]) -> str | None:
    if is_missing(value):
        found.append("not_nullable")
        return None
    if type(value) is str and value.isascii():
        if _EVENT_TYPE.fullmatch(value) is None:
            found.append("event_type_pattern")
            return None
        return value
    column = _one(value)
    before = len(found)
    if not _passes(strings_ok, column):
        found.append("event_type_type")
    if not _passes(_event_type_pattern, column):
        found.append("event_type_pattern")
    return str(value) if len(found) == before else None


def _event_type_pattern(column: pd.Series) -> pd.Series:
    return fullmatch(column, EVENT_TYPE_PATTERN)


def _zoned_ms(match: re.Match[str]) -> int | None:
    """Epoch ms of a zoned text the grammar matched; None when its fields are not real."""
    year, month, day, hour, minute, second, frac, sign, oh, om, osec, om_short = match.groups()
    y, m, d = int(year), int(month), int(day)
    leap = (y % 4 == 0 and y % 100 != 0) or y % 400 == 0
    if not (y >= 1 and 1 <= m <= 12) or not 1 <= d <= _DAYS[m] + (m == 2 and leap):
        return None
    h, mi, s = int(hour), int(minute), int(second or 0)
    off_h, off_m, off_s = int(oh or 0), int(om or om_short or 0), int(osec or 0)
    if h > 23 or mi > 59 or s > 59 or off_h > 23 or off_m > 59 or off_s > 59:
        return None
    days = dt.date(y, m, d).toordinal() - 719_163  # days since 1970-01-01
    ms = (((days * 24 + h) * 60 + mi) * 60 + s) * 1_000
    if frac:
        ms += int(frac.ljust(9, "0")) // 1_000_000
    if sign is not None:
        offset = (off_h * 3_600 + off_m * 60 + off_s) * 1_000
        ms -= offset if sign == "+" else -offset
    return ms


def _occurred_ms(value: Any, naive_timezone: str | None, found: list[str]) -> int | None:
    if is_missing(value):
        found.append("not_nullable")
        return None
    if type(value) is str and value.isascii():
        match = _ZONED.fullmatch(value)
        ms = _zoned_ms(match) if match is not None else None
        if ms is not None:
            return ms
    elif type(value) is dt.datetime:
        if value.tzinfo is not None and value.utcoffset() is not None:
            return (value - _EPOCH) // _MS
        if naive_timezone is None:
            found.append("occurred_at_naive")
            return None
    elif type(value) is pd.Timestamp and value.tzinfo is not None:
        try:
            return int(value.value) // 1_000_000
        except OverflowError:
            pass
    norm = normalize_timestamps(_one(value), naive_timezone)
    code = TimestampProblem(int(norm.problem[0]))
    if code != TimestampProblem.OK:
        found.append(_CODES[code])
        return None
    return int(norm.ms[0])


def _object(value: Any, kind: str, options: EventOptions, found: list[str]) -> dict[str, Any]:
    try:
        return object_value(value, kind, options.rules)
    except RepeatedKeyError:
        found.append("repeated_key")  # the schema's own check for a key named twice
        return {}
    except Exception:
        # as the schema's check: any failure is this cell's problem, never the call's
        found.append(f"{kind}_json")
        return {}


def _given_id(value: Any, found: list[str]) -> str | None:
    if _plain_text(value):
        return str(value)
    if is_missing(value):
        found.append("not_nullable")
        return None
    column = _one(value)
    before = len(found)
    if not _passes(strings_ok, column):
        found.append("message_id_type")
    if not _passes(not_blank, column):
        found.append("message_id_not_blank")
    return str(value) if len(found) == before else None


def problems(
    external_user_id: Any,
    event_type: Any,
    occurred_at: Any,
    properties: Any,
    context: Any,
    message_id: Any,
    *,
    options: EventOptions,
    window: Window,
    given_id: bool,
) -> tuple[list[str], Event | None]:
    """The names of the checks one event fails (the schema's names), and the event when it
    fails none. ``given_id``: a ``message_id`` was passed (None is then a missing value)."""
    found: list[str] = []
    user = _user(external_user_id, found)
    kind = _event_type(event_type, found)
    ms = _occurred_ms(occurred_at, options.naive_timezone, found)
    if ms is not None and not window.lo_ms <= ms <= window.hi_ms:
        found.append("occurred_at_window")
    props = _object(properties, "properties", options, found)
    before = len(found)
    ctx = _object(context, "context", options, found)
    if len(found) == before and "$message_id" in ctx:
        found.append("context_reserved_key")
    given = _given_id(message_id, found) if given_id else None
    if found:
        return found, None
    assert user is not None
    assert kind is not None
    assert ms is not None
    return found, make_event(user, kind, ms, props, ctx, given, options)


def event_of(
    external_user_id: Any,
    event_type: Any,
    *,
    occurred_at: Any = None,
    properties: Mapping[str, Any] | str | None = None,
    context: Mapping[str, Any] | str | None = None,
    message_id: str | None = None,
    now: Any = None,
    naive_timezone: str | None = None,
    namespace: str | None = None,
    id_format: IdFormat = "v2",
    plan: TrackingPlan | None = None,
) -> Event:
    """One valid event, or DataValidationError naming every check it fails (and why).

    ``occurred_at`` defaults to ``now`` (default: the clock). An event given neither
    ``occurred_at`` nor ``message_id`` gets a random message id: its content and a
    millisecond clock do not tell two taps apart, and a hashed id would make the second
    of two identical calls in one millisecond a duplicate the API drops. With a tracking
    ``plan`` (loaded: see :func:`planned`), an event that meets the contract is checked
    against it too, as a batch row is.
    """
    options = _options(naive_timezone, namespace, id_format)
    window = Window.at(now)
    if occurred_at is None:
        occurred_at = window.now if window.now is not None else _EPOCH + window.now_ms * _MS
        if message_id is None:
            message_id = str(uuid.uuid4())
    found, event = problems(
        external_user_id,
        event_type,
        occurred_at,
        properties,
        context,
        message_id,
        options=options,
        window=window,
        given_id=message_id is not None,
    )
    if event is None:
        values = {
            "external_user_id": external_user_id,
            "event_type": event_type,
            "occurred_at": occurred_at,
            "properties": properties,
            "context": context,
            "message_id": message_id,
        }
        raise _invalid(found, options, window, values)
    if plan is not None:
        _check_plan(event, plan, options)
    return event


def planned(plan: PlanSource | None) -> TrackingPlan | None:
    """A one-off event's ``plan=`` loaded, once: a path is read here, so a service that
    tracks many events loads its plan once (``client.tracker(plan=...)``, or a
    ``TrackingPlan`` it keeps) rather than at every call."""
    return as_plan(plan)


def _check_plan(event: Event, plan: TrackingPlan, options: EventOptions) -> None:
    """The event's wire values (what would be sent) checked against ``plan``: the batch
    path's own check on a one-row table, so its verdict, check names and messages are a
    batch row's."""
    sent = orjson.loads(event.body)
    frame = pd.DataFrame(
        {"event_type": [sent["event_type"]], "properties": [sent.get("properties") or {}]}
    )
    found = plan_failures(
        plan, "events", frame, np.zeros(1, np.int64), options.rules, 0, pd.RangeIndex(1)
    )
    if found.unknown:
        log.warning(
            "track: event type %r is not in the tracking plan (unknown_events warn): sent "
            "unchecked",
            sent["event_type"],
        )
    if found.records:
        checks = tuple(r["check"] for r in found.records)
        reasons = "; ".join(f"{r['check']}: {r['message']}" for r in found.records)
        raise DataValidationError(
            "the event breaks the tracking plan and was not sent: " + reasons,
            n_invalid=1,
            n_rows=1,
            checks=checks,
        )


def _options(
    naive_timezone: str | None, namespace: str | None, id_format: IdFormat
) -> EventOptions:
    try:
        return options_for(naive_timezone, namespace, id_format)
    except TypeError:  # an unhashable namespace: checked (and refused) uncached
        return EventOptions(naive_timezone=naive_timezone, namespace=namespace, id_format=id_format)


def _invalid(
    found: list[str], options: EventOptions, window: Window, values: dict[str, Any]
) -> DataValidationError:
    """The error of an invalid event: each failed check with the batch path's message."""
    explain = _explanations(options, window)
    nulls = [c for c, v in values.items() if is_missing(v) and c != "message_id"]
    # found in order: properties' repeat before context's
    repeats = [c for c in ("properties", "context") if _repeats(values[c], c, options)]
    reasons = []
    for check in found:
        if check == "not_nullable":
            column = nulls.pop(0) if nulls else "message_id"
        elif check == "repeated_key":
            column = repeats.pop(0) if repeats else "properties"
        elif check == "context_reserved_key":
            column = "context"
        else:
            column = next(c for c in values if check.startswith(c))
        try:
            text = explain[check](column, values[column])
        except Exception:  # a message must never hide the verdict
            text = check
        reasons.append(f"{check}: {text}")
    return DataValidationError(
        "the event is invalid and was not sent: " + "; ".join(reasons),
        n_invalid=1,
        n_rows=1,
        checks=tuple(found),
    )


def _repeats(value: Any, kind: str, options: EventOptions) -> bool:
    try:
        object_value(value, kind, options.rules)
    except RepeatedKeyError:
        return True
    except Exception:
        return False
    return False


def _explanations(options: EventOptions, window: Window) -> dict[str, Any]:
    """The schema's message builders (building the schema loads pandera: invalid events
    only ever pay for it)."""
    now = window.now if window.now is not None else pd.Timestamp(window.now_ms, unit="ms", tz="UTC")
    with_now = EventOptions(
        naive_timezone=options.naive_timezone,
        namespace=options.namespace,
        id_format=options.id_format,
        now=now,
    )
    return explanations(build_schema(with_now))
