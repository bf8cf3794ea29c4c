"""Delivery: wire batches → requests (chunking) → the sender, over a Poster (HTTP or a dry
run), with retries, progress and the knobs of one send."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_names
from .chunking import Request, SizeLimit, chunk_events, identify_requests
from .chunklog import ChunkRecord
from .connections import ssl_context
from .pool import BODY_LIMIT
from .prefetch import Handoff
from .progress import Progress
from .retry import RetryLog, decide, instant_retries, next_wait, retry_testing, set_retry_testing
from .send_options import SendOptions
from .sender import Sender
from .transport import DryRunPoster, HttpPoster, Outcome, OutcomeStatus, Poster, trim, what_it_said

if TYPE_CHECKING:
    from .session import check_session

__all__ = [
    "BODY_LIMIT",
    "ChunkRecord",
    "DryRunPoster",
    "Handoff",
    "HttpPoster",
    "Outcome",
    "OutcomeStatus",
    "Poster",
    "Progress",
    "Request",
    "RetryLog",
    "SendOptions",
    "Sender",
    "SizeLimit",
    "check_session",
    "chunk_events",
    "decide",
    "identify_requests",
    "instant_retries",
    "next_wait",
    "retry_testing",
    "set_retry_testing",
    "ssl_context",
    "trim",
    "what_it_said",
]

# session: loaded on first use (see _core.lazy); type checkers read the imports above
if not TYPE_CHECKING:
    __getattr__ = lazy_names(__name__, {"check_session": ".session"})
