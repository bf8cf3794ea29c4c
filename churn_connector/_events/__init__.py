"""The events wing: schema → stream (validation, the wire, de-duplication) → public api."""

from __future__ import annotations

from .api import events_to_wire, validate_events
from .schema import EVENT_TYPE_PATTERN, build_schema, events_schema
from .stream import EventStream

__all__ = [
    "EVENT_TYPE_PATTERN",
    "EventStream",
    "build_schema",
    "events_schema",
    "events_to_wire",
    "validate_events",
]
