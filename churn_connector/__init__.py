"""churn_connector: push warehouse exports of product events and identities to the ingestion API.

Validate with pandera, transform to exact wire JSON with stable message ids, send in chunks
with retries, and get a result frame that accounts for every row.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .__version__ import __version__
from ._client import Client, identify, send_events, track
from ._core.config import ClientConfig, RetryPolicy, Secret, Timeouts
from ._core.exceptions import (
    AuthenticationError,
    ChurnConnectorError,
    ConfigurationError,
    DataValidationError,
    DeliveryError,
    InputError,
    Interrupted,
    LedgerError,
    QueueFull,
    RunStopped,
    StorageError,
    TransportError,
)
from ._core.types import RowState
from ._delivery.retry import instant_retries, set_retry_testing
from ._events.api import events_to_wire, validate_events
from ._events.schema import EVENT_TYPE_PATTERN, events_schema
from ._identities.api import identities_to_wire, validate_identities
from ._identities.schema import identities_schema
from ._ledger import Ledger
from ._options.events import EventOptions
from ._options.identities import IdentityOptions
from ._read.text import TextFormat
from ._resend import resend
from ._results.result import SendResult
from ._tasks import PARTITION_RESULT_META, identify_task, send_events_task, send_partition
from ._track.book import FlushReport, Undelivered
from ._track.handles import TrackHandle
from ._track.send import TrackResult
from ._track.tracker import Tracker
from ._validate.gate import GateVerdict
from ._validate.report import ValidationReport
from ._wire.ids import message_id

if TYPE_CHECKING:
    from . import samples
    from ._sandbox import Fault, Sandbox
    from ._track.async_client import AsyncClient, AsyncTracker
    from ._track.handles import AsyncTrackHandle

# loaded on first use: most runs never start a sandbox or build sample data
# (and httpx, an optional extra, only for the async client)
_LAZY = {
    "Sandbox": "._sandbox",
    "Fault": "._sandbox",
    "samples": ".samples",
    "AsyncClient": "._track.async_client",
    "AsyncTracker": "._track.async_client",
    "AsyncTrackHandle": "._track.handles",
}

__all__ = [
    "EVENT_TYPE_PATTERN",
    "PARTITION_RESULT_META",
    "AsyncClient",
    "AsyncTrackHandle",
    "AsyncTracker",
    "AuthenticationError",
    "ChurnConnectorError",
    "Client",
    "ClientConfig",
    "ConfigurationError",
    "DataValidationError",
    "DeliveryError",
    "EventOptions",
    "Fault",
    "FlushReport",
    "GateVerdict",
    "IdentityOptions",
    "InputError",
    "Interrupted",
    "Ledger",
    "LedgerError",
    "QueueFull",
    "RetryPolicy",
    "RowState",
    "RunStopped",
    "Sandbox",
    "Secret",
    "SendResult",
    "StorageError",
    "TextFormat",
    "Timeouts",
    "TrackHandle",
    "TrackResult",
    "Tracker",
    "TransportError",
    "Undelivered",
    "ValidationReport",
    "__version__",
    "events_schema",
    "events_to_wire",
    "identify",
    "identify_task",
    "identities_schema",
    "identities_to_wire",
    "instant_retries",
    "message_id",
    "resend",
    "samples",
    "send_events",
    "send_events_task",
    "send_partition",
    "set_retry_testing",
    "track",
    "validate_events",
    "validate_identities",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'churn_connector' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name], __name__)
    value = module if name == "samples" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
