"""Delivery: wire batches → requests (chunking) → the sender, over a Poster (HTTP, async
HTTP or a dry run) that the one delivery policy drives, with progress and the knobs of one
send."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_names
from .answers import Outcome
from .chunking import Request, SizeLimit, chunk_events, identify_requests
from .chunklog import ChunkRecord
from .landing import Landing, Spend, alone, deliver
from .prefetch import Handoff
from .progress import Progress
from .retry import instant_retries, set_retry_testing
from .send_options import SendOptions
from .sender import Sender
from .transport import DryRunPoster, HttpPoster, Poster

if TYPE_CHECKING:
    from .async_poster import AsyncConnections, AsyncPoster, deliver_async
    from .session import check_session

__all__ = [
    "AsyncConnections",
    "AsyncPoster",
    "ChunkRecord",
    "DryRunPoster",
    "Handoff",
    "HttpPoster",
    "Landing",
    "Outcome",
    "Poster",
    "Progress",
    "Request",
    "SendOptions",
    "Sender",
    "SizeLimit",
    "Spend",
    "alone",
    "check_session",
    "chunk_events",
    "deliver",
    "deliver_async",
    "identify_requests",
    "instant_retries",
    "set_retry_testing",
]

# session (requests) and the async transport (httpx): loaded on first use (see _core.lazy);
# type checkers read the imports above
if not TYPE_CHECKING:
    __getattr__ = lazy_names(
        __name__,
        {
            "AsyncConnections": ".async_poster",
            "AsyncPoster": ".async_poster",
            "check_session": ".session",
            "deliver_async": ".async_poster",
        },
    )
