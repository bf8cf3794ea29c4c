"""Build requests on a thread of their own, ahead of the network.

Reading, validating and wiring a slice takes a while (~0.1 s for 50k events); done on the
thread that hands requests to the workers, the workers would idle through it once per
slice. Here a producer thread keeps up to ``ahead`` requests ready instead, so sending
and building overlap; most of the building runs in Arrow and numpy, outside the GIL.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_PUT_EVERY = 0.05  # seconds: how often a blocked producer looks whether it should stop
_JOIN_SECONDS = 10.0  # after a stop: at most this long for the item being built


class _End:
    """The source is exhausted (``error`` None) or raised ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class Prefetch(Generic[T]):
    """Iterate ``source`` on a daemon thread; ``take()`` returns its items in order, then
    None; an exception of the source is raised by ``take()`` where it occurred."""

    def __init__(self, source: Iterable[T], ahead: int) -> None:
        self._queue: queue.Queue[T | _End] = queue.Queue(maxsize=max(1, ahead))
        self._stop = threading.Event()
        self._ended = False
        self._items = iter(source)
        self._thread = threading.Thread(
            target=self._produce, args=(self._items,), name="churn-build", daemon=True
        )
        self._thread.start()

    def _produce(self, items: Iterator[T]) -> None:
        end = _End()
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            end = _End(exc)
        self._put(end)

    def _put(self, item: T | _End) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_PUT_EVERY)
                return True
            except queue.Full:
                continue
        return False

    def take(self) -> T | None:
        """The next item, None at the end; raises what the source raised."""
        if self._ended:
            return None
        item = self._queue.get()
        if isinstance(item, _End):
            self._ended = True
            if item.error is not None:
                raise item.error
            return None
        return item

    def close(self) -> None:
        """Stop building and wait for the item being built, so nothing changes after."""
        self._stop.set()
        self._thread.join(timeout=_JOIN_SECONDS)
        close = getattr(self._items, "close", None)
        if close is not None and not self._thread.is_alive():
            close()  # a generator's clean-up (an open file) runs now, not at collection
