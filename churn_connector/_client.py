"""The Client: an immutable config plus the send operations. No global client exists."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ._config import ClientConfig, Secret
from ._events import event_stream
from ._exceptions import TransportError
from ._ledger import Ledger, ScopedLedger, open_ledger, scope_of
from ._progress import Progress
from ._readers import DEFAULT_SLICE_ROWS, iter_frames
from ._results import RowBook, SendResult
from ._schemas import Duplicates, ExtraColumns
from ._sender import IDENTIFY_PATH, Request, Sender, chunk_events, stopped_error
from ._transport import Transport

log = logging.getLogger("churn_connector")


class Client:
    """Sends validated data to the ingestion API.

    ``base_url``/``api_key`` default to CHURN_BASE_URL/CHURN_API_KEY. Options are those of
    :class:`ClientConfig` (timeouts, concurrency, batch size, retry policy, ...). The
    config is immutable; ``client.config`` shows it without the key.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        config: ClientConfig | None = None,
        **options: Any,
    ) -> None:
        self.config = (
            config if config is not None else ClientConfig.create(base_url, api_key, **options)
        )

    def __repr__(self) -> str:
        return f"Client(base_url={self.config.base_url!r})"

    def send_events(
        self,
        data: Any,
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
        ledger: str | os.PathLike[str] | Ledger | None = None,
    ) -> SendResult:
        """Validate, convert and send events; invalid rows are reported and never sent.

        Returns a SendResult accounting for every input row. Raises AuthenticationError
        (the run stops) when the API refuses the key. ``dry_run`` builds every request
        without sending. ``batch_size`` may lower the configured size, never exceed 500.
        With ``ledger`` (a SQLite file path or a Ledger), events it records as acknowledged
        are ``skipped`` and newly acknowledged ones are recorded.
        """
        config = self.config
        if batch_size is not None:
            config = config.with_options(batch_size=batch_size)
        concurrency = max_concurrency or config.max_concurrency
        stream = event_stream(
            now=now,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            namespace=namespace,
            id_columns=id_columns,
        )
        started = time.monotonic()
        requests = chunk_events(
            stream.run(iter_frames(data, slice_rows)), config.batch_size, config.max_request_bytes
        )
        return self._run(
            "events", config, stream, requests, concurrency, dry_run, progress, ledger, started
        )

    def identify(
        self,
        data: Any,
        *,
        dry_run: bool = False,
        naive_timezone: str | None = None,
        extra_columns: ExtraColumns = "error",
        phone_region: str | None = None,
        duplicates: Duplicates = "error",
        max_concurrency: int | None = None,
        progress: bool | None = None,
        slice_rows: int = DEFAULT_SLICE_ROWS,
        ledger: str | os.PathLike[str] | Ledger | None = None,
    ) -> SendResult:
        """Validate identities and send one ``POST /v1/identify`` per valid row.

        Requests run concurrently across users (``identify_concurrency``, default 32) but
        never two at once for one user, and one user's rows go out in row order.
        ``.chunks`` has one row per request. Raises AuthenticationError on 401/403.
        With ``ledger``, users whose body is unchanged since their last acknowledgement
        are ``skipped``.
        """
        from ._identities import identity_stream

        concurrency = max_concurrency or self.config.identify_concurrency
        stream = identity_stream(
            data,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            phone_region=phone_region,
            duplicates=duplicates,
            slice_rows=slice_rows,
        )
        started = time.monotonic()
        requests = (
            Request(IDENTIFY_PATH, [pos], body=body, key=user)
            for items in stream.run(stream.frames())
            for pos, user, body in items
        )
        return self._run(
            "identities",
            self.config,
            stream,
            requests,
            concurrency,
            dry_run,
            progress,
            ledger,
            started,
        )

    def _run(
        self,
        kind: str,
        config: ClientConfig,
        stream: Any,
        requests: Iterable[Request],
        concurrency: int,
        dry_run: bool,
        progress: bool | None,
        ledger: str | os.PathLike[str] | Ledger | None,
        started: float,
    ) -> SendResult:
        """Deliver (with the ledger open if asked) and account for every row."""
        scope = scope_of(config.base_url, config.api_key.reveal())
        stream.ledger, opened = open_ledger(ledger, scope, dry_run)
        try:
            sender = self._deliver(kind, config, stream, requests, concurrency, dry_run, progress)
        finally:
            if opened is not None:
                opened.close()
        elapsed = time.monotonic() - started
        result = SendResult(kind, stream.book, sender.chunks, elapsed, dry_run=dry_run)
        log.info("%s", result.summary())
        return result

    def _deliver(
        self,
        kind: str,
        config: ClientConfig,
        stream: Any,
        requests: Iterable[Request],
        concurrency: int,
        dry_run: bool,
        progress: bool | None,
    ) -> Sender:
        book: RowBook = stream.book
        ledger: ScopedLedger | None = stream.ledger

        def acknowledged(req: Request) -> None:
            assert ledger is not None
            ledger.record(kind, [stream.pending.pop(p) for p in req.positions])

        bar = Progress(kind, enabled=False if dry_run else progress)
        if dry_run:
            sender = Sender(None, book, concurrency, False, bar)
            sender.dry_run(requests)
            bar.close()
            return sender
        transport = Transport(config, pool_size=concurrency)
        sender = Sender(
            transport,
            book,
            concurrency,
            config.bisect_rejected,
            bar,
            config.max_split_requests,
            on_sent=acknowledged if ledger is not None else None,
        )
        try:
            sender.run(requests)
        except TransportError as exc:
            raise stopped_error(exc, book, sender.chunks) from None
        finally:
            transport.close()
            bar.close()
        return sender


def identify(
    data: Any, base_url: str | None = None, api_key: str | None = None, **options: Any
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, **client_options).identify(data, ...)``."""
    client_opts = {k: options.pop(k) for k in list(options) if k in _CONFIG_FIELDS}
    return Client(base_url, api_key, **client_opts).identify(data, **options)


def send_events(
    data: Any, base_url: str | None = None, api_key: str | None = None, **options: Any
) -> SendResult:
    """One-call form: ``Client(base_url, api_key, **client_options).send_events(data, ...)``."""
    client_opts = {k: options.pop(k) for k in list(options) if k in _CONFIG_FIELDS}
    return Client(base_url, api_key, **client_opts).send_events(data, **options)


_CONFIG_FIELDS = frozenset(ClientConfig.__dataclass_fields__) - {"base_url", "api_key"}
