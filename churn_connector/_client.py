"""The Client: an immutable config plus the two send operations. No global client exists.

A send is a pipeline: the resource's stream (read → validate → wire), the optional ledger
stage, requests (chunks of events, or one identify per user), the sender over a Poster, and
the SendResult that accounts for every row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from ._config import ClientConfig, ClientOptions, Secret, as_secret
from ._delivery.ledger import LedgerArg, LedgerStage, open_ledger, scope_of
from ._delivery.progress import Progress
from ._delivery.requests import Request, SizeLimit, chunk_events, identify_requests
from ._delivery.results import SendResult
from ._delivery.sender import Sender
from ._delivery.signals import signal_of, sigterm_raises
from ._delivery.transport import DryRunPoster, HttpPoster, Poster
from ._events.api import event_options
from ._events.stream import EventStream
from ._exceptions import Interrupted, _RunStopped
from ._identities.api import identity_options
from ._identities.stream import IdentityStream
from ._inputs import DEFAULT_SLICE_ROWS, row_count, text_format
from ._inputs.text import Format, TextOptions
from ._rows import RowBook
from ._stream import Stream, WireBatch, batches
from ._types import (
    BlankConsent,
    DataSource,
    Decimals,
    Duplicates,
    EpochUnit,
    ExtraColumns,
    IdFormat,
    RowState,
)

if TYPE_CHECKING:
    import requests

log = logging.getLogger("churn_connector")

# turns wire batches into requests: chunks of events, or one identify per user
RequestsOf = Callable[[Iterable[WireBatch]], Iterator[Request]]


class Client:
    """Sends validated data to the ingestion API.

    ``base_url``/``api_key`` default to CHURN_BASE_URL/CHURN_API_KEY; the other keywords are
    :class:`ClientConfig`'s (timeouts, concurrency, batch size, retry policy, ...), or pass a
    whole ``config``. The config is immutable; ``client.config`` shows it without the key.

    ``session``: a ``requests.Session`` of yours to send through (mTLS client certificates,
    proxies with custom auth, ``session.auth``, adapters); it then decides how to connect,
    so ``proxy=``, ``ca_bundle=``, ``verify=False`` and ``trust_env=True`` are refused with
    it. The session is used as it is, never changed; the key goes in a header per request.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        config: ClientConfig | None = None,
        session: requests.Session | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        api_key = as_secret(api_key)  # no frame below holds the raw key in a local variable
        self.config = (
            config if config is not None else ClientConfig.create(base_url, api_key, **options)
        )
        if session is not None:
            # lazy: requests is only needed for this path, not to import the package
            from ._delivery.session import check_session  # noqa: PLC0415

            check_session(session, self.config)
        # held here, not in the config: a session is neither hashable nor a plain value
        self.session = session

    def __repr__(self) -> str:
        config = getattr(self, "config", None)
        return f"Client(base_url={getattr(config, 'base_url', None)!r})"

    def send_events(
        self,
        data: DataSource,
        *,
        dry_run: bool = False,
        now: Any = None,
        naive_timezone: str | None = None,
        extra_columns: ExtraColumns = "error",
        namespace: str | None = None,
        id_columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        max_concurrency: int | None = None,
        progress: bool | None = None,
        slice_rows: int = DEFAULT_SLICE_ROWS,
        ledger: LedgerArg = None,
        rename: Mapping[str, str] | None = None,
        dtypes: Mapping[str, str] | None = None,
        encoding: str = "utf-8",
        decimals: Decimals = "error",
        epoch_unit: EpochUnit | None = None,
        id_format: IdFormat = "v2",
        delimiter: str | None = None,
        header: bool = True,
        columns: Sequence[str] | None = None,
        escape: str | None = None,
        null: str | Sequence[str] | None = None,
        quote: str | None = '"',
        format: Format | None = None,
    ) -> SendResult:
        """Validate, convert and send events; invalid rows are reported and never sent.

        Returns a SendResult accounting for every input row. Raises AuthenticationError
        (the run stops) when the API refuses the key. ``dry_run`` builds every request
        without sending. ``batch_size`` may lower the configured size, never exceed 500.
        With ``ledger`` (a SQLite file path or a Ledger), events it records as acknowledged
        are ``skipped`` and newly acknowledged ones are recorded. ``rename``, ``dtypes``,
        ``encoding``, ``decimals``, ``epoch_unit``, ``id_format`` and the text options
        (``delimiter``, ``header``, ``columns``, ``escape``, ``null``, ``quote``,
        ``format``): as for ``validate_events``. Input that breaks part way raises
        InputError carrying what was delivered.
        """
        config = self.config
        if batch_size is not None:
            config = config.with_options(batch_size=batch_size)
        options = event_options(
            now=now,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            namespace=namespace,
            id_columns=id_columns,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            epoch_unit=epoch_unit,
            id_format=id_format,
            text=text_format(delimiter, header, columns, escape, null, quote, format),
        )
        stream = EventStream(data, options)

        concurrency = max_concurrency or config.max_concurrency
        run = _Run(
            config, stream, concurrency, dry_run=dry_run, progress=progress, session=self.session
        )

        def requests(wire: Iterable[WireBatch]) -> Iterator[Request]:
            return chunk_events(wire, config.batch_size, run.size_limit)

        return run.deliver(requests, ledger)

    def identify(
        self,
        data: DataSource,
        *,
        dry_run: bool = False,
        naive_timezone: str | None = None,
        extra_columns: ExtraColumns = "error",
        phone_region: str | None = None,
        duplicates: Duplicates = "error",
        max_concurrency: int | None = None,
        progress: bool | None = None,
        slice_rows: int = DEFAULT_SLICE_ROWS,
        ledger: LedgerArg = None,
        rename: Mapping[str, str] | None = None,
        dtypes: Mapping[str, str] | None = None,
        encoding: str = "utf-8",
        decimals: Decimals = "error",
        delimiter: str | None = None,
        header: bool = True,
        columns: Sequence[str] | None = None,
        escape: str | None = None,
        null: str | Sequence[str] | None = None,
        quote: str | None = '"',
        format: Format | None = None,
        blank_consent: BlankConsent = "error",
        require_consent: bool = False,
    ) -> SendResult:
        """Validate identities and send one ``POST /v1/identify`` per valid row.

        Requests run concurrently across users (``identify_concurrency``, default 64) but
        never two at once for one user, and one user's rows go out in row order.
        ``.chunks`` has one row per request. Raises AuthenticationError on 401/403.
        With ``ledger``, users whose body is unchanged since their last acknowledgement
        are ``skipped``. ``rename``, ``dtypes``, ``encoding``, ``decimals`` and the text
        options: as for ``validate_events``.
        are ``skipped``. ``rename``, ``dtypes``, ``encoding``, ``decimals``: as for
        ``validate_events``; ``blank_consent``, ``require_consent``: as for
        ``validate_identities``.
        """
        options = identity_options(
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            phone_region=phone_region,
            duplicates=duplicates,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            text=text_format(delimiter, header, columns, escape, null, quote, format),
            blank_consent=blank_consent,
            require_consent=require_consent,
        )
        stream = IdentityStream(data, options)
        concurrency = max_concurrency or self.config.identify_concurrency
        run = _Run(
            self.config,
            stream,
            concurrency,
            dry_run=dry_run,
            progress=progress,
            session=self.session,
        )
        return run.deliver(identify_requests, ledger)


class _Run:
    """One send: the stream, the optional ledger stage, the sender, and the accounting."""

    def __init__(
        self,
        config: ClientConfig,
        stream: Stream,
        concurrency: int,
        *,
        dry_run: bool,
        progress: bool | None,
        session: requests.Session | None = None,
    ) -> None:
        self.config = config
        self.session = session
        self.stream = stream
        self.concurrency = concurrency
        self.dry_run = dry_run
        self.progress = progress
        self.started = time.monotonic()
        self.size_limit = SizeLimit(config.max_request_bytes)  # learned from 413 answers

    def deliver(self, requests: RequestsOf, ledger: LedgerArg) -> SendResult:
        """Deliver (with the ledger open if asked) and account for every row."""
        stream, config = self.stream, self.config
        scope = scope_of(config.base_url, config.api_key)
        scoped, opened = open_ledger(ledger, scope, dry_run=self.dry_run)
        try:
            wire = batches(stream)
            stage = None
            if scoped is not None:
                stage = LedgerStage(scoped, stream.kind, stream.failures)
                wire = stage.apply(wire)
            sender = self._send(requests(wire), stage)
        finally:
            if opened is not None:
                opened.close()
        elapsed = time.monotonic() - self.started
        result = SendResult(
            stream.kind,
            stream.book,
            sender.chunks,
            elapsed,
            dry_run=self.dry_run,
            notes=stream.notes(),
        )
        log.info("%s", result.summary())
        return result

    def _send(self, requests: Iterable[Request], stage: LedgerStage | None) -> Sender:
        book = self.stream.book
        enabled = False if self.dry_run else self.progress
        # the input's length, when it is known without reading it
        total = row_count(self.stream.data)
        if total is not None:
            book.reserve(total)
        bar = Progress(
            self.stream.kind,
            total=None if enabled is False else total,  # a total, and so an ETA
            enabled=enabled,
            done=lambda: _finished(book),
        )
        poster: Poster = (
            DryRunPoster()
            if self.dry_run
            else HttpPoster(self.config, self.concurrency, session=self.session)
        )
        sender = Sender(
            poster,
            book,
            bar,
            # a dry run has nothing to wait for: one worker keeps its chunk numbers in order
            concurrency=1 if self.dry_run else self.concurrency,
            bisect=self.config.bisect_rejected,
            split_budget=self.config.max_split_requests,
            size_limit=self.size_limit,
            on_sent=stage.acknowledged if stage is not None else None,
        )
        try:
            with sigterm_raises():
                sender.run(requests)
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, _RunStopped):
                raise  # a bug of ours: shown as it is
            raise self._stopped(exc, sender) from exc
        finally:
            poster.close()
            bar.close()
        return sender

    def _stopped(self, exc: BaseException, sender: Sender) -> _RunStopped:
        """The error a stopped run raises: every row accounted for, the frames attached."""
        book = self.stream.book
        reason = (
            f"the run stopped ({exc.message})" if isinstance(exc, _RunStopped) else "interrupted"
        )
        pending = np.flatnonzero(book.status == RowState.PENDING)
        book.set(pending, RowState.FAILED, error=f"not sent: {reason}")
        elapsed = time.monotonic() - self.started
        partial = SendResult(self.stream.kind, book, sender.chunks, elapsed)
        counts = dict(partial.counts)
        if isinstance(exc, _RunStopped):
            return exc.with_results(counts, partial.rows, partial.chunks)
        # Ctrl-C, SIGTERM, or whatever an orchestrator raises when it kills the task
        summary = f"interrupted: {counts['sent']:,} of {len(book):,} rows delivered"
        # the exception carries the summary and whoever catches it shows it (the CLI prints
        # it); logged as a warning too, it printed twice, in a notebook as red stderr
        log.info("%s", summary)
        return Interrupted(
            summary, signal=signal_of(exc), counts=counts, rows=partial.rows, chunks=partial.chunks
        )


def _finished(book: RowBook) -> int:
    """Rows with their final state: progress counts rows (invalid and skipped ones too)."""
    status = book.status
    return len(status) - int(np.count_nonzero(status == RowState.PENDING))


class SendEventsOptions(TextOptions, total=False):
    """The keywords of :meth:`Client.send_events` (for the one-call form and tasks)."""

    dry_run: bool
    now: Any
    naive_timezone: str | None
    extra_columns: ExtraColumns
    namespace: str | None
    id_columns: Sequence[str] | None
    batch_size: int | None
    max_concurrency: int | None
    progress: bool | None
    slice_rows: int
    ledger: LedgerArg
    rename: Mapping[str, str] | None
    dtypes: Mapping[str, str] | None
    encoding: str
    decimals: Decimals
    epoch_unit: EpochUnit | None
    id_format: IdFormat


class IdentifyOptions(TextOptions, total=False):
    """The keywords of :meth:`Client.identify` (for the one-call form and tasks)."""

    dry_run: bool
    naive_timezone: str | None
    extra_columns: ExtraColumns
    phone_region: str | None
    duplicates: Duplicates
    max_concurrency: int | None
    progress: bool | None
    slice_rows: int
    ledger: LedgerArg
    rename: Mapping[str, str] | None
    dtypes: Mapping[str, str] | None
    encoding: str
    decimals: Decimals
    blank_consent: BlankConsent
    require_consent: bool


def send_events(
    data: DataSource,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    config: ClientConfig | None = None,
    session: requests.Session | None = None,
    **options: Unpack[SendEventsOptions],
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, config=config, session=session)
    .send_events(data, ...)``."""
    api_key = as_secret(api_key)
    client = Client(base_url, api_key, config=config, session=session)
    return client.send_events(data, **options)


def identify(
    data: DataSource,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    *,
    config: ClientConfig | None = None,
    session: requests.Session | None = None,
    **options: Unpack[IdentifyOptions],
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, config=config, session=session)
    .identify(data, ...)``."""
    api_key = as_secret(api_key)
    return Client(base_url, api_key, config=config, session=session).identify(data, **options)
