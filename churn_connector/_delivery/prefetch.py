"""Build requests on a thread of their own, ahead of the network.

Reading, validating and wiring a slice takes a while (~0.1 s for 50k events); done on the
thread that hands requests to the workers, the workers would idle through it once per
slice. Here a producer thread keeps up to ``ahead`` requests ready instead, so sending
and building overlap; most of the building runs in Arrow and numpy, outside the GIL.

The caller's own objects stay on the caller's thread: a generator, a database cursor
(``pd.read_sql(..., chunksize=)`` over a sqlite3 connection), a DuckDB relation or an ADBC
reader may only work there. Such a source comes through a ``Handoff``: the caller's thread
reads it, a slice or two ahead, whenever it would otherwise wait (``get_feeding``), and
the producer thread builds requests from what was read. Inputs the package reads itself
(files, in-memory frames and tables) need no handoff.
"""

from __future__ import annotations

import contextvars
import queue
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
Q = TypeVar("Q", covariant=True)

_PUT_EVERY = 0.05  # seconds: how often a blocked thread looks whether it should stop
# after a stop: how long to wait for the item being built (the book no longer takes what a
# builder that outlives this adds, so a blocked input never holds the caller)
_JOIN_SECONDS = 0.5
HANDOFF_AHEAD = 2  # slices of a caller's source read ahead of the one being built


class DeadlinePassed(BaseException):
    """The run's deadline passed while it waited for its input: the rest is not read."""


@contextmanager
def ends_at(deadline: float | None) -> Iterator[None]:
    """Within the block, raise ``DeadlinePassed`` in it at ``deadline``, even while it is
    blocked in the caller's own code (a generator, a cursor that waits on a server).

    A SIGALRM timer, so only on the main thread and only where nobody else uses one (the
    caller's handler and timer are left alone; then a blocked read cannot be cut short).
    """
    if (
        deadline is None
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL
        or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)
    ):
        yield
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlinePassed

    def ring(signum: int, frame: FrameType | None) -> None:
        raise DeadlinePassed

    signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


class _End:
    """The source is exhausted (``error`` None) or raised ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class Handoff(Generic[T]):
    """A source only the thread that made the handoff may read: that thread reads it with
    ``pull``, another thread takes the items with ``items()``, in order."""

    def __init__(self, source: Iterator[T], ahead: int = HANDOFF_AHEAD) -> None:
        self._source = source
        self._queue: queue.Queue[T | _End] = queue.Queue(maxsize=max(1, ahead))
        self._read_all = False
        self._stop = threading.Event()

    @property
    def wants(self) -> bool:
        """Whether ``pull`` would read: the source goes on and there is room ahead."""
        return not self._read_all and not self._queue.full()

    def pull(self, deadline: float | None = None) -> None:
        """Read the next item of the source (on the thread that made the handoff).

        The end of the source, or its error, is queued behind the items read before, so
        everything read is built before the error is raised. An interrupt (a
        ``BaseException``) is not the source's error: it propagates here, at once; so does
        ``DeadlinePassed`` when ``deadline`` passes while the source is read.
        """
        try:
            with ends_at(deadline):
                item: T | _End = next(self._source)
        except StopIteration:
            item = _End()
        except Exception as exc:  # raised on the other side, after the items before it
            item = _End(exc)
        if isinstance(item, _End):
            self._read_all = True
        self._queue.put(item)

    def items(self) -> Iterator[T]:
        """The source's items (on the building thread) until it ends or ``close()``."""
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=_PUT_EVERY)
            except queue.Empty:
                continue
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item

    def close(self) -> None:
        """Stop handing over; close the source here (a generator's clean-up runs now)."""
        self._stop.set()
        self._read_all = True
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


class _Gets(Protocol[Q]):
    def get(self, *, timeout: float | None = None) -> Q: ...


def get_feeding(source: _Gets[T], feed: Handoff[Any] | None, deadline: float | None = None) -> T:
    """``source.get()``; while it would wait, the caller's thread reads ``feed`` ahead, until
    ``deadline`` (then ``DeadlinePassed`` if it is still reading)."""
    while True:
        if feed is not None and feed.wants and (deadline is None or time.monotonic() < deadline):
            try:
                return source.get(timeout=0)
            except queue.Empty:
                feed.pull(deadline)
                continue
        try:
            # never an untimed wait on this thread: once polars is imported (2.1 here), a
            # signal may land on one of its native threads, and the handler runs only when
            # this, the main, thread wakes up; Ctrl-C would wait for an answer
            return source.get(timeout=_PUT_EVERY)
        except queue.Empty:
            continue


class Prefetch(Generic[T]):
    """Iterate ``source`` on a daemon thread; ``take()`` returns its items in order, then
    None; an exception of the source is raised by ``take()`` where it occurred.

    ``feed``: the handoff ``source`` is built from, read by the thread that calls ``take``.
    The producer runs in a copy of the caller's context (``contextvars``), so what the
    caller set there (how messages name options) holds while it builds.
    """

    def __init__(
        self,
        source: Iterable[T],
        ahead: int,
        feed: Handoff[Any] | None = None,
        warm: tuple[threading.Event, int] | None = None,
    ) -> None:
        self._queue: queue.Queue[T | _End] = queue.Queue(maxsize=max(1, ahead))
        self._stop = threading.Event()
        # (started, enough): until ``started`` is set, nothing more is built while ``enough``
        # items wait (see ``_warm_up``)
        self._warm = warm
        self._ended = False
        self.read_all = False  # the source was iterated to its end
        self._feed = feed
        self._items = iter(source)
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run,
            args=(self._produce, self._items),
            name="churn-build",
            daemon=True,
        )
        self._thread.start()

    def _produce(self, items: Iterator[T]) -> None:
        end = _End()
        try:
            while True:
                self._warm_up()
                try:
                    item = next(items)
                except StopIteration:
                    break
                if not self._put(item):
                    return
            self.read_all = True
        except BaseException as exc:  # handed to the consumer, raised there
            end = _End(exc)
        self._put(end)

    def _warm_up(self) -> None:
        """Wait while the consumer warms up with enough items ready: building holds the
        GIL in stretches of the switch interval (5 ms), and each of the hand-offs that put
        a first request on the wire waited for one (64 identify workers took 0.3 s to be
        all in flight while the rest of the first slice was validated)."""
        if self._warm is None:
            return
        started, enough = self._warm
        while not started.is_set() and self._queue.qsize() >= enough and not self._stop.is_set():
            started.wait(_PUT_EVERY)
        if started.is_set():
            self._warm = None

    def _put(self, item: T | _End) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_PUT_EVERY)
                return True
            except queue.Full:
                continue
        return False

    def take(self, deadline: float | None = None) -> T | None:
        """The next item, None at the end; raises what the source raised, and
        ``DeadlinePassed`` once ``deadline`` has passed (the rest is not read)."""
        if self._ended:
            return None
        item = get_feeding(self._queue, self._feed) if deadline is None else self._before(deadline)
        if isinstance(item, _End):
            self._ended = True
            if item.error is not None:
                raise item.error
            return None
        return item

    def _before(self, deadline: float) -> T | _End:
        """The next item if it comes before ``deadline``; else ``DeadlinePassed``."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlinePassed
            if self._feed is not None and self._feed.wants:
                try:
                    return self._queue.get(timeout=0)
                except queue.Empty:
                    self._feed.pull(deadline)
                    continue
            try:
                return self._queue.get(timeout=min(left, _PUT_EVERY))
            except queue.Empty:
                continue

    def close(self) -> None:
        """Stop building; wait a moment for the item being built (a builder blocked on its
        input is left behind: it is a daemon thread, and the book is closed to it)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._feed is not None:
            self._feed.close()  # the producer stops waiting for the caller's source
        self._thread.join(timeout=_JOIN_SECONDS)
        close = getattr(self._items, "close", None)
        if close is not None and not self._thread.is_alive():
            close()  # a generator's clean-up (an open file) runs now, not at collection
