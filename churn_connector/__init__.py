"""churn_connector: push warehouse exports of product events and identities to the ingestion API.

Validate with pandera, transform to exact wire JSON with stable message ids, send in chunks
with retries, and get a result frame that accounts for every row.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .__version__ import __version__
from ._client import Client
from ._core import (
    AuthenticationError,
    ChurnConnectorError,
    ClientConfig,
    ConfigurationError,
    DataValidationError,
    DeliveryError,
    InputError,
    Interrupted,
    LedgerError,
    PlanError,
    QueueFull,
    RetryPolicy,
    RowState,
    RunStopped,
    Secret,
    StorageError,
    Timeouts,
    TransportError,
)
from ._delivery import instant_retries, set_retry_testing
from ._events import EVENT_TYPE_PATTERN, events_schema, events_to_wire, validate_events
from ._identities import identities_schema, identities_to_wire, validate_identities
from ._ledger import Ledger
from ._one_call import identify, send_events, track
from ._options import EventOptions, IdentityOptions
from ._read import TextFormat, sql
from ._resend import resend
from ._results import SendResult
from ._tasks import PARTITION_RESULT_META, identify_task, send_events_task, send_partition
from ._track import FlushReport, Tracker, TrackHandle, TrackResult, Undelivered
from ._validate import GateVerdict, TrackingPlan, ValidationReport
from ._wire import message_id

if TYPE_CHECKING:
    from . import samples
    from ._sandbox import Fault, Sandbox
    from ._track import AsyncClient, AsyncTracker, AsyncTrackHandle

# loaded on first use: most runs never start a sandbox or build sample data
# (and httpx, an optional extra, only for the async client)
_LAZY = {
    "Sandbox": "._sandbox",
    "Fault": "._sandbox",
    "samples": ".samples",
    "AsyncClient": "._track",
    "AsyncTracker": "._track",
    "AsyncTrackHandle": "._track",
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
    "PlanError",
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
    "TrackingPlan",
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
    "sql",
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
