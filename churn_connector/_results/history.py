"""Appending a send's receipt to its run history (``history=``), when the run ends: the
backends are ``_core.history``'s."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._core import Interrupted, RunStopped, StorageError, append_run
from .runs import now_utc, stopped_receipt

if TYPE_CHECKING:
    from .result import SendResult

__all__ = ["recorded"]

log = logging.getLogger("churn_connector")


def recorded(history: str | None, kind: str, deliver: Callable[[], SendResult]) -> SendResult:
    """Run ``deliver`` and append its receipt to ``history`` (None: none) when it ends, a
    run that stopped part way too. A history that cannot be written is a warning: the run's
    outcome stands."""
    if history is None:
        return deliver()
    started = now_utc()
    try:
        result = deliver()
    except (RunStopped, Interrupted) as exc:
        _append_soft(history, stopped_receipt("send", kind, exc, started))
        raise
    _append_soft(history, result.receipt())
    return result


def _append_soft(history: str, receipt: Mapping[str, Any]) -> None:
    try:
        append_run(history, receipt)
    except StorageError as exc:
        log.warning("%s: the run's outcome stands, its row is missing from the history", exc)
