"""Exceptions raised by churn_connector: one tree, drawn below and held to the classes by a test.

Every error the package raises on purpose is a ``ChurnConnectorError`` (an ``Exception``),
each class with one public parent. The one exception to that is ``Interrupted``: an
interrupt is a ``KeyboardInterrupt``, not an error, so a caller's ``except Exception:``
never swallows Ctrl-C, a notebook's stop button or an orchestrator's kill (the drawing is
checked against the classes by ``tests/core/test_exceptions.py``)::

    Exception
    └── ChurnConnectorError          every error raised on purpose                  retryable
        ├── ConfigurationError       bad options; key or base URL missing           no
        │   └── PlanError            a tracking plan unusable  .path .where .keyword  no
        ├── DataValidationError      rows invalid  .n_invalid .n_rows .checks       no
        ├── QueueFull                a tracker's queue full  .max_queue             yes
        ├── DeliveryError            rows not delivered  .counts .rows .chunks      *
        └── RunStopped               a run stopped  .counts .rows .chunks           no
            ├── InputError           the input unreadable  .path .line              no*
            ├── TransportError       the API unusable  .status .attempts            yes*
            │   └── AuthenticationError  401/403: the key refused; stops at once    no
            ├── LedgerError          the ledger unwritable  .path                   no*
            └── StorageError         a local file unwritable  .path .errno          no*
    KeyboardInterrupt
    └── Interrupted                  Ctrl-C, SIGTERM, a kill  .signal .counts .rows .chunks  yes

``retryable`` says whether making the same call again can succeed without changing the data,
the options or the environment first. The starred classes decide per instance, from the
cause: a refused connection or DNS that is down for now is retryable, an untrusted TLS
certificate is not; a ledger that is locked or full is, one that is read-only or corrupt is
not; a full disk (the message ids' spill file, a result file) is, a read-only folder is
not; an input that failed with an I/O error part way is, a broken file is not; a
``DeliveryError`` is when rows ``failed`` (outcome unknown, never answered), not when they
were only ``rejected`` or invalid. An ``Interrupted`` is retryable (nothing was wrong), but
an interrupt is someone's decision to stop: it is no ``Exception``, so a retry helper that
catches ``Exception`` never sees it.

``RunStopped`` is the error that stops a send part way, and the parent of the errors that
can: its ``.counts`` (rows per state), ``.rows`` and ``.chunks`` (the result frames of what
happened before the run stopped) let a caller still write them down:
``except cc.RunStopped as exc: exc.rows.to_parquet(...)``. Raised where no run was going
(an unreadable file given to ``validate_events``, a refused key on ``track()``), the
frames are ``None`` and ``counts`` is empty. An ``Interrupted`` carries the same four
attributes (``.not_read`` too) but is no ``RunStopped``: it cannot be an ``Exception``.
``except (cc.RunStopped, cc.Interrupted) as exc:`` keeps the record of any stopped run.

Each class declares its attributes as keyword-only constructor arguments. All of them pickle
and unpickle to an equal message and attributes (``__reduce__``), because Airflow and Spark
move exceptions between processes. None of them ever holds the API key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

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
    "PlanError",
    "QueueFull",
    "RunStopped",
    "StorageError",
    "TransportError",
]


class _Described(BaseException):
    """What every exception of the package has: a message, ``retryable``, and pickling."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only attributes do not survive BaseException's default pickling
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[Any], message: str, state: dict[str, Any]) -> Any:
    exc = BaseException.__new__(cls)
    BaseException.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class ChurnConnectorError(_Described, Exception):
    """Root of every error raised by churn_connector (an ``Exception``).

    ``retryable``: whether making the same call again can succeed as things are.
    """


class _RunResults:
    """What a stopped or failed run leaves behind: rows per state and the result frames
    (shared by ``RunStopped``, ``Interrupted`` and ``DeliveryError``)."""

    message: str
    counts: dict[str, int]
    rows: pd.DataFrame | None
    chunks: pd.DataFrame | None
    # the input was not read to the end and its length is unknown: where reading stopped
    not_read: str | None = None

    def _set_results(
        self,
        counts: dict[str, int] | None,
        rows: pd.DataFrame | None,
        chunks: pd.DataFrame | None,
    ) -> None:
        self.counts = dict(counts or {})
        self.rows = rows
        self.chunks = chunks

    def with_results(
        self, counts: dict[str, int], rows: pd.DataFrame, chunks: pd.DataFrame
    ) -> Self:
        """The same exception, carrying what the stopped run delivered."""
        state = {**vars(self), "counts": counts, "rows": rows, "chunks": chunks}
        rebuilt: Self = _rebuild(type(self), self.message, state)
        return rebuilt


class RunStopped(_RunResults, ChurnConnectorError):
    """A send that stopped part way, and the parent of the errors that stop one
    (``InputError``, ``TransportError``, ``LedgerError``, ``StorageError``).

    ``counts`` (rows per state), ``rows`` and ``chunks`` (the per-row and per-request result
    frames) say what the run did before it stopped: every row is accounted for, those never
    sent are ``failed`` with "not sent", the rows never read too where the input's length
    is known (a DataFrame, an Arrow table, a Parquet file); where it is not (a generator, a
    CSV file), ``not_read`` says from which row on the input was not read. Raised where no
    run was going (validation, ``track()``), ``rows`` and ``chunks`` are None and ``counts``
    is empty. Catch it to keep the record of any stopped run::

        try:
            client.send_events(path)
        except cc.RunStopped as exc:
            exc.rows.to_parquet("rows.parquet")
            raise

    An interrupt (``Interrupted``) carries the same attributes but is a
    ``KeyboardInterrupt``, not a ``RunStopped``: catch ``(cc.RunStopped, cc.Interrupted)``
    to keep the record of an interrupted run too.
    """

    def __init__(
        self,
        message: str,
        *,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self._set_results(counts, rows, chunks)


_RunStopped = RunStopped  # its name before it was public (for code written against it)


class ConfigurationError(ChurnConnectorError):
    """An option, the base URL or the API key is missing or unusable."""


class PlanError(ConfigurationError):
    """A tracking plan that cannot be used: unreadable, not a plan, or a schema keyword
    outside the supported subset of JSON Schema (never ignored). ``path``: the plan's file
    (None for a plan given as a mapping); ``where``: the place in the plan
    (``events.invoice_paid.properties.amount``); ``keyword``: the refused keyword, if any."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        where: str | None = None,
        keyword: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.where = where
        self.keyword = keyword


class DataValidationError(ChurnConnectorError):
    """Some rows are invalid (``ValidationReport.raise_for_failures``), or one event
    (``track``); ``checks`` then names the checks it failed."""

    def __init__(
        self, message: str, *, n_invalid: int, n_rows: int, checks: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.n_invalid = n_invalid
        self.n_rows = n_rows
        self.checks = checks


class InputError(RunStopped):
    """The input cannot be read (unsupported type, unreadable or broken file).

    ``path`` and ``line`` say where; raised part way through a send, it also carries what
    the run delivered before (``counts``, ``rows``, ``chunks``). ``retryable`` when reading
    failed with an I/O error (a network file system, an object store), not for a file that
    is broken or missing.
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
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, counts=counts, rows=rows, chunks=chunks, retryable=retryable)
        self.path = path
        self.line = line


class TransportError(RunStopped):
    """The API could not be reached or used at all; the run stopped.

    ``status`` is the HTTP status that stopped it (None for network failures); when raised
    from a send, ``counts``, ``rows`` and ``chunks`` say what was delivered before.
    ``retryable`` unless the cause needs a change first (an untrusted TLS certificate, a
    port that does not speak TLS, a proxy that refuses, a wrong base URL).
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 0,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, counts=counts, rows=rows, chunks=chunks, retryable=retryable)
        self.status = status
        self.attempts = attempts


class AuthenticationError(TransportError):
    """The API refused the key (401 or 403). Carries ``status``, never the key; not
    ``retryable``: the key must change."""

    retryable = False


class LedgerError(RunStopped):
    """The ledger could not be written (read-only, corrupt, disk full); ``path`` names it.

    The run stops at the first failed write: a ledger that silently stops recording would
    make a later run re-send, or worse, skip what it should not. ``retryable`` when the file
    was locked by another process or the disk full, not when it is read-only or corrupt.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, counts=counts, rows=rows, chunks=chunks, retryable=retryable)
        self.path = path


class StorageError(RunStopped):
    """A local file could not be written: the temporary file that holds the message ids of
    a long send (in the temp folder: ``TMPDIR``), or a result file (``--rows``,
    ``--results``). ``path`` names it, ``errno`` says why (``ENOSPC``: the disk is full;
    ``EROFS``: a read-only file system; ``EACCES``: no permission).

    Raised part way through a send, it carries what the run delivered before (``counts``,
    ``rows``, ``chunks``). ``retryable`` when the disk was full (space may be freed), not
    when the folder is read-only or forbidden.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        errno: int | None = None,
        counts: dict[str, int] | None = None,
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, counts=counts, rows=rows, chunks=chunks, retryable=retryable)
        self.path = path
        self.errno = errno


class Interrupted(_RunResults, _Described, KeyboardInterrupt):
    """The run was interrupted (Ctrl-C, a notebook's stop button, SIGTERM, an orchestrator
    stopping the task).

    A ``KeyboardInterrupt``, not an ``Exception`` (the one class of the package outside the
    ``ChurnConnectorError`` tree): a caller's ``except Exception:`` lets it through, as it
    lets Ctrl-C through. It carries what a ``RunStopped`` carries (``counts``, ``rows``,
    ``chunks``, ``not_read``); catch it by name to keep the results::

        try:
            result = client.send_events(path)
        except cc.Interrupted as exc:
            print(exc)  # "interrupted: 1,500 of 2,000 rows delivered"
            exc.rows.to_parquet("rows.parquet")

    Requests in flight were abandoned: their rows are ``failed`` with "outcome unknown,
    safe to re-send". ``signal`` is the signal number when one was received. ``retryable``:
    nothing was wrong, a re-run (with the ledger) completes the job.
    """

    retryable = True

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


class QueueFull(ChurnConnectorError):
    """A tracker's queue was full (``on_full="block"`` after its timeout, or ``"raise"``):
    the event was not queued, nothing was dropped silently. ``max_queue`` is the limit;
    ``retryable``: the queue drains as the API acknowledges."""

    retryable = True

    def __init__(self, message: str, *, max_queue: int) -> None:
        super().__init__(message)
        self.max_queue = max_queue


class DeliveryError(_RunResults, ChurnConnectorError):
    """Some valid rows were not delivered (``SendResult.raise_for_failures``).

    ``counts``: rows per state; ``rows``: the rows that were not delivered; ``chunks``: every
    request of the run. ``retryable`` when rows ``failed`` (never answered, outcome unknown:
    message ids make re-sending them safe); not when rows were only ``rejected``, invalid,
    expired (the data must change) or held (the caller must say the new ids are meant).
    """

    def __init__(
        self,
        message: str,
        *,
        counts: dict[str, int],
        rows: pd.DataFrame | None = None,
        chunks: pd.DataFrame | None = None,
        retryable: bool | None = None,
    ) -> None:
        failed = bool(counts.get("failed"))
        super().__init__(message, retryable=failed if retryable is None else retryable)
        self._set_results(counts, rows, chunks)
