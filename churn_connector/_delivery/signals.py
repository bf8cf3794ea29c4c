"""SIGTERM ends a send the way Ctrl-C does: an exception in the main thread while it waits.

Airflow killing a task, ``docker stop`` and Kubernetes send SIGTERM, whose default action
kills the process at once and loses the accounting. While a send runs in the main thread
(and nobody else handles SIGTERM), it raises ``Terminated`` instead, so the run can abandon
its requests, account for every row and still write its result files.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(BaseException):
    """SIGTERM arrived while a send was running."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received signal {signum}")
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (main thread, default handler only).

    An orchestrator's own handler is left alone: the exception it raises while the send
    waits stops the run the same way.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_of(exc: BaseException) -> int | None:
    """The signal behind an interrupt, when one is known."""
    if isinstance(exc, Terminated):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return int(signal.SIGINT)
    return None
