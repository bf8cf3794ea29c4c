"""Signals while the interpreter exits with a tracker open: quiet, and they end the wait.

An open tracker flushes at exit (``tracker._flush_at_exit``). A Ctrl-C (or SIGTERM, where
the program set a handler for it) then ends that wait within a slice of it: the events left
are counted and the WARNING says so. The handler raises nothing: it notes the signal, which
the flush's wait looks at. Python's own handler raised ``KeyboardInterrupt`` wherever the
exit happened to be (logging's shutdown, the thread pool's exit, the except block that
counts what is left: each an "Exception ignored in ..." with a traceback), and once inside
a ``with`` of the tracker's lock, which it left held: the exit then waited for ever.

The handlers are set as the interpreter's exit begins (``threading``'s exit hooks, which
run before ``atexit``'s), only in the process that owns an open tracker, and put back after
the flush unless a signal came: then the rest of the exit keeps ignoring them, as the user
has already asked to stop.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

__all__ = ["exit_begins", "flushing_at_exit", "signalled"]

_SIGNALS = ("SIGINT", "SIGTERM")


class _State:
    def __init__(self) -> None:
        self.installed: dict[int, Any] = {}  # signal -> the handler it had before
        self.signalled = False


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    _state.signalled = True  # the exit's flush sees it at its next slice, and stops


def _install() -> None:
    if _state.installed:
        return
    for name in _SIGNALS:
        number = getattr(signal, name, None)
        if number is None:
            continue
        try:
            before = signal.getsignal(number)
            # SIGTERM left at its default ends the process at once, without a word: quiet
            if before in (signal.SIG_DFL, signal.SIG_IGN, None) and name != "SIGINT":
                continue
            signal.signal(number, _handler)
        except (ValueError, OSError):  # not the main thread or interpreter
            continue
        _state.installed[number] = before


def _restore() -> None:
    for number, before in _state.installed.items():
        with suppress(ValueError, OSError, TypeError):
            signal.signal(number, before)
    _state.installed.clear()


def exit_begins(any_open: Callable[[], bool]) -> None:
    """Have the handlers set as the exit begins, where ``any_open()`` says a tracker of this
    process is open: first of ``threading``'s exit hooks (they run last registered first,
    before ``atexit``'s), so called again as each tracker opens, when a hook registered
    since (``concurrent.futures``' on its import) would run before."""
    hooks = getattr(threading, "_threading_atexits", None)
    register = getattr(threading, "_register_atexit", None)
    if register is None or not isinstance(hooks, list):
        return  # not in this Python: the flush sets them (``flushing_at_exit``)
    if hooks and getattr(hooks[-1], "__self__", None) is _begin:
        return
    _begin.any_open = any_open
    if sys.unraisablehook is not _quiet_unraisable:
        _previous[0] = sys.unraisablehook
        sys.unraisablehook = _quiet_unraisable
    with suppress(RuntimeError):  # the exit has begun: too late for its hooks
        register(_begin.run)


_previous: list[Callable[[Any], object]] = [sys.unraisablehook]


def _quiet_unraisable(unraisable: Any) -> None:
    """A Ctrl-C that came as the exit began, before the handlers were set, is raised by
    Python's own handler inside its exit steps (joining threads, an ``atexit`` callback),
    which print it as "Exception ignored in ..." with a traceback: taken as a signal to
    the flush instead, quietly. Anything else goes to the hook that was."""
    while True:
        try:  # a second Ctrl-C may land in here too, while Python's handler is still set
            if unraisable.exc_type is not KeyboardInterrupt or not _at_exit(unraisable):
                break
            _state.signalled = True
            if signal.getsignal(signal.SIGINT) is not _handler:
                signal.signal(signal.SIGINT, _handler)  # the next one is noted, not raised
                _state.installed.setdefault(signal.SIGINT, signal.default_int_handler)
            return
        except KeyboardInterrupt:
            continue
    _previous[0](unraisable)


def _at_exit(unraisable: Any) -> bool:
    message = getattr(unraisable, "err_msg", None) or ""
    return (
        unraisable.object is threading
        or message.endswith("atexit callback")
        or not threading.main_thread().is_alive()
    )


class _Begin:
    any_open: Callable[[], bool] = staticmethod(lambda: False)

    def run(self) -> None:
        if self.any_open():
            _install()


_begin = _Begin()


def signalled() -> bool:
    """A signal came since the exit began."""
    return _state.signalled


@contextmanager
def flushing_at_exit() -> Iterator[None]:
    """Within: a signal is noted (``signalled``), never raised. After: the handlers that
    were, unless a signal came."""
    _install()
    try:
        yield
    finally:
        if not _state.signalled:
            _restore()
