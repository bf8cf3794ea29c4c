"""The buffered tracker: ``t.track()`` validates and queues, background threads send batches.

``client.tracker()`` is for services and loops: each event is checked in the call (an
invalid one raises there), queued, and sent to ``/v1/events/batch`` in requests of up to
``batch_size`` with the id ``track`` gave it. Requests leave as soon as a sender is free, so a
quiet service sends each event at once and a busy one fills its batches; each goes out and
lands as a batch send's requests do (``trip``: the same expiry, size limit, bisection, states
and texts), through a poster whose deadline is each request's. Nothing is ever dropped
silently:

- a full queue is a policy: ``block`` (up to ``block_timeout``, then ``QueueFull``),
  ``raise`` (``QueueFull`` at once) or ``spill`` (to the spool);
- ``flush()`` waits and reports (what happened since the previous report); leaving the
  ``with`` block flushes and raises ``DeliveryError`` listing what was not delivered since;
- at interpreter exit an open tracker gets ``flush_timeout`` seconds, then a WARNING says how
  many events remain and where (the spool, or lost); a signal there ends it, quietly
  (``exit_signals``);
- ``spool=``: every event is on disk (``_track.spool``) before ``track`` returns;
- after ``os.fork()`` the child's tracker starts empty, with its own connections, and never
  sends the parent's events (a spooled tracker refuses to be used in the child: open one
  there, with its own spool).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from .._core import (
    ChurnConnectorError,
    ClientConfig,
    ConfigurationError,
    IdFormat,
    QueueFull,
    TransportError,
)
from .._delivery import HttpPoster, SizeLimit, Spend, deliver
from .._validate import TrackingPlan
from .book import Book, Entry, FlushReport
from .exit_signals import exit_begins, flushing_at_exit, signalled
from .handles import _SLICE, TrackHandle
from .scalar import PlanSource, event_of, planned
from .spool import Spool

if TYPE_CHECKING:
    import requests

__all__ = ["OnFull", "Tracker"]

log = logging.getLogger("churn_connector")

OnFull = Literal["block", "raise", "spill"]


class Tracker:
    """Buffered one-off events (see the module docstring); from ``client.tracker()``."""

    def __init__(
        self,
        config: ClientConfig,
        session: requests.Session | None = None,
        *,
        spool: str | os.PathLike[str] | None = None,
        max_queue: int = 10_000,
        on_full: OnFull = "block",
        block_timeout: float = 30.0,
        flush_timeout: float = 5.0,
        max_concurrency: int | None = None,
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
        self.config = config
        self.session = session
        self.on_full = on_full
        self.block_timeout = block_timeout
        self.flush_timeout = flush_timeout
        self.plan = plan
        self.concurrency = max_concurrency or min(4, config.max_concurrency)
        self._spool = Spool(spool) if spool is not None else None
        self._setup(Book(max_queue, self._spool, config.batch_size))
        _live.add(self)
        exit_begins(_any_open)  # a signal as the exit begins is quiet (exit_signals)
        if self._book.backlog:
            log.info(
                "tracker: %s event(s) left in the spool %s are sent first",
                f"{self._book.backlog:,}",
                self._spool.path if self._spool else "",
            )
            self._start()

    def _setup(self, book: Book) -> None:
        self._book = book
        # what its requests share (made anew in a forked child: no lock of the parent's)
        self._spend = spend_of(self.config)
        self._cond = threading.Condition(book.lock)
        self._admit = threading.Lock()
        self._poster: HttpPoster | None = None
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._closed = False
        self._forked_spool = False
        self._stop_waiting: Callable[[], bool] = _never  # at exit: a signal came
        self._pid = os.getpid()

    @property
    def spool(self) -> str | None:
        """The spool's path (None without one)."""
        return self._spool.path if self._spool is not None else None

    def __repr__(self) -> str:
        return f"Tracker(spool={self.spool!r}, pending={self._book.pending()})"

    # -- tracking -----------------------------------------------------------------------
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
    ) -> TrackHandle:
        """Validate one event (``DataValidationError`` here when invalid) and queue it;
        its handle. The arguments are :meth:`Client.track`'s. With a spool, the event is
        on disk when this returns."""
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
        self._usable()
        handle = TrackHandle(event.message_id)
        entry = Entry(event.message_id, event.body, event.ms, None, handle._resolve)
        if self._spool is None:
            with self._cond:
                self._wait_for_room()
                self._book.admit(entry)
                self._cond.notify()
        else:
            # producers take turns writing the spool (its order is the sending order)
            if not self._admit.acquire(
                timeout=self.block_timeout if self.on_full == "block" else -1
            ):
                raise self._full()
            try:
                if self.on_full != "spill":
                    with self._cond:
                        self._wait_for_room()
                entry.seq = self._spool.add(event.message_id, event.ms, event.body)
                with self._cond:
                    self._book.admit(entry)
                    self._cond.notify()
            finally:
                self._admit.release()
        self._start()
        return handle

    def _wait_for_room(self) -> None:
        """With the lock held: return when the queue has room, or raise QueueFull."""
        book = self._book
        if book.has_room() or self.on_full == "spill":
            return
        if self.on_full == "block":
            deadline = time.monotonic() + self.block_timeout
            while not book.has_room():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if book.has_room():
                return
        raise self._full()

    def _full(self) -> QueueFull:
        waited = f" for {self.block_timeout:g} s" if self.on_full == "block" else ""
        return QueueFull(
            f"the tracker's queue is full ({self._book.max_queue:,} events waited{waited}); "
            "the event was not queued. Raise max_queue, send fewer, or pass a spool with "
            "on_full='spill'",
            max_queue=self._book.max_queue,
        )

    def _usable(self) -> None:
        if self._pid != os.getpid():
            _forked(self)
        if self._forked_spool:
            raise ConfigurationError(
                "this tracker's spool belongs to the parent process: after a fork, open a "
                "tracker in the child (with a spool of its own)"
            )
        if self._closing:
            raise ConfigurationError("the tracker is closed")

    # -- sending ------------------------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._threads or self._closing:
                return
            for i in range(self.concurrency):
                thread = threading.Thread(target=self._work, name=f"churn-tracker-{i}", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # at interpreter exit (3.12+): what is queued is reported
                    log.warning("tracker: cannot start a sender at interpreter exit")
                    return
                self._threads.append(thread)

    def _sender(self) -> HttpPoster:
        with self._cond:
            if self._poster is None:
                # each request has the whole deadline: a tracker lives for as long as it runs
                self._poster = HttpPoster(
                    self.config, self.concurrency, session=self.session, deadline="call"
                )
            return self._poster

    def _work(self) -> None:
        book = self._book
        while True:
            with self._cond:
                while not book.waiting and not (book.backlog and not book.loading):
                    if self._closing and book.idle():
                        return
                    self._cond.wait()
                if book.needs_load():
                    book.loading = True
                    load = True
                else:
                    load = False
                    chunk = book.take()
            if load:
                book.load()
                continue
            if chunk:
                self._send(chunk)
            with self._cond:
                self._cond.notify_all()

    def _send(self, chunk: list[Entry]) -> None:
        """One request for ``chunk``, sent and landed as a batch's requests are (``Trip``)."""
        poster = self._sender()
        trip = Book.trip(chunk, self._spend)
        try:
            deliver(trip.landing, poster, trip.request)
        except TransportError as exc:
            with self._cond:
                dropped = self._poster is poster
                if dropped:
                    self._poster = None  # it stopped itself; the next request opens anew
            if dropped:  # its connections and their watchdog thread go with it
                poster.close()
            trip.stop(exc)
        except Exception as exc:  # a bug of ours must not kill the sender and hang flush()
            log.exception("tracker: sending a request failed")
            trip.stop(ChurnConnectorError(repr(exc)))
        self._book.land(chunk, trip)

    # -- flushing and closing -------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> FlushReport:
        """Wait until every queued event is delivered or has failed (at most ``timeout``
        seconds); the report of what happened since the previous one."""
        if not self._book.idle():
            self._start()  # never a thread for nothing: at exit, 3.12 refuses new ones
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._book.idle():
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._stop_waiting():
                    break
                # in slices: an untimed wait is deaf to Ctrl-C once polars is imported
                self._cond.wait(_SLICE if left is None else min(left, _SLICE))
        return self._book.report()

    def close(self, timeout: float | None = None) -> FlushReport:
        """Flush (at most ``timeout`` seconds), stop the senders, and close; what is left is
        ``failed`` (with a spool it stays there for the next tracker)."""
        if self._pid != os.getpid():
            _forked(self)
        if self._closed:
            return self._book.report()
        if self._forked_spool:
            self._closed = True
            return self._book.report()
        report = self.flush(timeout)
        with self._cond:
            self._closing = True
            poster = self._poster
            self._cond.notify_all()
        if not self._book.idle():
            if poster is not None:
                poster.stop("the tracker was closed")
            self._book.abandon("the tracker was closed")
        for thread in self._threads:
            thread.join(timeout=5.0)
        if poster is not None:
            poster.close()
        if self._spool is not None:
            self._spool.close()
        self._closed = True
        _live.discard(self)
        return _merge(report, self._book.report())

    def __enter__(self) -> Tracker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        interrupted = exc is not None and not isinstance(exc, Exception)
        report = self.close(self.flush_timeout if interrupted else None)
        if exc is None:
            report.raise_for_failures()
        elif not report.ok:
            log.warning("tracker: %s", _left_behind(report))

    def _at_exit(self) -> None:
        """The interpreter is ending: flush within ``flush_timeout``, then say what is
        left. A signal during the wait ends it at once, without a traceback; any other,
        or one before it, is taken quietly (``exit_signals``)."""
        self._stop_waiting = signalled  # a signal ends the flush's wait at its next slice
        try:
            report = self.close(self.flush_timeout)
        except KeyboardInterrupt:  # Python's own handler, where ours could not be set
            with self._cond:
                self._closing = True
                poster = self._poster
            if poster is not None:
                poster.stop("interrupted at exit")
            self._book.abandon("interrupted at exit")
            report = self._book.report()
        if not report.ok:
            log.warning("tracker at exit: %s", _left_behind(report))


def _never() -> bool:
    return False


def _merge(first: FlushReport, then: FlushReport) -> FlushReport:
    return FlushReport(
        first.delivered + then.delivered,
        first.undelivered + then.undelivered,
        then.pending,
        first.n_delivered + then.n_delivered,
        first.spool,
    )


def _left_behind(report: FlushReport) -> str:
    n = len(report.undelivered) + len(report.pending)
    if report.spool is not None:
        kept = sum(1 for u in report.undelivered if u.state == "failed") + len(report.pending)
        return (
            f"{n:,} event(s) not delivered ({report.summary()}); {kept:,} remain in the "
            f"spool {report.spool}, which the next tracker opened on it sends first"
        )
    return (
        f"{n:,} event(s) not delivered ({report.summary()}) and lost: there is no spool "
        "(pass spool=<path> to keep them across exits)"
    )


def spend_of(config: ClientConfig) -> Spend:
    """What a tracker's requests share, as a run's do: the size limit (``max_request_bytes``,
    then what 413s teach) and the bisection budget (``bisect_rejected``,
    ``max_split_requests``, for the tracker's whole life)."""
    return Spend(
        bisect=config.bisect_rejected,
        split_budget=config.max_split_requests,
        size_limit=SizeLimit(config.max_request_bytes),
    )


# -- process exit and fork ------------------------------------------------------------------
_live: weakref.WeakSet[Tracker] = weakref.WeakSet()


def _open_here() -> list[Tracker]:
    return [t for t in list(_live) if t._pid == os.getpid() and not t._closed]


@atexit.register
def _flush_at_exit() -> None:
    trackers = _open_here()
    if not trackers:
        return
    with flushing_at_exit():
        for tracker in trackers:
            tracker._at_exit()


def _any_open() -> bool:
    return bool(_open_here())


def _before_fork() -> None:
    for tracker in list(_live):
        tracker._book.lock.acquire()


def _after_fork_in_parent() -> None:
    for tracker in list(_live):
        if tracker._book.lock.locked():
            tracker._book.lock.release()


def _after_fork_in_child() -> None:
    for tracker in list(_live):
        _forked(tracker)


def _forked(tracker: Tracker) -> None:
    """Make a tracker copied into a forked child its own: empty, no threads, no sockets;
    the parent's events are the parent's (their handles say so)."""
    old = tracker._book
    parent = tracker._pid
    spool = tracker._spool
    tracker._setup(Book(old.max_queue, None, old.batch_size))
    if spool is not None:
        spool.abandon()
        tracker._spool = None
        tracker._forked_spool = True
    error = ChurnConnectorError(
        f"tracked by the parent process (pid {parent}), which delivers it; a forked child "
        "never sends its parent's events"
    )
    for entry in [*old.waiting, *old.in_flight.values()]:
        if entry.resolve is not None:
            entry.resolve(None, error)


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)
