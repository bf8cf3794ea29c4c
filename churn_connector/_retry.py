"""Retry policy: which failures are retried, how long to wait, and a switch for tests.

Retried: connection errors, timeouts, 408, 429 and 5xx. Waits grow exponentially with full
jitter, ``Retry-After`` (seconds or an HTTP date) is honoured up to ``max_retry_after``, and
an overall deadline bounds the whole run. Like stamina, ``set_retry_testing(True)`` (or the
``instant_retries()`` context manager) keeps every retry but skips the sleeping, so retry
tests run instantly.
"""

from __future__ import annotations

import email.utils
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

_SECONDS = re.compile(r"\d+(?:\.\d+)?")  # delta-seconds (fractions tolerated)
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))

_testing = threading.Event()


def set_retry_testing(enabled: bool) -> None:
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


def sleep(seconds: float, stop: threading.Event | None = None) -> None:
    """Sleep unless retry testing is on; wake early when ``stop`` is set."""
    if seconds <= 0 or _testing.is_set():
        return
    if stop is None:
        time.sleep(seconds)
    else:
        stop.wait(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a request (immutable)."""

    max_attempts: int = 8
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    max_retry_after: float = 120.0
    deadline: float | None = 3600.0  # seconds for the whole run; None = no deadline

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter exponential wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return rng.uniform(0, ceiling)

    def wait_for(self, attempt: int, retry_after: str | None, rng: random.Random) -> float:
        """The wait before the next attempt: Retry-After when given (capped), else back-off."""
        parsed = parse_retry_after(retry_after)
        if parsed is not None:
            return min(parsed, self.max_retry_after)
        return self.backoff(attempt, rng)


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
