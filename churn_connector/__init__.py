"""churn_connector: push warehouse exports of product events and identities to the ingestion API.

Validate with pandera, transform to exact wire JSON with stable message ids, send in chunks
with retries, and get a result frame that accounts for every row.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ._client import Client, identify, send_events
from ._config import ClientConfig, Secret
from ._events import events_to_wire, validate_events
from ._exceptions import (
    AuthenticationError,
    ChurnConnectorError,
    ConfigurationError,
    DataValidationError,
    DeliveryError,
    InputError,
    TransportError,
)
from ._identities import identities_schema, identities_to_wire, validate_identities
from ._ids import message_id
from ._integrations import identify_task, send_events_task
from ._ledger import Ledger
from ._results import SendResult
from ._retry import RetryPolicy, instant_retries, set_retry_testing
from ._sandbox import Fault, Sandbox
from ._schemas import EVENT_TYPE_PATTERN, events_schema
from ._validation import ValidationReport

__all__ = [
    "EVENT_TYPE_PATTERN",
    "AuthenticationError",
    "ChurnConnectorError",
    "Client",
    "ClientConfig",
    "ConfigurationError",
    "DataValidationError",
    "DeliveryError",
    "Fault",
    "InputError",
    "Ledger",
    "RetryPolicy",
    "Sandbox",
    "Secret",
    "SendResult",
    "TransportError",
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
    "send_events",
    "send_events_task",
    "set_retry_testing",
    "validate_events",
    "validate_identities",
]
