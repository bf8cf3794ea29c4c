"""Request validation, written from the API contract (sections 2, 4, 7 and 8).

Deliberately independent of the client's validation code: the sandbox exists to catch the
client's mistakes, so it must not share them. Every check reports *all* problems it finds,
each as an :class:`Issue` with a dotted field path (``events[3].occurred_at``,
``channels[0].type``), so one response names every bad event and field.

Speed without a second set of rules: a batch is first put to :func:`all_events_valid`, a
proof of validity made of whole-batch C-level operations (key sets compared, types
collected, each distinct event type and date checked once, the window checked on the
smallest and largest time). It only ever says "all valid"; anything else runs the
per-event checks, which alone write the problems. Bodies likewise: orjson parses them, and a
body is taken as parsed only when orjson writes it back to the very same bytes (which no
body with a duplicate key, an escape orjson would not write, or a number it would spell
otherwise can do); every other body goes through the strict standard-library parser.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final, NamedTuple

import orjson

MAX_BATCH: Final = 500
PAST_TOLERANCE: Final = timedelta(days=30)
FUTURE_TOLERANCE: Final = timedelta(minutes=5)
CHANNELS: Final = ("email", "sms", "push")

# Explicit [0-9] rather than \d: \d also matches non-ASCII digits such as "٣".
_EVENT_TYPE: Final = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_OCCURRED_AT: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z"
)
# the same format with the clock's ranges spelled out: a time it accepts is one datetime()
# accepts too, once its date is a real one (checked per distinct date)
_OCCURRED_AT_STRICT: Final = re.compile(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z"
)
_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_E164: Final = re.compile(r"\+[1-9][0-9]{1,14}")

_EVENT_FIELDS: Final = ("external_user_id", "event_type", "occurred_at", "properties", "context")
_EVENT_KEYS: Final = frozenset(_EVENT_FIELDS)
_IDENTIFY_FIELDS: Final = ("external_user_id", "traits", "preferred_channel", "channels")
_ITEM_FIELDS: Final = ("channel", "address", "opted_in", "verified")

# Hints for the unknown fields clients most plausibly send by mistake.
_EVENT_HINTS: Final = {
    "message_id": "the idempotency key belongs in context.$message_id",
    "$message_id": "the idempotency key belongs in context.$message_id",
    "timestamp": "the event time field is occurred_at",
}
_IDENTIFY_HINTS: Final = {
    "email": "a client convenience input, not a wire field: send a channels item",
    "phone": "a client convenience input, not a wire field: send a channels item",
    "pushToken": "a client convenience input, not a wire field: send a channels item",
    "push_token": "a client convenience input, not a wire field: send a channels item",
}
_ITEM_HINTS: Final = {"type": "the field is named channel, not type"}


@dataclass(frozen=True)
class Issue:
    """One problem with a request body."""

    code: str
    field: str | None
    message: str
    index: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``details`` entry of an error body."""
        return {
            "index": self.index,
            "field": self.field,
            "message": self.message,
            "code": self.code,
        }


class InvalidJSON(ValueError):
    """The body is not strict UTF-8 JSON."""


# --------------------------------------------------------------------------- content type, JSON


def is_json_content_type(value: str | None) -> bool:
    """``application/json``, optionally with parameters; a charset must be UTF-8."""
    if value is None:
        return False
    media_type, *params = (part.strip() for part in value.split(";"))
    if media_type.lower() != "application/json":
        return False
    for param in params:
        name, _, raw = param.partition("=")
        if name.strip().lower() == "charset" and raw.strip().strip('"').lower() not in {
            "utf-8",
            "utf8",
        }:
            return False
    return True


def _reject_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not valid JSON")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidJSON(f"duplicate object key {key!r}")
        obj[key] = value
    return obj


class Parsed(NamedTuple):
    """A parsed body; ``exact``: orjson writes ``value`` back to the body's very bytes."""

    value: Any
    exact: bool


def parse_json(body: bytes) -> Parsed:
    """Parse a body strictly: UTF-8, no NaN/Infinity, no duplicate keys, no lone surrogates.

    The fast way first (see the module docstring); the strict parser decides the rest.
    """
    try:
        value = orjson.loads(body)
        exact = orjson.dumps(value) == body
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        exact = False
    if exact:
        return Parsed(value, True)
    return Parsed(_parse_strict(body), False)


def _parse_strict(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJSON(f"body is not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise InvalidJSON(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InvalidJSON("JSON nested too deeply") from None
    try:
        # "\ud800" escapes parse into lone surrogates, which cannot be stored as UTF-8.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSON("string contains a lone UTF-16 surrogate escape") from None
    return value


# --------------------------------------------------------------------------- helpers


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _unknown(
    obj: dict[str, Any],
    allowed: tuple[str, ...],
    prefix: str,
    index: int | None,
    hints: dict[str, str],
) -> list[Issue]:
    issues = []
    for key in obj:
        if key not in allowed:
            hint = hints.get(key)
            message = f"unknown field {key!r}" + (f": {hint}" if hint else "")
            issues.append(Issue("unknown_field", _join(prefix, key), message, index))
    return issues


def _non_empty_string(value: Any, path: str, index: int | None) -> list[Issue]:
    if type(value) is not str:
        return [Issue("wrong_type", path, "must be a string", index)]
    if not value:
        return [Issue("empty", path, "must not be empty", index)]
    return []


def _object(value: Any, path: str, index: int | None) -> list[Issue]:
    if type(value) is not dict:
        return [Issue("wrong_type", path, f"must be an object, not {_json_type(value)}", index)]
    return []


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


# --------------------------------------------------------------------------- events


def check_occurred_at(value: Any, now: datetime) -> tuple[str, str] | None:
    """(code, why) when ``value`` is not a valid ``occurred_at`` at server time ``now``."""
    if type(value) is not str:
        return "wrong_type", "must be a string"
    match = _OCCURRED_AT.fullmatch(value)
    if match is None:
        return "invalid_format", "must be YYYY-MM-DDTHH:MM:SS.mmmZ (UTC, milliseconds, Z suffix)"
    year, month, day, hour, minute, second, millis = (int(part) for part in match.groups())
    try:
        when = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=UTC)
    except ValueError as exc:
        return "invalid_format", f"not a real calendar date and time ({exc})"
    if when < now - PAST_TOLERANCE:
        return "out_of_window", "more than 30 days before server time"
    if when > now + FUTURE_TOLERANCE:
        return "out_of_window", "more than 5 minutes after server time"
    return None


def validate_event(
    event: Any, now: datetime, prefix: str = "", index: int | None = None
) -> list[Issue]:
    """All problems with one event object (contract 2.1)."""
    if type(event) is not dict:
        return [Issue("wrong_type", prefix or None, "an event must be a JSON object", index)]
    issues = _unknown(event, _EVENT_FIELDS, prefix, index, _EVENT_HINTS)
    for name in _EVENT_FIELDS:
        if name not in event:
            issues.append(Issue("missing_field", _join(prefix, name), "required", index))
    if "external_user_id" in event:
        issues += _non_empty_string(
            event["external_user_id"], _join(prefix, "external_user_id"), index
        )
    if "event_type" in event:
        path = _join(prefix, "event_type")
        value = event["event_type"]
        if type(value) is not str:
            issues.append(Issue("wrong_type", path, "must be a string", index))
        elif _EVENT_TYPE.fullmatch(value) is None:
            issues.append(
                Issue(
                    "invalid_format",
                    path,
                    "must match ^[a-z0-9]+(?:_[a-z0-9]+)*$ (lowercase snake_case)",
                    index,
                )
            )
    if "occurred_at" in event:
        problem = check_occurred_at(event["occurred_at"], now)
        if problem is not None:
            issues.append(Issue(problem[0], _join(prefix, "occurred_at"), problem[1], index))
    if "properties" in event:
        issues += _object(event["properties"], _join(prefix, "properties"), index)
    if "context" in event:
        context = event["context"]
        path = _join(prefix, "context")
        if type(context) is not dict:
            issues += _object(context, path, index)
        elif "$message_id" not in context:
            issues.append(Issue("missing_field", f"{path}.$message_id", "required", index))
        else:
            issues += _non_empty_string(context["$message_id"], f"{path}.$message_id", index)
    return issues


def _window_text(now: datetime) -> tuple[str, str]:
    """The earliest and latest valid ``occurred_at`` at ``now``, as text of the wire form.

    Times of that form (fixed width, zero-padded) sort as text exactly as in time; a time in
    milliseconds lies at or after ``now - 30 days`` when it lies at or after that instant
    rounded up to the millisecond, and likewise for the end, rounded down.
    """
    earliest = now - PAST_TOLERANCE
    if earliest.microsecond % 1000:
        earliest += timedelta(microseconds=1000 - earliest.microsecond % 1000)
    latest = now + FUTURE_TOLERANCE
    return _wire_text(earliest), _wire_text(latest)


def _wire_text(when: datetime) -> str:
    when = when.astimezone(UTC)
    return (
        f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when.hour:02d}:{when.minute:02d}:"
        f"{when.second:02d}.{when.microsecond // 1000:03d}Z"
    )


def all_events_valid(events: list[Any], now: datetime) -> bool:
    """True only when :func:`validate_event` finds nothing wrong with any of ``events``.

    Whole-batch operations, no per-field Python: a proof of validity, never a verdict of
    invalidity (False means: run the per-event checks, which name the problems).
    """
    if not events:
        return False
    try:
        if {type(e) for e in events} != {dict} or any(e.keys() != _EVENT_KEYS for e in events):
            return False
        users = [e["external_user_id"] for e in events]
        kinds = [e["event_type"] for e in events]
        times = [e["occurred_at"] for e in events]
        contexts = [e["context"] for e in events]
        if (
            set(map(type, users)) != {str}
            or "" in users
            or set(map(type, kinds)) != {str}
            or set(map(type, times)) != {str}
            or {type(e["properties"]) for e in events} != {dict}
            or set(map(type, contexts)) != {dict}
        ):
            return False
        ids = [c.get("$message_id") for c in contexts]
        if set(map(type, ids)) != {str} or "" in ids:
            return False
        if not all(map(_EVENT_TYPE.fullmatch, set(kinds))):
            return False
        if not all(map(_OCCURRED_AT_STRICT.fullmatch, times)):
            return False
        for day in {t[:10] for t in times}:
            date(int(day[:4]), int(day[5:7]), int(day[8:10]))  # raises for Feb 30 and year 0
        earliest, latest = _window_text(now)
    except (ValueError, OverflowError):
        return False
    oldest: str = min(times)
    newest: str = max(times)
    return oldest >= earliest and newest <= latest


def validate_batch(body: Any, now: datetime) -> list[Issue]:
    """All problems with a ``POST /v1/events/batch`` body (contract 4, rule 1)."""
    if type(body) is not dict:
        return [Issue("wrong_type", None, 'the body must be an object {"events": [...]}')]
    issues = _unknown(body, ("events",), "", None, {})
    if "events" not in body:
        return [*issues, Issue("missing_field", "events", "required")]
    events = body["events"]
    if type(events) is not list:
        return [*issues, Issue("wrong_type", "events", "must be an array of events")]
    if not events:
        issues.append(Issue("too_few_events", "events", "must contain at least 1 event"))
    elif len(events) > MAX_BATCH:
        issues.append(
            Issue(
                "too_many_events",
                "events",
                f"at most {MAX_BATCH} events per batch, got {len(events)}",
            )
        )
    if not issues and all_events_valid(events, now):
        return issues
    for i, event in enumerate(events):
        issues += validate_event(event, now, f"events[{i}]", i)
    return issues


def validate_track(body: Any, now: datetime) -> list[Issue]:
    """All problems with a ``POST /v1/events/track`` body: one bare event."""
    return validate_event(body, now)


# --------------------------------------------------------------------------- identify


def _check_address(channel: Any, address: Any, path: str, index: int | None) -> list[Issue]:
    if type(address) is not str:
        return [Issue("wrong_type", path, "must be a string", index)]
    if channel == "email" and _EMAIL.fullmatch(address) is None:
        return [Issue("invalid_format", path, "not a valid email address", index)]
    if channel == "sms" and _E164.fullmatch(address) is None:
        return [
            Issue("invalid_format", path, "not an E.164 phone number (+ and 2-15 digits)", index)
        ]
    if not address:
        return [Issue("empty", path, "must not be empty", index)]
    return []


def _validate_item(item: Any, prefix: str) -> list[Issue]:
    if type(item) is not dict:
        return [Issue("wrong_type", prefix, "a channel item must be an object")]
    issues = _unknown(item, _ITEM_FIELDS, prefix, None, _ITEM_HINTS)
    channel = item.get("channel")
    if "channel" not in item:
        issues.append(Issue("missing_field", f"{prefix}.channel", "required"))
    elif channel not in CHANNELS or type(channel) is not str:
        issues.append(Issue("invalid_value", f"{prefix}.channel", "must be email, sms or push"))
    if "address" not in item:
        issues.append(Issue("missing_field", f"{prefix}.address", "required"))
    else:
        issues += _check_address(channel, item["address"], f"{prefix}.address", None)
    for flag in ("opted_in", "verified"):
        if flag in item and type(item[flag]) is not bool:
            issues.append(Issue("wrong_type", f"{prefix}.{flag}", "must be true or false"))
    return issues


def validate_identify(body: Any) -> list[Issue]:
    """All problems with a ``POST /v1/identify`` body (contract 2.2 and 2.3)."""
    if type(body) is not dict:
        return [Issue("wrong_type", None, "the body must be an identify object")]
    issues = _unknown(body, _IDENTIFY_FIELDS, "", None, _IDENTIFY_HINTS)
    if "external_user_id" not in body:
        issues.append(Issue("missing_field", "external_user_id", "required"))
    else:
        issues += _non_empty_string(body["external_user_id"], "external_user_id", None)
    if "traits" in body:
        issues += _object(body["traits"], "traits", None)
    if "preferred_channel" in body:
        value = body["preferred_channel"]
        if type(value) is not str or value not in CHANNELS:
            issues.append(Issue("invalid_value", "preferred_channel", "must be email, sms or push"))
    if "channels" in body:
        channels = body["channels"]
        if type(channels) is not list:
            issues.append(Issue("wrong_type", "channels", "must be an array of channel items"))
        else:
            for i, item in enumerate(channels):
                issues += _validate_item(item, f"channels[{i}]")
    return issues
