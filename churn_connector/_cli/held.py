"""Signals held while result files are written: a first SIGINT or SIGTERM waits until the
files are whole, then ends the program (130 / 143); a second one ends it at once."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Signalled", "signals_held"]


class Signalled(BaseException):
    """A signal arrived while the result files were written; they are complete now."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received signal {signum}")
        self.signum = signum


@contextmanager
def signals_held() -> Iterator[list[int]]:
    """Within the block a first SIGINT or SIGTERM is noted (in the list), not acted on;
    the default action comes back at once, so a second one ends the process."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)
        for name in _STOPPING:
            signal.signal(name, signal.SIG_DFL)

    previous = {name: signal.getsignal(name) for name in _STOPPING}
    for name in _STOPPING:
        signal.signal(name, hold)
    try:
        yield held
    finally:
        if not held:
            for name, handler in previous.items():
                signal.signal(name, handler)


_STOPPING = (signal.SIGINT, signal.SIGTERM)
