"""Alerts: one JSON message posted to a webhook (``alert_webhook``) when a run ends badly.

A run alerts when it ends with undelivered rows (``rejected`` or ``failed``: a run that
stopped part way has its unsent rows ``failed``), or with more invalid rows than
``alert_invalid`` allows (a number of rows or a share, as ``max_invalid`` takes them;
unset: any invalid row alerts). The message is Slack-compatible: a ``text`` line, and the
run's receipt under ``receipt`` (counts and ids; never a row's values, never the key). It is
posted up to :data:`ATTEMPTS` times (a connection error, a timeout, a 429 or a 5xx is tried
again); a failure to alert is a warning in the log (naming the webhook's host, not its
path, which often holds a token) and never fails the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .._validate import Threshold, ThresholdArg

__all__ = ["ATTEMPTS", "alert_reasons", "post_alert"]

log = logging.getLogger("churn_connector")

ATTEMPTS = 3
"""Posts of one alert at most."""
_PAUSES = (0.5, 2.0)  # before the second and the third
_TIMEOUT = 10.0


def alert_reasons(receipt: Mapping[str, Any], invalid_limit: ThresholdArg) -> list[str]:
    """Why the run of ``receipt`` alerts (none: it does not)."""
    counts = receipt.get("counts") or {}
    rows = int(receipt.get("rows") or 0)
    reasons = []
    undelivered = int(counts.get("rejected", 0)) + int(counts.get("failed", 0))
    if undelivered:
        reasons.append(f"{undelivered:,} valid rows not delivered")
    invalid = int(counts.get("invalid", 0))
    threshold = Threshold.parse(0 if invalid_limit is None else invalid_limit, "alert_invalid")
    if invalid > threshold.limit(rows):
        above = "" if invalid_limit is None else f", above {threshold}"
        reasons.append(f"{invalid:,} invalid rows{above}")
    return reasons


def post_alert(url: str, receipt: Mapping[str, Any], invalid_limit: ThresholdArg) -> bool:
    """Post the alert for ``receipt`` when it needs one; True when one was delivered."""
    reasons = alert_reasons(receipt, invalid_limit)
    if not reasons:
        return False
    text = (
        f"churn-connector {receipt.get('command', 'send')} {receipt.get('kind', '')}: run "
        f"{receipt.get('run_id')} ended with exit code {receipt.get('exit_code')}: "
        f"{'; '.join(reasons)} ({int(receipt.get('rows') or 0):,} rows read)"
    )
    body = {"text": text, "receipt": dict(receipt)}
    where = urlsplit(url).hostname
    said = ""
    import httpx  # noqa: PLC0415 - loaded on first use, as the sessions are

    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(_PAUSES[attempt - 1])
        try:
            answer = httpx.post(url, json=body, timeout=_TIMEOUT, follow_redirects=False)
        except httpx.HTTPError as exc:
            said = type(exc).__name__
            continue
        if answer.is_success:
            return True
        said = f"HTTP {answer.status_code}"
        if answer.status_code != 429 and answer.status_code < 500:
            break  # refused: trying again would be refused again
    log.warning(
        "alert to the webhook at %s not delivered (%s, %d attempts at most): the run's "
        "outcome stands",
        where,
        said,
        ATTEMPTS,
    )
    return False
