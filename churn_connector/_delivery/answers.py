"""What an answer says, for people: how a request ended (``Outcome``), and the message of
an error body whatever its shape (``what_it_said``), masked and trimmed.

Texts never hold the key or the URL: an answer's body is masked before it is read or
trimmed, and its message becomes the error of the request's rows, or of one event's row
where the answer names it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

OutcomeStatus = Literal["sent", "rejected", "failed", "dry_run"]


@dataclass(frozen=True)
class Outcome:
    """How one request ended after its retries.

    ``error``: why, for people (``HTTP 422: <the API's message>``); ``response``: the body,
    trimmed; ``event_errors``: (index in the request, the API's message for that event),
    where the answer names events (every row of the request carries ``error`` but these).
    """

    status: OutcomeStatus
    http_status: int | None
    attempts: int
    elapsed_s: float
    error: str | None
    response: str | None
    event_errors: tuple[tuple[int, str], ...] = ()


# what an echoed answer keeps: enough to read the error, never a whole body
RESPONSE_TEXT_LIMIT = 300
_EVENT_FIELD = re.compile(r"^(?:events)?\[\d+\]\.?")  # events[3].occurred_at -> occurred_at
_TAGS = re.compile(r"<[^>]*>")
_MESSAGE_KEYS = ("message", "detail", "title", "error_description", "description", "reason")


def trim(text: str | None, limit: int = RESPONSE_TEXT_LIMIT) -> str | None:
    """``text`` cut to ``limit`` characters (mask the key first: a key cut in two would
    no longer be found)."""
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True)
class Said:
    """What an answer's body says, for people: its message, and messages per event index."""

    message: str | None = None
    events: tuple[tuple[int, str], ...] = ()


def what_it_said(body: str | None, scrub: Callable[[str], str]) -> Said:
    """The message of an error body, whatever its shape: the sandbox's (and many APIs')
    ``{"error": {"message", "details": [{"index", "field", "message"}]}}``, a ``message``
    or ``detail`` member, JSON of another shape, HTML or plain text. Every text is masked
    with ``scrub`` (after JSON decoding too: an escaped key is a key), on one line, trimmed.
    """
    if not body or not body.strip():
        return Said()
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = _TAGS.sub(" ", body) if body.lstrip().startswith("<") else body
        return Said(_line(text, scrub))
    if not isinstance(parsed, dict):
        return Said(_line(body, scrub))
    inner = parsed.get("error")
    where = inner if isinstance(inner, dict) else parsed
    message = next((where[k] for k in _MESSAGE_KEYS if isinstance(where.get(k), str)), None)
    if message is None and isinstance(inner, str):
        message = inner
    if message is None and isinstance(where.get("code"), str):
        message = where["code"]
    details = where.get("details", parsed.get("details"))
    events: dict[int, list[str]] = {}
    for item in details if isinstance(details, list) else ():
        if not isinstance(item, dict) or type(item.get("index")) is not int:
            continue
        said = item.get("message")
        if not isinstance(said, str):
            continue
        field = item.get("field")
        field = _EVENT_FIELD.sub("", field) if isinstance(field, str) else ""
        events.setdefault(item["index"], []).append(f"{field}: {said}" if field else said)
    return Said(
        _line(message if message is not None else body, scrub),
        tuple((index, _line("; ".join(texts), scrub)) for index, texts in sorted(events.items())),
    )


def _line(text: str, scrub: Callable[[str], str]) -> str:
    return trim(" ".join(scrub(text).split())) or ""
