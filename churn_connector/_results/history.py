"""What a send does when it ends: its receipt appended to its run history (``history=``;
the backends are ``_core.history``'s), its alert posted (``alert_webhook=``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._core import Interrupted, RunStopped, StorageError, append_run
from .alerts import post_alert
from .runs import now_utc, stopped_receipt

if TYPE_CHECKING:
    from .._delivery import SendOptions
    from .result import SendResult

__all__ = ["recorded"]

log = logging.getLogger("churn_connector")


def recorded(send: SendOptions, kind: str, deliver: Callable[[], SendResult]) -> SendResult:
    """Run ``deliver``; when it ends (a run that stopped part way too), append its receipt
    to ``send.history`` and post its alert to ``send.alert_webhook`` if it needs one. Neither
    fails the run: a history that cannot be written, an alert that cannot be posted, is a
    warning, and the run's outcome stands."""
    if send.history is None and send.alert_webhook is None:
        return deliver()
    started = now_utc()
    try:
        result = deliver()
    except (RunStopped, Interrupted) as exc:
        _ended(send, stopped_receipt("send", kind, exc, started))
        raise
    _ended(send, result.receipt())
    return result


def _ended(send: SendOptions, receipt: Mapping[str, Any]) -> None:
    if send.history is not None:
        try:
            append_run(send.history, receipt)
        except StorageError as exc:
            log.warning("%s: the run's outcome stands, its row is missing from the history", exc)
    if send.alert_webhook is not None and not receipt.get("dry_run"):
        post_alert(send.alert_webhook, receipt, send.alert_invalid)
