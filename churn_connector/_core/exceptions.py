"""Exceptions raised by churn_connector.

Every exception the package raises on purpose derives from one root::

    ChurnConnectorError
    ├── ConfigurationError      bad options, missing key or base URL, plain http to a remote host
    ├── InputError              the input cannot be read          .path .line + run results
    ├── DataValidationError     some rows are invalid             .n_invalid .n_rows
    ├── TransportError          the API could not be used at all  .status .attempts + run results
    │   └── AuthenticationError     401/403: the key was refused; the run stops at once
    ├── LedgerError             the ledger file cannot be written; the run stops  + run results
    ├── Interrupted             SIGINT/SIGTERM (or an orchestrator's kill) stopped the run
    │                                                                 .signal + run results
    └── DeliveryError           some valid rows were not delivered          .counts .rows .chunks

"Run results" are ``.counts`` (rows per state), ``.rows`` and ``.chunks`` (the result frames
of what happened before the run stopped), so a caller can still write them down.

Each class declares its attributes as keyword-only constructor arguments. All of them pickle
and unpickle to an equal message and attributes (the root's ``__reduce__``), because Airflow
and Spark move exceptions between processes. None of them ever holds the API key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AuthenticationError",
    "ChurnConnectorError",
    "ConfigurationError",
    "DataValidationError",
    "DeliveryError",
    "InputError",
    "Interrupted",
    "LedgerError",
    "TransportError",
]


class ChurnConnectorError(Exception):
    """Root of every exception raised by churn_connector."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only attributes do not survive Exception's default pickling
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[ChurnConnectorError], message: str, state: dict[str, Any]) -> Any:
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class ConfigurationError(ChurnConnectorError):
    """An option, the base URL or the API key is missing or unusable."""


class DataValidationError(ChurnConnectorError):
    """Some rows are invalid (``ValidationReport.raise_for_failures``)."""

    def __init__(self, message: str, *, n_invalid: int, n_rows: int) -> None:
        super().__init__(message)
        self.n_invalid = n_invalid
        self.n_rows = n_rows


class _RunResults:
    """What a stopped or failed run leaves behind: rows per state and the result frames."""

    counts: dict[str, int]
    rows: pd.DataFrame | None
    chunks: pd.DataFrame | None

    def _set_results(
        self,
        counts: dict[str, int] | None,
        rows: pd.DataFrame | None,
        chunks: pd.DataFrame | None,
    ) -> None:
        self.counts = dict(counts or {})
        self.rows = rows
        self.chunks = chunks


class _RunStopped(_RunResults, ChurnConnectorError):
    """An error that ended a run part way; it carries what the run did before."""

    def with_results(
        self, counts: dict[str, int], rows: pd.DataFrame, chunks: pd.DataFrame
    ) -> _RunStopped:
        """The same error, carrying what the stopped run delivered."""
        state = {**vars(self), "counts": counts, "rows": rows, "chunks": chunks}
        return _rebuild(type(self), self.message, state)  # type: ignore[no-any-return]


class InputError(_RunStopped):
    """The input cannot be read (unsupported type, unreadable or broken file).

    ``path`` and ``line`` say where; raised part way through a send, it also carries what
    the run delivered before (``counts``, ``rows``, ``chunks``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self._set_results(counts, rows, chunks)


class TransportError(_RunStopped):
    """The API could not be reached or used at all; the run stopped.

    ``status`` is the HTTP status that stopped it (None for network failures); when raised
    from a send, ``counts``, ``rows`` and ``chunks`` say what was delivered before.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 0,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self._set_results(counts, rows, chunks)


class AuthenticationError(TransportError):
    """The API refused the key (401 or 403). Carries ``status``, never the key."""


class LedgerError(_RunStopped):
    """The ledger could not be written (read-only, corrupt, disk full); ``path`` names it.

    The run stops at the first failed write: a ledger that silently stops recording would
    make a later run re-send, or worse, skip what it should not.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self._set_results(counts, rows, chunks)


class Interrupted(_RunStopped):
    """The run was interrupted (Ctrl-C, SIGTERM, an orchestrator stopping the task).

    Requests in flight were abandoned: their rows are ``failed`` with "outcome unknown,
    safe to re-send". ``signal`` is the signal number when one was received.
    """

    def __init__(
        self,
        message: str,
        *,
        signal: int | None = None,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(message)
        self.signal = signal
        self._set_results(counts, rows, chunks)


class DeliveryError(_RunResults, ChurnConnectorError):
    """Some valid rows were not delivered (``SendResult.raise_for_failures``).

    ``counts``: rows per state; ``rows``: the rows that were not delivered; ``chunks``: every
    request of the run.
    """

    def __init__(
        self,
        message: str,
        *,
        counts: dict[str, int],
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(message)
        self._set_results(counts, rows, chunks)
