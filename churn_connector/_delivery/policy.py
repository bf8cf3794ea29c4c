"""The delivery policy: what comes next for a request, decided for every caller, without I/O.

Like urllib3's ``Retry`` it makes no request and never sleeps. Given what an attempt saw
and the time, a request's ``Delivery`` says what comes next: ``Attempt`` (now, ended after
so many seconds), ``Wait`` (this long), ``Done`` (with this outcome) or ``Stop`` (end the
run with this error). One ``Policy`` per client or run holds what its requests share: the
429 pause, the request budget (``max_requests_per_second``), the breaker for a host that
cannot be reached (``fail_fast_after``), the deadline of a run, the back-off's random draws
and the retry log. Batch sends, ``track()``, the tracker and the async client and tracker
all decide here; the posters are shells that make one attempt on their transport and wait
the way their world waits (``transport``: an Event a stop interrupts; ``async_poster``:
``asyncio.sleep``).

Verdicts come from ``retry.decide``'s table, waits from ``retry.next_wait`` (full jitter,
``Retry-After`` up to its cap). Retry testing (``retry.instant_retries``) skips the back-off
and the pause, never the request budget, and trips the breaker at its third failure.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .._core import AuthenticationError, ClientConfig, TransportError, endpoint_of
from .answers import Outcome, OutcomeStatus, Said, trim, what_it_said
from .failures import NetworkFailure
from .pool import Answer
from .retry import RetryLog, RetrySink, Verdict, decide, next_wait, retry_testing

log = logging.getLogger("churn_connector")

DeadlineScope = Literal["run", "call"]
"""Whose ``deadline`` it is: a run's (a batch send: from the policy's start) or each
call's (``track()``, a tracker's requests: from the start of each request)."""

_TRIP_AFTER = 3  # failures of a streak before the breaker may end the run
_TRIP_SLACK = 0.05  # seconds a capped retry waits past the breaker's time


@dataclass(frozen=True, slots=True)
class Attempt:
    """Make one attempt now; end it after ``timeout`` seconds, saying ``reason``."""

    timeout: float
    reason: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait ``seconds`` (a stop may end it early), then ask ``Delivery.next``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Done:
    """The request is over: ``outcome`` says how."""

    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Stop:
    """End the run: stop every request (``reason`` says why), then raise ``error``."""

    error: TransportError
    reason: str


Step = Attempt | Wait | Done | Stop


@dataclass(frozen=True, slots=True)
class _Seen:
    """What one attempt saw: ``cause`` in a word (``HTTP 503``), ``error`` with the API's
    message, ``text`` the body (the key masked, trimmed)."""

    verdict: Verdict
    http_status: int | None = None
    error: str | None = None
    text: str | None = None
    retry_after: str | None = None
    unreachable: bool = False
    cause: str | None = None
    events: tuple[tuple[int, str], ...] = ()
    retryable: bool = True  # when unreachable: whether a later run may reach the host


class Policy:
    """What the requests of one client or run share, and the decisions made from it.

    Thread-safe (its state changes under one lock, never held while anyone waits);
    ``clock`` is ``time.monotonic`` unless a test drives time itself.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        deadline: DeadlineScope = "run",
        seed: int | None = None,
        on_retry: RetrySink | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.clock = clock
        where = endpoint_of(config.base_url)
        self.where = f"{where.host}:{where.port}"  # host and port, for messages
        self.per_call = deadline == "call"
        now = clock()
        seconds = config.deadline
        self.deadline = None if seconds is None or self.per_call else now + seconds
        self.retries = RetryLog(log, sink=on_retry)
        self.stopped: str | None = None  # why the run was stopped, once it was
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._paused_until = 0.0  # a 429's pause, for every request
        rate = config.max_requests_per_second
        self._interval = None if rate is None else 1.0 / rate
        self._next_slot = now  # the budget: attempts spaced 1 / rate apart, no burst
        self._streak_since: float | None = None  # the breaker: unreachable since, and how often
        self._streak = 0

    def delivery(self, path: str) -> Delivery:
        """A request to ``path`` begins: ask it what comes next."""
        return Delivery(self, path)

    def stop(self, reason: str) -> None:
        """Make no new attempts: every request still going ends (the first reason stays)."""
        with self._lock:
            if self.stopped is None:
                self.stopped = reason

    # -- the shared state -------------------------------------------------------------------
    def paused_for(self, now: float) -> float:
        """Seconds the 429 pause still holds every request back (not above zero: none)."""
        return self._paused_until - now

    def _pause(self, until: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, until)

    def _take_slot(self, now: float) -> float:
        """When the next attempt may go: a slot of the budget, taken (now without one)."""
        if self._interval is None:
            return now
        with self._lock:
            at = max(now, self._next_slot)
            self._next_slot = at + self._interval
        return at

    def _answered(self) -> None:
        if self._streak:
            with self._lock:
                self._streak_since, self._streak = None, 0

    def _trips(self, now: float) -> bool:
        """Note one unreachable-host failure; True when the run should stop: the host has
        been unreachable for ``fail_fast_after`` seconds, every attempt."""
        with self._lock:
            if self._streak_since is None:
                self._streak_since = now
            self._streak += 1
            lasted = now - self._streak_since >= self.config.fail_fast_after or retry_testing()
            return self._streak >= _TRIP_AFTER and lasted

    def _wait_cap(self, now: float) -> float:
        """The longest a retry waits during a streak: until the breaker may trip."""
        with self._lock:
            if self._streak_since is None:
                return float("inf")
            left = self._streak_since + self.config.fail_fast_after - now
        return max(0.0, left) + _TRIP_SLACK

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        with self._lock:
            return next_wait(self.config.retry, attempt, retry_after, self._rng)


class Delivery:
    """One request's way through the policy: ``next()`` before each attempt and after each
    wait, ``answered()`` or ``failed()`` after each attempt; each returns the next step."""

    __slots__ = (
        "_resume",
        "_seen",
        "_slot",
        "_unreachable_only",
        "attempts",
        "deadline",
        "path",
        "policy",
        "started",
    )

    def __init__(self, policy: Policy, path: str) -> None:
        self.policy = policy
        self.path = path
        now = policy.clock()
        self.started = now
        seconds = policy.config.deadline
        if policy.per_call:
            self.deadline = None if seconds is None else now + seconds
        else:
            self.deadline = policy.deadline
        self.attempts = 0
        self._slot: float | None = None  # the budget's slot taken for the next attempt
        self._resume = now  # the back-off's end
        self._unreachable_only = True  # every attempt so far found the host unreachable
        self._seen = _Seen("fail")

    def _left(self, now: float) -> float:
        return float("inf") if self.deadline is None else self.deadline - now

    def next(self) -> Step:
        """Before an attempt: wait (the back-off, a 429's pause, the budget), or make it."""
        policy = self.policy
        now = policy.clock()
        if policy.stopped is not None:
            return self._failed(_abandoned(policy.stopped, sent=self.attempts > 0), now)
        if now < self._resume:
            return Wait(self._resume - now)
        if self._slot is None:
            pause = policy.paused_for(now)
            if pause > 0 and not retry_testing():
                return Wait(pause)
            self._slot = policy._take_slot(now)  # one per attempt, retries included
        if self._slot > now:
            return Wait(self._slot - now)  # never skipped: testing does not lift a budget
        left = self._left(now)
        if left <= 0:
            return self._failed("deadline exceeded before the request could be delivered", now)
        self._slot = None
        self.attempts += 1
        limit = policy.config.request_timeout
        if left < limit:
            return Attempt(left, "deadline exceeded")
        return Attempt(limit, f"no complete answer within request_timeout ({limit:g} s)")

    def answered(self, answer: Answer) -> Step:
        """The attempt got an HTTP answer: judged by ``decide``, its text for people."""
        self.policy._answered()
        scrub = self.policy.config.api_key.scrub
        # masked, then trimmed; a body cut at the read limit may end in the key's first part
        text = None if answer.text is None else scrub(answer.text, cut=answer.cut)
        status, verdict = answer.status, decide(answer.status)
        said = Said() if verdict == "sent" else what_it_said(text, scrub)
        cause = f"HTTP {status}"
        return self._after(
            _Seen(
                verdict,
                status,
                f"{cause}: {said.message}" if said.message else cause,
                trim(text),
                answer.retry_after,
                cause=cause,
                events=tuple((i, f"{cause}: {m}") for i, m in said.events),
            )
        )

    def failed(self, failure: NetworkFailure) -> Step:
        """The attempt got no HTTP answer (``failures`` named why)."""
        policy = self.policy
        if failure.fatal:  # this machine cannot make requests: retrying will not help
            policy.stop(failure.message)
            error = TransportError(
                f"cannot send to the API at {policy.where}: {failure.message}. "
                "The run was stopped.",
                attempts=1,
                retryable=False,
            )
            return Stop(error, failure.message)
        if failure.unreachable and policy._trips(policy.clock()):
            return self._unreachable(failure.message, retryable=failure.retryable)
        return self._after(
            _Seen(
                decide(None, "network"),
                error=failure.message,
                unreachable=failure.unreachable,
                cause=failure.message,
                retryable=failure.retryable,
            )
        )

    def _after(self, seen: _Seen) -> Step:
        policy = self.policy
        now = policy.clock()
        self._seen = seen
        elapsed = now - self.started
        if policy.stopped is not None and seen.verdict != "sent":
            return self._failed(_abandoned(policy.stopped, sent=True), now)
        if seen.verdict == "sent":
            return Done(Outcome("sent", seen.http_status, self.attempts, elapsed, None, seen.text))
        if seen.verdict in ("stop_auth", "stop_endpoint"):
            policy.stop("the run was stopped")
            return Stop(_stop_error(seen, self.path, self.attempts), "the run was stopped")
        if seen.verdict in ("reject", "fail"):
            status: OutcomeStatus = "rejected" if seen.verdict == "reject" else "failed"
            outcome = Outcome(
                status, seen.http_status, self.attempts, elapsed, seen.error, seen.text, seen.events
            )
            return Done(outcome)
        if self.attempts >= policy.config.retry.max_attempts:
            if seen.unreachable and self._unreachable_only:
                return self._unreachable(seen.error or "unreachable", retryable=seen.retryable)
            return self._failed(seen.error, now)
        self._unreachable_only = self._unreachable_only and seen.unreachable
        wait = policy._backoff(self.attempts, seen.retry_after)
        if seen.unreachable:
            wait = min(wait, policy._wait_cap(now))
        if wait > self._left(now):
            return self._failed(f"{seen.error}; deadline would pass before the next retry", now)
        rate_limited = seen.http_status == 429
        if rate_limited:
            policy._pause(now + wait)  # one pause for every request, not each alone
        cause = seen.cause or seen.error or "failure"  # a word: lines per cause stay few
        policy.retries.note(cause, wait, rate_limited=rate_limited)
        if not retry_testing():
            self._resume = now + wait
        return self.next()

    def _failed(self, error: str | None, now: float) -> Done:
        seen = self._seen
        elapsed = now - self.started
        return Done(
            Outcome(
                "failed", seen.http_status, self.attempts, elapsed, error, seen.text, seen.events
            )
        )

    def _unreachable(self, cause: str, *, retryable: bool) -> Stop:
        """Stop the run: the API's host cannot be used at all."""
        self.policy.stop(cause)
        error = TransportError(
            f"cannot reach the API at {self.policy.where}: {cause}. The run was stopped.",
            attempts=1,
            retryable=retryable,
        )
        return Stop(error, cause)


def _abandoned(reason: str, *, sent: bool) -> str:
    """Why a request ended unfinished because the run stopped."""
    if sent:
        # it may have reached the server: whether it was stored is unknown
        return f"{reason}; outcome unknown, safe to re-send"
    return f"not sent: {reason}"


def _stop_error(seen: _Seen, path: str, attempts: int) -> TransportError:
    if seen.verdict == "stop_auth":
        return AuthenticationError(
            f"the API refused the key (HTTP {seen.http_status}); check CHURN_API_KEY. "
            "The run was stopped.",
            status=seen.http_status,
            attempts=attempts,
        )
    return TransportError(
        f"the API answered HTTP {seen.http_status} for {path}: check base_url "
        "(redirects are not followed: they would carry the key elsewhere). "
        "The run was stopped.",
        status=seen.http_status,
        attempts=attempts,
        retryable=False,  # the base URL must change
    )
