"""One-off events: ``track()`` for webhooks, services and scripts (``POST /v1/events/track``),
the buffered tracker and its durable spool, and the async client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_names
from .book import FlushReport, Undelivered
from .handles import AsyncTrackHandle, TrackHandle
from .scalar import PlanSource, event_of, planned
from .send import OneOff, TrackResult
from .tracker import OnFull, Tracker

if TYPE_CHECKING:
    from .async_client import AsyncClient, AsyncTracker

__all__ = [
    "AsyncClient",
    "AsyncTrackHandle",
    "AsyncTracker",
    "FlushReport",
    "OnFull",
    "OneOff",
    "PlanSource",
    "TrackHandle",
    "TrackResult",
    "Tracker",
    "Undelivered",
    "event_of",
    "planned",
]

# async_client: loaded on first use (see _core.lazy); type checkers read the imports above
if not TYPE_CHECKING:
    __getattr__ = lazy_names(
        __name__, {"AsyncClient": ".async_client", "AsyncTracker": ".async_client"}
    )
