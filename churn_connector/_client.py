"""The Client: an immutable config plus the two send operations. No global client exists.

A send is a pipeline: the resource's stream (read → validate → wire), the optional ledger
stage, requests (chunks of events, or one identify per user), the sender over a Poster, and
the SendResult that accounts for every row.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any, Unpack

from ._core import (
    BlankConsent,
    ClientConfig,
    ClientOptions,
    DataSource,
    Decimals,
    Duplicates,
    EpochUnit,
    ExtraColumns,
    IdFormat,
    Partitioning,
    Secret,
    as_secret,
)
from ._delivery import Request, SendOptions, chunk_events, identify_requests
from ._events import EventStream
from ._identities import IdentityStream
from ._keywords import IdentifyOptions, SendEventsOptions, send_keywords
from ._ledger import Guard, LedgerArg
from ._options import EventOptions, IdentityOptions
from ._read import DEFAULT_SLICE_ROWS, Format, NameStyle, TextFormat
from ._results import SendResult, recorded
from ._run import Run
from ._sync import Sync, SyncOptions
from ._track import OneOff, OnFull, PlanSource, Tracker, TrackResult, event_of, planned
from ._validate import ThresholdArg, TrackingPlan
from ._wire import WireBatch

if TYPE_CHECKING:
    import requests

__all__ = [
    "Client",
    "IdentifyOptions",
    "SendEventsOptions",
    "send_keywords",
]


_ONE_OFF_LOCK = threading.Lock()


class Client:
    """Sends validated data to the ingestion API.

    ``base_url``/``api_key`` default to CHURN_BASE_URL/CHURN_API_KEY; the other keywords are
    :class:`ClientConfig`'s (timeouts, concurrency, batch size, retry policy, ...), or pass a
    whole ``config``. The config is immutable; ``client.config`` shows it without the key.

    ``session``: a ``requests.Session`` of yours to send through (mTLS client certificates,
    proxies with custom auth, ``session.auth``, adapters); it then decides how to connect,
    so ``proxy=``, ``ca_bundle=``, ``ca_store="system"``, ``verify=False`` and
    ``trust_env=True`` are refused with it. The session is used as it is, never changed;
    the key goes in a header per request.
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
            from ._delivery import check_session  # noqa: PLC0415

            check_session(session, self.config)
        # held here, not in the config: a session is neither hashable nor a plain value
        self.session = session
        self._one_off: OneOff | None = None  # track()'s connections, made at its first call

    def __repr__(self) -> str:
        config = getattr(self, "config", None)
        return f"Client(base_url={getattr(config, 'base_url', None)!r})"

    def close(self) -> None:
        """Close the connections ``track`` keeps open (a later call opens new ones)."""
        if self._one_off is not None:
            self._one_off.close()

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
        new_ids: bool = False,
        history: str | None = None,
        alert_webhook: str | None = None,
        alert_invalid: ThresholdArg = None,
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
        rename_style: NameStyle | None = None,
        version: int | None = None,
        as_of: Any = None,
        snapshot_id: int | None = None,
        partitioning: Partitioning | None = "hive",
        plan: TrackingPlan | str | PathLike[str] | None = None,
        event_type_style: NameStyle | None = None,
        cursor: str | None = None,
        lookback: Any = None,
        incremental: bool = False,
        sync_name: str | None = None,
        full_refresh: bool = False,
        since: Any = None,
        until: Any = None,
        options: EventOptions | None = None,
    ) -> SendResult:
        """Validate, convert and send events; invalid rows are reported and never sent.

        Returns a SendResult accounting for every input row. Raises AuthenticationError
        (the run stops) when the API refuses the key. ``dry_run`` builds every request
        without sending. ``batch_size`` may lower the configured size, never exceed 500.
        With ``ledger`` (a SQLite file path or a Ledger), events it records as acknowledged
        are ``skipped`` and newly acknowledged ones are recorded; an event it records as
        delivered under another message id (same user, event type and ``occurred_at``) is
        ``held``, not sent, unless ``new_ids=True`` says the new ids are meant. ``rename``,
        ``dtypes``, ``encoding``, ``decimals``, ``epoch_unit``, ``id_format`` and the text options
        (``delimiter``, ``header``, ``columns``, ``escape``, ``null``, ``quote``,
        ``format``), ``rename_style``, ``event_type_style``, ``version``, ``as_of``,
        ``snapshot_id``, ``partitioning`` and ``options`` (all of them as one
        :class:`EventOptions`): as for ``validate_events``. ``max_concurrency`` (at least
        1) and ``batch_size`` default to the client's. Input that breaks part way raises
        InputError carrying what was delivered. ``cursor``, ``lookback``, ``incremental``,
        ``sync_name``, ``full_refresh``, ``since``, ``until``: an incremental sync
        (``docs/guides/incremental-syncs.md``).
        """
        # each keyword to its field: the table's options (or options=, whole), the send's
        table = EventOptions.chosen(
            options,
            EventOptions(
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
                rename_style=rename_style,
                version=version,
                as_of=as_of,
                snapshot_id=snapshot_id,
                partitioning=partitioning,
                plan=plan,
                event_type_style=event_type_style,
                text=TextFormat(
                    delimiter=delimiter,
                    header=header,
                    columns=columns,
                    escape=escape,
                    null=null,
                    quote=quote,
                    format=format,
                ),
            ),
        )
        send = SendOptions(
            dry_run=dry_run,
            ledger=ledger,
            new_ids=new_ids,
            progress=progress,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
            history=history,
            alert_webhook=alert_webhook,
            alert_invalid=alert_invalid,
        )
        syncing = SyncOptions(cursor=cursor, lookback=lookback, incremental=incremental,
                              sync_name=sync_name, full_refresh=full_refresh, since=since,
                              until=until)  # fmt: skip
        config = self.config
        if send.batch_size is not None:
            config = config.with_options(batch_size=send.batch_size)
        with Sync.open(data, syncing, "events", table.reading, send, config) as sync:
            stream = EventStream(sync.data, table)
            concurrency = send.max_concurrency or config.max_concurrency  # None: the client's
            run = Run(
                config,
                stream,
                concurrency,
                dry_run=send.dry_run,
                progress=send.progress,
                session=self.session,
            )

            def requests(wire: Iterable[WireBatch]) -> Iterator[Request]:
                return chunk_events(wire, config.batch_size, run.size_limit)

            guard = Guard(
                new_ids=send.new_ids,
                id_format=table.id_format,
                namespace=table.namespace,
                id_columns=tuple(table.id_columns) if table.id_columns else None,
                by_columns=bool(table.id_columns),
            )
            return recorded(
                send,
                "events",
                lambda: sync.deliver(
                    stream, lambda ledger: run.deliver(requests, ledger, guard=guard)
                ),
            )

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
        history: str | None = None,
        alert_webhook: str | None = None,
        alert_invalid: ThresholdArg = None,
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
        rename_style: NameStyle | None = None,
        version: int | None = None,
        as_of: Any = None,
        snapshot_id: int | None = None,
        partitioning: Partitioning | None = "hive",
        plan: TrackingPlan | str | PathLike[str] | None = None,
        cursor: str | None = None,
        lookback: Any = None,
        incremental: bool = False,
        sync_name: str | None = None,
        full_refresh: bool = False,
        since: Any = None,
        until: Any = None,
        options: IdentityOptions | None = None,
    ) -> SendResult:
        """Validate identities and send one ``POST /v1/identify`` per valid row.

        Requests run concurrently across users (``identify_concurrency``, default 64) but
        never two at once for one user, and one user's rows go out in row order.
        ``.chunks`` has one row per request. Raises AuthenticationError on 401/403.
        With ``ledger``, users whose body is unchanged since their last acknowledgement
        are ``skipped``. ``rename``, ``rename_style``, ``dtypes``, ``encoding``,
        ``decimals``, the text options and the tables' (``version``, ``as_of``,
        ``snapshot_id``, ``partitioning``): as for ``validate_events``; ``blank_consent``,
        ``require_consent`` and ``options`` (all of them as one :class:`IdentityOptions`): as
        for ``validate_identities``. ``max_concurrency`` (at least 1) defaults to the
        client's ``identify_concurrency``. ``cursor`` and the other sync keywords: as for
        :meth:`send_events` (a user whose body is unchanged is still skipped by the ledger).
        """
        # each keyword to its field: the table's options (or options=, whole), the send's
        table = IdentityOptions.chosen(
            options,
            IdentityOptions(
                naive_timezone=naive_timezone,
                extra_columns=extra_columns,
                phone_region=phone_region,
                duplicates=duplicates,
                slice_rows=slice_rows,
                rename=rename,
                dtypes=dtypes,
                encoding=encoding,
                decimals=decimals,
                blank_consent=blank_consent,
                require_consent=require_consent,
                rename_style=rename_style,
                version=version,
                as_of=as_of,
                snapshot_id=snapshot_id,
                partitioning=partitioning,
                plan=plan,
                text=TextFormat(
                    delimiter=delimiter,
                    header=header,
                    columns=columns,
                    escape=escape,
                    null=null,
                    quote=quote,
                    format=format,
                ),
            ),
        )
        send = SendOptions(
            dry_run=dry_run,
            ledger=ledger,
            progress=progress,
            max_concurrency=max_concurrency,
            history=history,
            alert_webhook=alert_webhook,
            alert_invalid=alert_invalid,
        )
        syncing = SyncOptions(cursor=cursor, lookback=lookback, incremental=incremental,
                              sync_name=sync_name, full_refresh=full_refresh, since=since,
                              until=until)  # fmt: skip
        with Sync.open(data, syncing, "identities", table.reading, send, self.config) as sync:
            stream = IdentityStream(sync.data, table)
            concurrency = send.max_concurrency or self.config.identify_concurrency  # None: ditto
            run = Run(
                self.config,
                stream,
                concurrency,
                dry_run=send.dry_run,
                progress=send.progress,
                session=self.session,
                # one request per row: a slice's worth is built ahead of the network, so the
                # workers never wait while the next slice is validated (~40 µs a row; the
                # requests ahead of the default 8 rounds would last 0.4 s at 50 ms)
                ahead=table.slice_rows,
            )
            return recorded(
                send,
                "identities",
                lambda: sync.deliver(stream, lambda ledger: run.deliver(identify_requests, ledger)),
            )

    def track(
        self,
        external_user_id: str | int,
        event_type: str,
        *,
        occurred_at: Any = None,
        properties: Mapping[str, Any] | str | None = None,
        context: Mapping[str, Any] | str | None = None,
        message_id: str | None = None,
        now: Any = None,
        naive_timezone: str | None = None,
        namespace: str | None = None,
        id_format: IdFormat = "v2",
        plan: PlanSource | None = None,
    ) -> TrackResult:
        """Validate one event and send it now (``POST /v1/events/track``): for webhooks,
        scripts and low-volume services. Returns a :class:`TrackResult`.

        The rules are the batch path's, byte for byte: the same checks, the same wire
        object, the same hashed ``context.$message_id`` as ``events_to_wire`` gives a
        one-row table of these values. ``occurred_at`` defaults to the moment of the call
        (``now`` when given, which also anchors the 30-day window). A hashed id covers the
        event's content, time included; a webhook should pass the provider's own event id
        as ``message_id``: a re-delivered webhook is then the same event, stored once. An
        event given neither ``occurred_at`` nor ``message_id`` gets a random id, so two
        identical calls in one millisecond are two events, not one the API drops.

        Raises ``DataValidationError`` naming each failed check (nothing is sent),
        ``AuthenticationError`` when the key is refused, ``DeliveryError`` when the API
        rejects the event or retries give up (outcome unknown: re-sending with the same id
        is safe), ``TransportError`` when the API cannot be reached, ``Interrupted`` on
        Ctrl-C or SIGTERM. The client's retry policy applies; its ``deadline`` bounds each
        call. For many events, ``send_events`` or :meth:`tracker` send in batches.
        ``plan``: a tracking plan (a ``TrackingPlan``, or a file read at each call) the
        event must also keep, checked as a batch row is.
        """
        event = event_of(
            external_user_id,
            event_type,
            occurred_at=occurred_at,
            properties=properties,
            context=context,
            message_id=message_id,
            now=now,
            naive_timezone=naive_timezone,
            namespace=namespace,
            id_format=id_format,
            plan=planned(plan),
        )
        with _ONE_OFF_LOCK:  # threads of a web server may make the first call together
            if self._one_off is None:
                self._one_off = OneOff(self.config, self.session)
        return self._one_off.send(event)

    def tracker(
        self,
        spool: str | os.PathLike[str] | None = None,
        *,
        max_queue: int = 10_000,
        on_full: OnFull = "block",
        block_timeout: float = 30.0,
        flush_timeout: float = 5.0,
        max_concurrency: int | None = None,
        plan: PlanSource | None = None,
    ) -> Tracker:
        """A buffered :class:`Tracker`: ``t.track(...)`` (the arguments of :meth:`track`)
        validates and queues, background threads send batches of up to 500 to
        ``/v1/events/batch``; use it as ``with client.tracker() as t:``.

        ``spool``: a SQLite file every event is written to before ``track`` returns (a
        process killed with ``kill -9`` loses nothing; the next tracker on it sends what is
        left first). A full queue (``max_queue`` events) is never a silent drop:
        ``on_full="block"`` waits up to ``block_timeout`` seconds then raises
        ``QueueFull``, ``"raise"`` raises at once, ``"spill"`` (with a spool) keeps the
        overflow on disk only. At exit an open tracker flushes for ``flush_timeout``
        seconds, then warns with what is left. ``max_concurrency``: requests in flight
        (default: the client's, at most 4). ``plan``: a tracking plan every event must keep
        (read once here; a ``track`` call's own ``plan=`` overrides it).
        """
        return Tracker(
            self.config,
            self.session,
            spool=spool,
            max_queue=max_queue,
            on_full=on_full,
            block_timeout=block_timeout,
            flush_timeout=flush_timeout,
            max_concurrency=max_concurrency,
            plan=planned(plan),
        )
