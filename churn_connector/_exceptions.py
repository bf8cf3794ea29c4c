"""Exceptions raised by churn_connector.

Every exception the package raises on purpose derives from one root::

    ChurnConnectorError
    ├── ConfigurationError      bad options, missing key or base URL, plain http to a remote host
    ├── InputError              the input cannot be read (unknown format, unreadable file)
    ├── DataValidationError     ValidationReport.raise_for_failures(): some rows are invalid
    ├── TransportError          the API could not be used at all
    │   └── AuthenticationError     401/403: the key was refused; the run stops at once
    └── DeliveryError           SendResult.raise_for_failures(): some rows were not delivered

All of them pickle and unpickle to an equal message and attributes, because Airflow and
Spark move exceptions between processes. None of them ever holds the API key.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "ChurnConnectorError",
    "ConfigurationError",
    "DataValidationError",
    "DeliveryError",
    "InputError",
    "TransportError",
]


class ChurnConnectorError(Exception):
    """Root of every exception raised by churn_connector."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details)
        for name, value in details.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only details do not survive the default Exception pickling
        return (_rebuild, (type(self), self.message, self.details))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[ChurnConnectorError], message: str, details: dict[str, Any]) -> Any:
    return cls(message, **details)


class ConfigurationError(ChurnConnectorError):
    """An option, the base URL or the API key is missing or unusable."""


class InputError(ChurnConnectorError):
    """The input data cannot be read (unsupported type or file format)."""


class DataValidationError(ChurnConnectorError):
    """Some rows are invalid; ``failures`` counts them and ``summary`` explains."""


class TransportError(ChurnConnectorError):
    """The API could not be reached or used at all."""


class AuthenticationError(TransportError):
    """The API refused the key (401 or 403). Carries ``status``, never the key."""


class DeliveryError(ChurnConnectorError):
    """Some valid rows were not delivered. Carries ``counts`` (status -> rows)."""
