"""The network seam: a Poster posts bytes to a path and says how it ended.

``HttpPoster`` is the real one (over ``_delivery.connections``): retries judged by
``retry.decide``, one 429 pause shared by all workers, a breaker that ends the run when the
host cannot be reached at all, and request and run deadlines that hold even against a
server that trickles its answer. ``DryRunPoster`` sends nothing; tests may script their own.
Every attempt of one request sends the same bytes. Texts never hold the key or the URL: an
answer's body is masked before it is read or trimmed, and its message (``what_it_said``)
becomes the error of the request's rows, or of one event's row where the answer names it.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from ..__version__ import __version__
from .._core import AuthenticationError, ClientConfig, SecretHeaders, TransportError
from .connections import ConnectionPool
from .failures import NetworkFailure
from .pool import Abort, Answer, Pool
from .retry import RetryLog, RetrySink, Verdict, decide, next_wait, retry_testing, sleep

if TYPE_CHECKING:
    import requests

log = logging.getLogger("churn_connector")

OutcomeStatus = Literal["sent", "rejected", "failed", "dry_run"]
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Outcome:
    """How one request ended after its retries.

    ``error``: why, for people (``HTTP 422: <the API's message>``); ``response``: the body,
    trimmed; ``event_errors``: (index in the request, the API's message for that event),
    where the answer names events (every row of the request carries ``error`` but these).
    """

    status: OutcomeStatus
    http_status: int | None
    attempts: int
    elapsed_s: float
    error: str | None
    response: str | None
    event_errors: tuple[tuple[int, str], ...] = ()


# what an echoed answer keeps: enough to read the error, never a whole body
RESPONSE_TEXT_LIMIT = 300
_EVENT_FIELD = re.compile(r"^(?:events)?\[\d+\]\.?")  # events[3].occurred_at -> occurred_at
_TAGS = re.compile(r"<[^>]*>")
_MESSAGE_KEYS = ("message", "detail", "title", "error_description", "description", "reason")


def trim(text: str | None, limit: int = RESPONSE_TEXT_LIMIT) -> str | None:
    """``text`` cut to ``limit`` characters (mask the key first: a key cut in two would
    no longer be found)."""
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True)
class Said:
    """What an answer's body says, for people: its message, and messages per event index."""

    message: str | None = None
    events: tuple[tuple[int, str], ...] = ()


def what_it_said(body: str | None, scrub: Callable[[str], str]) -> Said:
    """The message of an error body, whatever its shape: the sandbox's (and many APIs')
    ``{"error": {"message", "details": [{"index", "field", "message"}]}}``, a ``message``
    or ``detail`` member, JSON of another shape, HTML or plain text. Every text is masked
    with ``scrub`` (after JSON decoding too: an escaped key is a key), on one line, trimmed.
    """
    if not body or not body.strip():
        return Said()
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = _TAGS.sub(" ", body) if body.lstrip().startswith("<") else body
        return Said(_line(text, scrub))
    if not isinstance(parsed, dict):
        return Said(_line(body, scrub))
    inner = parsed.get("error")
    where = inner if isinstance(inner, dict) else parsed
    message = next((where[k] for k in _MESSAGE_KEYS if isinstance(where.get(k), str)), None)
    if message is None and isinstance(inner, str):
        message = inner
    if message is None and isinstance(where.get("code"), str):
        message = where["code"]
    details = where.get("details", parsed.get("details"))
    events: dict[int, list[str]] = {}
    for item in details if isinstance(details, list) else ():
        if not isinstance(item, dict) or type(item.get("index")) is not int:
            continue
        said = item.get("message")
        if not isinstance(said, str):
            continue
        field = item.get("field")
        field = _EVENT_FIELD.sub("", field) if isinstance(field, str) else ""
        events.setdefault(item["index"], []).append(f"{field}: {said}" if field else said)
    return Said(
        _line(message if message is not None else body, scrub),
        tuple((index, _line("; ".join(texts), scrub)) for index, texts in sorted(events.items())),
    )


def _line(text: str, scrub: Callable[[str], str]) -> str:
    return trim(" ".join(scrub(text).split())) or ""


class Poster(Protocol):
    """One method is the network: post ``body`` to ``path``, return how it ended.

    May raise ``TransportError`` (or ``AuthenticationError``) to stop the whole run.
    """

    def post(self, path: str, body: bytes) -> Outcome: ...

    def stop(self, reason: str) -> None:
        """Make no new attempts and abandon those in flight: the run is ending."""
        ...

    def close(self) -> None: ...


class DryRunPoster:
    """Sends nothing: every request is built and recorded as ``dry_run``."""

    def post(self, path: str, body: bytes) -> Outcome:
        return Outcome("dry_run", None, 0, 0.0, None, None)

    def stop(self, reason: str) -> None:
        pass

    def close(self) -> None:
        pass


class _PauseGate:
    """One pause shared by all workers after a 429, instead of each sleeping alone."""

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def wait(self, stop: threading.Event) -> None:
        while not stop.is_set():
            remaining = self._until - time.monotonic()
            if remaining <= 0:
                return
            sleep(min(remaining, 1.0), stop)
            if retry_testing():
                return


class _RateLimit:
    """At most ``rate`` attempts per second, shared by all workers (a token bucket holding
    one token: attempts are spaced ``1 / rate`` apart, so no burst exceeds the rate)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def wait(self, stop: threading.Event) -> None:
        """Take the next slot, waiting for it (a stop ends the wait at once)."""
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next)
            self._next = at + self.interval
        if at > now:
            # not retry.sleep: instant-retry test mode must not lift a rate limit
            stop.wait(at - now)


class _Breaker:
    """Ends the run when the host has been unreachable for ``after`` seconds, every attempt
    (or for all of one request's attempts).

    Connection refused, DNS and TLS failures do not heal by retrying each request eight
    times in every worker; any answer from the server resets the streak. While a streak
    lasts, retries wait at most until it may trip, so the run ends soon after ``after``.
    """

    def __init__(self, after: float) -> None:
        self.after = after
        self._since: float | None = None
        self._count = 0
        self._lock = threading.Lock()

    def answered(self) -> None:
        with self._lock:
            self._since, self._count = None, 0

    def unreachable(self) -> bool:
        """Note one failure; True when the run should stop."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since = now
            self._count += 1
            lasted = now - self._since >= self.after or retry_testing()
            return self._count >= 3 and lasted

    def wait_cap(self) -> float:
        """The longest a retry should sleep during a streak: until the breaker may trip."""
        with self._lock:
            if self._since is None:
                return float("inf")
            return max(0.0, self._since + self.after - time.monotonic()) + 0.05


@dataclass
class _Attempt:
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


class HttpPoster:
    """Posts JSON bytes to the API with the configured retry policy and deadlines; through
    the caller's ``requests.Session`` when one is given (see ``_delivery.session``)."""

    def __init__(
        self,
        config: ClientConfig,
        pool_size: int,
        seed: int | None = None,
        session: requests.Session | None = None,
        on_retry: RetrySink | None = None,
    ) -> None:
        self.config = config
        self.pool: Pool
        if session is None:
            self.pool = ConnectionPool(config, pool_size)
        else:
            # lazy: requests is only needed on this path, not to import the package
            from .session import SessionPool  # noqa: PLC0415

            self.pool = SessionPool(config, pool_size, session)
        self.headers = SecretHeaders(
            {
                "Content-Type": "application/json",
                "Accept": "application/json",
                # an undecodable compressed 2xx body must not hide that the data was stored
                "Accept-Encoding": "identity",
                "User-Agent": f"churn-connector/{__version__}",
                **config.api_key.auth_headers(config.auth_header),
            }
        )
        self._stop = threading.Event()
        self._stop_reason = ""
        self.gate = _PauseGate()
        self.breaker = _Breaker(config.fail_fast_after)
        rate = config.max_requests_per_second
        self.rate = None if rate is None else _RateLimit(rate)
        self.retries = RetryLog(log, sink=on_retry)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        deadline = config.deadline
        self.deadline = None if deadline is None else time.monotonic() + deadline

    def stop(self, reason: str) -> None:
        if not self._stop.is_set():
            self._stop_reason = reason
            self._stop.set()
        self.pool.abort_all(reason)

    def close(self) -> None:
        self.retries.flush()
        self.pool.close()

    def _time_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def _attempt(self, path: str, body: bytes) -> _Attempt:
        """One POST, judged by ``decide``."""
        limit = min(self.config.request_timeout, self._time_left())
        reason = (
            "deadline exceeded"
            if limit < self.config.request_timeout
            else f"no complete answer within request_timeout ({self.config.request_timeout:g} s)"
        )
        try:
            answer: Answer = self.pool.post(path, body, self.headers, Abort(limit, reason))
        except NetworkFailure as exc:
            if exc.fatal:  # this machine cannot make requests: retrying will not help
                self.stop(exc.message)
                raise TransportError(
                    f"cannot send to the API at {self.pool.where}: {exc.message}. "
                    "The run was stopped.",
                    attempts=1,
                    retryable=False,
                ) from None
            if exc.unreachable and self.breaker.unreachable():
                raise self._unreachable(exc.message, retryable=exc.retryable) from None
            return _Attempt(
                decide(None, "network"),
                error=exc.message,
                unreachable=exc.unreachable,
                cause=exc.message,
                retryable=exc.retryable,
            )
        self.breaker.answered()
        scrub = self.config.api_key.scrub
        # masked, then trimmed; a body cut at the read limit may end in the key's first part
        text = None if answer.text is None else scrub(answer.text, cut=answer.cut)
        status, verdict = answer.status, decide(answer.status)
        said = Said() if verdict == "sent" else what_it_said(text, scrub)
        cause = f"HTTP {status}"
        return _Attempt(
            verdict,
            status,
            f"{cause}: {said.message}" if said.message else cause,
            trim(text),
            answer.retry_after,
            cause=cause,
            events=tuple((i, f"{cause}: {m}") for i, m in said.events),
        )

    def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` with retries; raise AuthenticationError on 401/403."""
        policy = self.config.retry
        started = time.monotonic()
        seen = _Attempt("fail")
        attempt = 0
        error: str | None = None
        unreachable_only = True
        while attempt < policy.max_attempts:
            self.gate.wait(self._stop)
            if self.rate is not None:
                self.rate.wait(self._stop)  # one token per attempt, retries included
            if self._stop.is_set():
                error = _abandoned(self._stop_reason, sent=attempt > 0)
                break
            if self._time_left() <= 0:
                error = "deadline exceeded before the request could be delivered"
                break
            attempt += 1
            seen = self._attempt(path, body)
            error = seen.error
            elapsed = time.monotonic() - started
            if self._stop.is_set() and seen.verdict != "sent":
                error = _abandoned(self._stop_reason, sent=True)
                break
            if seen.verdict == "sent":
                return Outcome("sent", seen.http_status, attempt, elapsed, None, seen.text)
            if seen.verdict in ("stop_auth", "stop_endpoint"):
                self.stop("the run was stopped")
                raise _stop_error(seen, path, attempt)
            if seen.verdict in ("reject", "fail"):
                status: OutcomeStatus = "rejected" if seen.verdict == "reject" else "failed"
                return Outcome(
                    status, seen.http_status, attempt, elapsed, error, seen.text, seen.events
                )
            if attempt >= policy.max_attempts:
                if seen.unreachable and unreachable_only:
                    raise self._unreachable(error or "unreachable", retryable=seen.retryable)
                break
            unreachable_only = unreachable_only and seen.unreachable
            with self._rng_lock:
                wait = next_wait(policy, attempt, seen.retry_after, self._rng)
            if seen.unreachable:
                wait = min(wait, self.breaker.wait_cap())
            if wait > self._time_left():
                error = f"{error}; deadline would pass before the next retry"
                break
            if seen.http_status == 429:
                self.gate.pause(wait)
            cause = seen.cause or error or "failure"  # a word: lines per cause stay few
            self.retries.note(cause, wait, rate_limited=seen.http_status == 429)
            sleep(wait, self._stop)
        elapsed = time.monotonic() - started
        return Outcome("failed", seen.http_status, attempt, elapsed, error, seen.text, seen.events)

    def _unreachable(self, cause: str, *, retryable: bool) -> TransportError:
        """Stop the run: the API's host cannot be used at all."""
        self.stop(cause)
        return TransportError(
            f"cannot reach the API at {self.pool.where}: {cause}. The run was stopped.",
            attempts=1,
            retryable=retryable,
        )


def _abandoned(reason: str, *, sent: bool) -> str:
    """Why a request ended unfinished because the run stopped."""
    if sent:
        # it may have reached the server: whether it was stored is unknown
        return f"{reason}; outcome unknown, safe to re-send"
    return f"not sent: {reason}"


def _stop_error(seen: _Attempt, path: str, attempts: int) -> TransportError:
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
