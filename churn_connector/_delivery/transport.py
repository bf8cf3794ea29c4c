"""The network seam: a Poster posts bytes to a path and says how it ended.

``HttpPoster`` is the real one: one pooled ``requests`` session, authenticated POSTs,
retries by ``retry.decide``, a 429 pause shared by all workers. ``DryRunPoster`` builds
nothing on the wire. Tests may script their own. Every attempt of one request sends the same
bytes; 401/403 and a wrong endpoint stop the whole run. Error texts name the failure, never
the key or the URL.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Literal, Protocol

import requests
from requests.adapters import HTTPAdapter
from requests.utils import get_environ_proxies

from ..__version__ import __version__
from .._config import ClientConfig
from .._exceptions import AuthenticationError, TransportError
from .results import trim
from .retry import Verdict, decide, next_wait, retry_testing, sleep

log = logging.getLogger("churn_connector")

BODY_LIMIT = 64 * 1024  # only a trimmed excerpt is kept; a huge or endless body is cut off
_NETWORK_ERRORS = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
)

OutcomeStatus = Literal["sent", "rejected", "failed", "dry_run"]


@dataclass(frozen=True)
class Outcome:
    """How one request ended after its retries."""

    status: OutcomeStatus
    http_status: int | None
    attempts: int
    elapsed_s: float
    error: str | None
    response: str | None


class Poster(Protocol):
    """One method is the network: post ``body`` to ``path``, return how it ended.

    May raise ``TransportError`` (or ``AuthenticationError``) to stop the whole run.
    """

    def post(self, path: str, body: bytes) -> Outcome: ...

    def stop(self) -> None:
        """Make no new attempts: the run is ending."""
        ...

    def close(self) -> None: ...


class DryRunPoster:
    """Sends nothing: every request is built and recorded as ``dry_run``."""

    def post(self, path: str, body: bytes) -> Outcome:
        return Outcome("dry_run", None, 0, 0.0, None, None)

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def _body_text(resp: requests.Response) -> str | None:
    """The start of the body as text; never more than BODY_LIMIT bytes are read."""
    data = bytearray()
    try:
        for part in resp.iter_content(chunk_size=8192):
            data += part
            if len(data) >= BODY_LIMIT:
                break
    except requests.RequestException as exc:
        return f"<response body unreadable: {type(exc).__name__}>"
    return trim(bytes(data[:BODY_LIMIT]).decode("utf-8", "replace"))


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


@dataclass
class _Attempt:
    """What one attempt saw."""

    verdict: Verdict
    http_status: int | None = None
    error: str | None = None
    text: str | None = None
    retry_after: str | None = None


class HttpPoster:
    """Posts JSON bytes to the API with the configured retry policy."""

    def __init__(self, config: ClientConfig, pool_size: int, seed: int | None = None) -> None:
        self.config = config
        self.session = requests.Session()
        # trust_env off: a ~/.netrc would otherwise replace our Authorization header
        self.session.trust_env = False
        self.proxies = get_environ_proxies(config.base_url)
        adapter = HTTPAdapter(
            pool_connections=1, pool_maxsize=pool_size, pool_block=True, max_retries=0
        )
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            # an undecodable compressed 2xx body must not hide that the data was stored
            "Accept-Encoding": "identity",
            "User-Agent": f"churn-connector/{__version__}",
            **_auth_header(config),
        }
        self._stop = threading.Event()
        self.gate = _PauseGate()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        deadline = config.retry.deadline
        self.deadline = None if deadline is None else time.monotonic() + deadline

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.session.close()

    def _time_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def _attempt(self, url: str, body: bytes, number: int) -> _Attempt:
        """One POST, judged by ``decide``."""
        timeout = (self.config.connect_timeout, self.config.read_timeout)
        try:
            resp = self.session.post(
                url,
                data=body,
                headers=self.headers,
                timeout=timeout,
                allow_redirects=False,
                proxies=self.proxies,
                stream=True,  # status first: a body that fails to decode cannot hide it
            )
        except _NETWORK_ERRORS as exc:
            error = f"{type(exc).__name__} on attempt {number}"
            return _Attempt(decide(None, "network"), error=error)
        except requests.RequestException as exc:
            # not a network fault: retrying cannot help; the message may quote headers
            error = f"{type(exc).__name__}: the request could not be made"
            return _Attempt(decide(None, "local"), error=error)
        status = resp.status_code
        text = _body_text(resp)
        retry_after = resp.headers.get("Retry-After")
        resp.close()
        return _Attempt(decide(status), status, f"HTTP {status}", text, retry_after)

    def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` with retries; raise AuthenticationError on 401/403."""
        policy = self.config.retry
        url = self.config.base_url + path
        started = time.monotonic()
        seen = _Attempt("fail")
        attempt = 0
        error: str | None = None
        while attempt < policy.max_attempts:
            self.gate.wait(self._stop)
            if self._stop.is_set():
                error = "run stopped before this request could be completed"
                break
            if self._time_left() <= 0:
                error = "deadline exceeded before the request could be delivered"
                break
            attempt += 1
            seen = self._attempt(url, body, attempt)
            error = seen.error
            elapsed = time.monotonic() - started
            if seen.verdict == "sent":
                return Outcome("sent", seen.http_status, attempt, elapsed, None, seen.text)
            if seen.verdict in ("stop_auth", "stop_endpoint"):
                self._stop.set()
                raise _stop_error(seen, path, attempt)
            if seen.verdict in ("reject", "fail"):
                status: OutcomeStatus = "rejected" if seen.verdict == "reject" else "failed"
                return Outcome(status, seen.http_status, attempt, elapsed, error, seen.text)
            if attempt >= policy.max_attempts:
                break
            with self._rng_lock:
                wait = next_wait(policy, attempt, seen.retry_after, self._rng)
            if wait > self._time_left():
                error = f"{error}; deadline would pass before the next retry"
                break
            if seen.http_status == 429:
                self.gate.pause(wait)
            log.debug("retrying %s in %.2fs after %s", path, wait, error)
            sleep(wait, self._stop)
        elapsed = time.monotonic() - started
        return Outcome("failed", seen.http_status, attempt, elapsed, error, seen.text)


def _auth_header(config: ClientConfig) -> dict[str, str]:
    key = config.api_key.reveal()
    if config.auth_header == "bearer":
        return {"Authorization": f"Bearer {key}"}
    return {"X-API-Key": key}


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
    )
