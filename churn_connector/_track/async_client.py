"""``cc.AsyncClient``: one-off events from ASGI handlers (FastAPI, Starlette, ...), on httpx.

``await client.track(...)`` and ``async with client.tracker() as t: await t.track(...)`` have
the semantics of their thread counterparts (``Client.track``, ``Client.tracker``): the same
checks, the same wire bytes and ids, the same delivery policy, the same states of what
became of each event. Waiting happens in the event loop; the spool's disk writes run in a
worker thread, so a handler never blocks the loop on an fsync.

Cancellation accounts for everything: an event whose ``track`` was cancelled is either not
queued (cancelled while it waited for room) or queued whole (cancelled while its spool row
was being written: the row and the queue entry go together); a request cancelled in flight
(the tracker closed by a cancelled task) leaves its events ``failed`` (outcome unknown, safe
to re-send; with a spool they stay there), never in limbo.

A tracker left open when its event loop ends (``asyncio.run`` cancels the tasks left and
waits for them): its senders take the cancel as the loop's end, send what is queued for
``flush_timeout`` seconds (a request cut in flight goes again: the same ids), then the last
one settles what is left and logs a WARNING, as a thread tracker does at interpreter exit.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Unpack

from .._core import (
    TRACK_PATH,
    ClientConfig,
    ClientOptions,
    ConfigurationError,
    IdFormat,
    QueueFull,
    Secret,
    TransportError,
    as_secret,
)
from .._delivery import AsyncConnections, AsyncPoster, deliver_async
from .._validate import TrackingPlan
from .book import Book, Entry, FlushReport
from .handles import AsyncTrackHandle
from .scalar import PlanSource, event_of, planned
from .send import TrackResult, result_of
from .spool import Spool
from .tracker import OnFull, _left_behind, _merge, spend_of

__all__ = ["AsyncClient", "AsyncTrackHandle", "AsyncTracker"]

log = logging.getLogger("churn_connector")


class AsyncClient:
    """Sends one-off events from async code, over httpx (``pip install
    'churn-connector[async]'``). ``base_url``, ``api_key``, ``config`` and the keywords
    are :class:`Client`'s; ``transport``: an httpx transport to send through (tests,
    mounts). Close it with ``await client.aclose()`` or use ``async with``."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        config: ClientConfig | None = None,
        transport: Any = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        api_key = as_secret(api_key)
        self.config = (
            config if config is not None else ClientConfig.create(base_url, api_key, **options)
        )
        self._connections = AsyncConnections(self.config, transport)
        # the one-off calls' delivery policy (their 429 pause, budget, breaker); a tracker
        # has its own, as the thread client's trackers do
        self._poster = AsyncPoster(self._connections)

    def __repr__(self) -> str:
        config = getattr(self, "config", None)
        return f"AsyncClient(base_url={getattr(config, 'base_url', None)!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        self._poster.flush()
        await self._connections.aclose()

    async def track(
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
        """:meth:`Client.track`, awaited: validate one event and send it now."""
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
        poster = self._poster
        try:
            outcome = await poster.post(TRACK_PATH, event.body)
        except TransportError:
            if self._poster is poster:  # it stopped itself: the next call starts afresh
                poster.flush()
                self._poster = AsyncPoster(self._connections)
            raise
        return result_of(event, outcome)

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
    ) -> AsyncTracker:
        """:meth:`Client.tracker` for async code: ``async with client.tracker() as t:``,
        ``handle = await t.track(...)``, ``await handle.result()``."""
        return AsyncTracker(
            self,
            spool=spool,
            max_queue=max_queue,
            on_full=on_full,
            block_timeout=block_timeout,
            flush_timeout=flush_timeout,
            max_concurrency=max_concurrency,
            plan=planned(plan),
        )


class AsyncTracker:
    """Buffered one-off events in an event loop (see :class:`Tracker`)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        spool: str | os.PathLike[str] | None,
        max_queue: int,
        on_full: OnFull,
        block_timeout: float,
        flush_timeout: float,
        max_concurrency: int | None,
        plan: TrackingPlan | None = None,
    ) -> None:
        if on_full not in ("block", "raise", "spill"):
            raise ConfigurationError(
                f"on_full must be 'block', 'raise' or 'spill' (there is no drop mode), "
                f"not {on_full!r}"
            )
        if on_full == "spill" and spool is None:
            raise ConfigurationError("on_full='spill' needs a spool: pass spool=<path>")
        if max_queue < 1:
            raise ConfigurationError("max_queue must be at least 1")
        self.client = client
        self.on_full = on_full
        self.block_timeout = block_timeout
        self.flush_timeout = flush_timeout
        self.plan = plan
        self.concurrency = max_concurrency or min(4, client.config.max_concurrency)
        self._spool = Spool(spool) if spool is not None else None
        self._book = Book(max_queue, self._spool, client.config.batch_size)
        # its own delivery policy (pause, budget, breaker), on the client's connections, and
        # its own size limit and bisection budget, as a thread tracker's
        self._poster = AsyncPoster(client._connections)
        self._spend = spend_of(client.config)
        self._cond = asyncio.Condition()
        self._admit = asyncio.Lock()
        self._workers: list[asyncio.Task[None]] = []
        self._ended = 0  # senders that ended
        self._exit_by: float | None = None  # the loop ended with the tracker open: until
        self._closing = False
        self._closed = False

    @property
    def spool(self) -> str | None:
        return self._spool.path if self._spool is not None else None

    def __repr__(self) -> str:
        return f"AsyncTracker(spool={self.spool!r}, pending={self._book.pending()})"

    async def __aenter__(self) -> AsyncTracker:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        interrupted = exc is not None and not isinstance(exc, Exception)
        report = await self.aclose(self.flush_timeout if interrupted else None)
        if exc is None:
            report.raise_for_failures()
        elif not report.ok:
            log.warning("tracker: %s", _left_behind(report))

    async def track(
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
    ) -> AsyncTrackHandle:
        """Validate one event (``DataValidationError`` here) and queue it; its handle."""
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
            plan=self.plan if plan is None else planned(plan),
        )
        if self._closing:
            raise ConfigurationError("the tracker is closed")
        handle = AsyncTrackHandle(event.message_id)
        entry = Entry(event.message_id, event.body, event.ms, None, handle._resolve)
        async with self._admit:  # one at a time: the spool's order is the sending order
            if self.on_full != "spill":
                await self._room()
            # shielded: cancelled while its row is written, the event is still queued whole
            await asyncio.shield(self._queue(entry))
        self._start()
        return handle

    async def _room(self) -> None:
        book = self._book
        async with self._cond:
            if book.has_room():
                return
            if self.on_full == "block":
                try:
                    async with asyncio.timeout(self.block_timeout):
                        await self._cond.wait_for(book.has_room)
                    return
                except TimeoutError:
                    pass
        waited = f" for {self.block_timeout:g} s" if self.on_full == "block" else ""
        raise QueueFull(
            f"the tracker's queue is full ({book.max_queue:,} events waited{waited}); the "
            "event was not queued. Raise max_queue, send fewer, or pass a spool with "
            "on_full='spill'",
            max_queue=book.max_queue,
        )

    async def _queue(self, entry: Entry) -> None:
        if self._spool is not None:
            entry.seq = await asyncio.to_thread(
                self._spool.add, entry.message_id, entry.ms, entry.body
            )
        async with self._cond:
            with self._book.lock:
                self._book.admit(entry)
            self._cond.notify()

    # -- sending ------------------------------------------------------------------------
    def _start(self) -> None:
        if not self._workers and not self._closing:
            self._workers = [asyncio.create_task(self._work()) for _ in range(self.concurrency)]

    async def _work(self) -> None:
        try:
            while True:
                try:
                    await self._serve()
                    return
                except asyncio.CancelledError:
                    if not self._cancelled_while_open():
                        raise
        finally:
            self._worker_ended()

    async def _serve(self) -> None:
        book = self._book
        while True:
            async with self._cond:
                while True:
                    with book.lock:
                        if book.needs_load():
                            book.loading = True
                            load, chunk = True, list[Entry]()
                            break
                        if book.waiting and not self._past_exit():
                            load, chunk = False, book.take()
                            break
                        if (self._closing or self._exit_by is not None) and book.idle():
                            return
                    if self._past_exit():
                        return
                    await self._wait()
            if load:
                await asyncio.to_thread(book.load)
                continue
            if chunk:
                await self._send(chunk)
            async with self._cond:
                self._cond.notify_all()

    async def _wait(self) -> None:
        """Wait for the condition (held); while the loop ends, no later than the exit's end."""
        if self._exit_by is None:
            await self._cond.wait()
            return
        try:
            async with asyncio.timeout_at(self._exit_by):
                await self._cond.wait()
        except TimeoutError:
            pass

    async def _send(self, chunk: list[Entry]) -> None:
        """One request for ``chunk``, sent and landed as a batch's requests are (``Trip``)."""
        while True:
            trip = Book.trip(chunk, self._spend)
            poster = self._poster
            try:
                async with asyncio.timeout_at(self._exit_by):  # None: no bound
                    await deliver_async(trip.landing, poster, trip.request)
                break
            except (asyncio.CancelledError, TimeoutError) as exc:
                if isinstance(exc, TimeoutError) and not self._past_exit():
                    raise
                if self._cancelled_while_open() and not self._past_exit():
                    # the event loop ends with this request in flight: its outcome is
                    # unknown, so it goes again, within the exit's time (the same message
                    # ids: the API keeps one of each)
                    continue
                # in flight when the tracker was closed: outcome unknown, never in limbo
                trip.stop(trip.cancelled())
                self._book.land(chunk, trip)
                if self._exit_by is None:
                    raise
                return
            except TransportError as exc:
                if self._poster is poster:  # it stopped itself: the next request afresh
                    poster.flush()
                    self._poster = AsyncPoster(self.client._connections)
                trip.stop(exc)
                break
        if self._spool is not None:  # its rows leave the spool: a disk write, off the loop
            await asyncio.to_thread(self._book.land, chunk, trip)
        else:
            self._book.land(chunk, trip)

    # -- the event loop ending with the tracker open ----------------------------------------
    def _cancelled_while_open(self) -> bool:
        """A sender was cancelled while the tracker is open: the event loop is ending
        (``asyncio.run`` cancels the tasks left, and waits for them) without ``aclose``.
        As a thread tracker at interpreter exit, it then gets ``flush_timeout`` seconds to
        deliver what is queued; what is left after is reported (``_worker_ended``)."""
        if self._closing:
            return False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # the cancel is taken as the loop's end, and answered so
        if self._exit_by is None:
            self._exit_by = asyncio.get_running_loop().time() + self.flush_timeout
        return True

    def _past_exit(self) -> bool:
        exit_by = self._exit_by
        return exit_by is not None and asyncio.get_running_loop().time() >= exit_by

    def _worker_ended(self) -> None:
        """The last sender to end after the loop's end settles what is left and says so."""
        self._ended += 1
        if self._exit_by is None or self._closing or self._ended < len(self._workers):
            return
        self._closing = self._closed = True
        if not self._book.idle():
            self._book.abandon("the event loop ended")
        if self._spool is not None:
            self._spool.close()
        self._poster.flush()
        report = self._book.report()
        if not report.ok:
            log.warning("async tracker at the event loop's end: %s", _left_behind(report))

    # -- flushing and closing -------------------------------------------------------------
    async def flush(self, timeout: float | None = None) -> FlushReport:
        """Wait until every queued event is delivered or has failed (at most ``timeout``
        seconds); the report of what happened since the previous one."""
        self._start()
        try:
            async with asyncio.timeout(timeout), self._cond:
                await self._cond.wait_for(self._book.idle)
        except TimeoutError:
            pass
        return self._book.report()

    async def aclose(self, timeout: float | None = None) -> FlushReport:
        """Flush (at most ``timeout`` seconds), stop the senders and close."""
        if self._closed:
            return self._book.report()
        try:
            report = await self.flush(timeout)
        finally:
            self._closing = True
            for task in self._workers:
                if not self._book.idle():
                    task.cancel()
            async with self._cond:
                self._cond.notify_all()
            await asyncio.gather(*self._workers, return_exceptions=True)
            if not self._book.idle():
                self._book.abandon("the tracker was closed")
            if self._spool is not None:
                self._spool.close()
            self._poster.flush()
            self._closed = True
        return _merge(report, self._book.report())
