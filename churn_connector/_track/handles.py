"""A tracked event's handle, for a thread (``TrackHandle``) and for an event loop
(``AsyncTrackHandle``): its ``message_id`` at once, its ``TrackResult`` or error once sent."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol

from .send import TrackResult

__all__ = ["AsyncTrackHandle", "TrackHandle"]


class _Flag(Protocol):
    def set(self) -> None: ...
    def is_set(self) -> bool: ...


class _Handle:
    """What a thread's and an event loop's handle share: the id, the outcome once known."""

    __slots__ = ("__weakref__", "_done", "_error", "_result", "message_id")
    _done: _Flag

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self._result: TrackResult | None = None
        self._error: BaseException | None = None

    def _resolve(self, result: TrackResult | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def _outcome(self) -> TrackResult:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def __repr__(self) -> str:
        state = "pending" if not self.done() else "failed" if self._error else "sent"
        return f"{type(self).__name__}({self.message_id!r}, {state})"


class TrackHandle(_Handle):
    """One tracked event: its ``message_id`` now, its :class:`TrackResult` once sent."""

    __slots__ = ()
    _done: threading.Event

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self._done = threading.Event()

    def result(self, timeout: float | None = None) -> TrackResult:
        """Wait for the event's delivery; its TrackResult, or the error that ended it
        (``DeliveryError``, ``AuthenticationError``, ...). ``TimeoutError`` when it is
        still pending after ``timeout`` seconds."""
        if not _wait(self._done, timeout):
            raise TimeoutError(f"event {self.message_id} is still pending")
        return self._outcome()


class AsyncTrackHandle(_Handle):
    """One event tracked from async code: its ``message_id``, then its TrackResult."""

    __slots__ = ()
    _done: asyncio.Event

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self._done = asyncio.Event()

    async def result(self, timeout: float | None = None) -> TrackResult:
        """The TrackResult once delivered, or the error that ended the event;
        ``TimeoutError`` after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            await self._done.wait()
        return self._outcome()


_SLICE = 0.2  # seconds: the longest a caller's wait goes without looking for Ctrl-C


def _wait(event: threading.Event, timeout: float | None) -> bool:
    """``event.wait(timeout)`` in slices: an untimed wait on a lock is not woken by SIGINT
    once polars is imported (2.1 here), so Ctrl-C would wait for the event."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.is_set():
        left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
        if left <= 0:
            return False
        event.wait(left)
    return True
