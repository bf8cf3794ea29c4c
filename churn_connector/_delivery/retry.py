"""What an attempt's answer means, how long to wait before the next, and a switch for tests.

``decide`` is the one place that reads a status code or a failure: a first-match table,
tested row by row. Retried: network failures, 408, 429 and 5xx. Waits grow exponentially with
full jitter, ``Retry-After`` (seconds or an HTTP date) is honoured up to ``max_retry_after``.
Like stamina, ``set_retry_testing(True)`` (or the ``instant_retries()`` context manager)
keeps every retry but skips the waiting (the delivery policy reads the switch), so retry
tests run instantly.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal, Protocol

from .._core import RetryPolicy

Verdict = Literal["sent", "retry", "reject", "fail", "stop_auth", "stop_endpoint"]
"""sent: acknowledged · retry: try again after a wait · reject: the API refused the content
(bisect it) · fail: retrying cannot help, outcome unknown · stop_*: end the whole run."""

Failure = Literal["network", "local"]
"""A request without an HTTP answer: a network fault (retried) or a local error (not)."""

LOG_EVERY = 5.0  # seconds: at most one retry line per cause in that time

# first match wins; a status no row names is a failure with unknown outcome
STATUS_TABLE: tuple[tuple[range, Verdict], ...] = (
    (range(200, 300), "sent"),
    (range(401, 402), "stop_auth"),
    (range(403, 404), "stop_auth"),
    (range(404, 406), "stop_endpoint"),  # wrong base URL or path
    (range(300, 400), "stop_endpoint"),  # redirects are not followed: they would carry the key
    (range(408, 409), "retry"),
    (range(429, 430), "retry"),
    (range(500, 600), "retry"),
    (range(400, 500), "reject"),
)
FAILURE_TABLE: dict[Failure, Verdict] = {"network": "retry", "local": "fail"}

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # delta-seconds (fractions tolerated)
_testing = threading.Event()


def decide(status: int | None, failure: Failure | None = None) -> Verdict:
    """The verdict on one attempt: its HTTP status, or how it failed without one."""
    if status is None:
        return FAILURE_TABLE[failure or "network"]
    for statuses, verdict in STATUS_TABLE:
        if status in statuses:
            return verdict
    return "fail"


def set_retry_testing(enabled: bool) -> None:  # noqa: FBT001 (a switch, as in stamina)
    """Process-wide: keep retrying, but do not sleep between attempts (for test suites)."""
    if enabled:
        _testing.set()
    else:
        _testing.clear()


def retry_testing() -> bool:
    """True while retries skip their sleeps."""
    return _testing.is_set()


@contextmanager
def instant_retries() -> Iterator[None]:
    """Within the block, retries happen without waiting."""
    was = _testing.is_set()
    set_retry_testing(True)
    try:
        yield
    finally:
        set_retry_testing(was)


def next_wait(
    policy: RetryPolicy, attempt: int, retry_after: str | None, rng: random.Random
) -> float:
    """The wait before the next attempt: Retry-After when given (capped), else back-off."""
    parsed = parse_retry_after(retry_after)
    if parsed is not None:
        return min(parsed, policy.max_retry_after)
    return policy.backoff(attempt, rng)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


class RetrySink(Protocol):
    """Told of every retry: its cause and wait (``Progress.retried``)."""

    def __call__(self, cause: str, wait: float, *, rate_limited: bool = False) -> None: ...


class RetryLog:
    """Retries logged at WARNING with their cause, at most one line per cause every few
    seconds (with how many there were), so a flaky API does not flood the log."""

    def __init__(
        self, log: logging.Logger, every: float = LOG_EVERY, sink: RetrySink | None = None
    ) -> None:
        self.log = log
        self.every = every
        # where someone watches a bar (a notebook), each retry is told to it, and the lines
        # go to the log at INFO: a WARNING with no handler set up is printed on stderr
        self.sink = sink
        self.level = logging.WARNING if sink is None else logging.INFO
        self._pending: dict[str, int] = {}
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def note(self, cause: str, wait: float, *, rate_limited: bool = False) -> None:
        if self.sink is not None:
            self.sink(cause, wait, rate_limited=rate_limited)
        now = time.monotonic()
        with self._lock:
            count = self._pending.get(cause, 0) + 1
            if now - self._last.get(cause, -self.every) < self.every:
                self._pending[cause] = count
                return
            self._pending[cause] = 0
            self._last[cause] = now
        if rate_limited:
            self.log.log(
                self.level,
                "the API is rate limiting (HTTP 429): pausing every request for %.1f s%s",
                wait,
                _times(count),
            )
        else:
            self.log.log(self.level, "retrying after %s in %.1f s%s", cause, wait, _times(count))

    def flush(self) -> None:
        """Log the retries counted but not yet logged."""
        with self._lock:
            pending = {c: n for c, n in self._pending.items() if n}
            self._pending.clear()
        for cause, count in pending.items():
            self.log.log(self.level, "retried after %s%s", cause, _times(count))


def _times(count: int) -> str:
    return f" ({count} retries since the last line)" if count > 1 else ""
