"""One event's wire bytes without a DataFrame: the events engine's fast path for one event.

``_track.scalar`` checks a one-off event's values in plain Python; what it finds valid is
made wire here by the batch per-row path's own steps: the same event object
(``events.event_object``), the same writer of bytes (``events.write_events``: canonical
bytes, the hashed id or the caller's, spliced in), asked for one event and for nothing a
batch needs beside its bytes (de-duplication and ledger digests). The one step of its own
is the instant's text, ``ms_text``: ``_json.format_ms`` for one value, without an array
(``tests/track/test_scalar.py`` holds the bytes equal to the batch path's, over generated
rows).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .._options import EventOptions
from .events import event_object, write_events

__all__ = ["Event", "make_event", "ms_text"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class Event:
    """A valid one-off event: its message id, its exact wire bytes, occurred_at in epoch ms."""

    message_id: str
    body: bytes
    ms: int


def make_event(
    user: str,
    event_type: str,
    ms: int,
    properties: dict[str, Any],
    context: dict[str, Any],
    given: str | None,
    options: EventOptions,
) -> Event:
    """The wire event of values already checked (``user``, ``event_type`` as sent;
    ``occurred_at`` as epoch ms; ``properties``/``context`` JSON-exact), with the caller's
    message id ``given``, or its hashed one (``options``' namespace and id format)."""
    body: list[bytes] = []
    event = event_object(user, event_type, ms_text(ms), properties, context)
    written = write_events([event], None if given is None else [given], options, body, keys=False)
    message_id = given if given is not None else written.quoted[0][1:-1].decode()
    return Event(message_id, body[0], ms)


def ms_text(ms: int) -> str:
    """The wire spelling of an instant (``_json.format_ms`` for one value)."""
    t = _EPOCH + ms * _MS
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
        f"{t.second:02d}.{t.microsecond // 1000:03d}Z"
    )
