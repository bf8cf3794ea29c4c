"""One event's wire bytes without a DataFrame: the scalar engine's wire step.

``_track.scalar`` checks a one-off event's values in plain Python; what it finds valid is
made wire here: the same five members, the same canonical bytes (``canonical``), the same
hashed id or the caller's (``ids.one_id``, ``ids.with_id``) as the batch path's per-row and
column-wise paths give a one-row table of those values (``tests/track/test_scalar.py``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .._core import IdFormat
from .canonical import canonical
from .ids import one_id, with_id

__all__ = ["Event", "make_event"]

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
    *,
    namespace: str | None,
    id_format: IdFormat,
) -> Event:
    """The wire event of values already checked (``user``, ``event_type`` as sent;
    ``occurred_at`` as epoch ms; ``properties``/``context`` JSON-exact), with the caller's
    message id ``given``, or its hashed one."""
    wire = {
        "context": context,
        "event_type": event_type,
        "external_user_id": user,
        "occurred_at": _ms_text(ms),
        "properties": properties,
    }
    row = canonical(wire)
    if given is not None:
        return Event(given, with_id(row, canonical(given)), ms)
    text = one_id(row, namespace, id_format)
    return Event(text, with_id(row, b'"' + text.encode() + b'"'), ms)


def _ms_text(ms: int) -> str:
    """The wire spelling of an instant (``_json.timestamps.ms_text`` for one value)."""
    t = _EPOCH + ms * _MS
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:"
        f"{t.second:02d}.{t.microsecond // 1000:03d}Z"
    )
