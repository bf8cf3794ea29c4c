"""HTTP transport: one pooled session, authenticated POSTs, retries, a shared 429 pause.

Every attempt of one request sends the same bytes. 401/403 stop the whole run at once.
Error texts name the failure, never the key or the URL.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from requests.utils import get_environ_proxies

from . import __version__
from ._config import ClientConfig
from ._exceptions import AuthenticationError, TransportError
from ._results import trim
from ._retry import RETRY_STATUSES, retry_testing, sleep

log = logging.getLogger("churn_connector")

BODY_LIMIT = 64 * 1024  # only a trimmed excerpt is kept; a huge or endless body is cut off
_NETWORK_ERRORS = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
)


@dataclass(frozen=True)
class Outcome:
    """How one request ended after its retries."""

    status: str  # "sent", "rejected" or "failed"
    http_status: int | None
    attempts: int
    elapsed_s: float
    error: str | None
    response: str | None


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


class Transport:
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
        key = config.api_key.reveal()
        auth = (
            {"Authorization": f"Bearer {key}"}
            if config.auth_header == "bearer"
            else {"X-API-Key": key}
        )
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            # an undecodable compressed 2xx body must not hide that the data was stored
            "Accept-Encoding": "identity",
            "User-Agent": f"churn-connector/{__version__}",
            **auth,
        }
        self.stop = threading.Event()
        self.gate = _PauseGate()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        deadline = config.retry.deadline
        self.deadline = None if deadline is None else time.monotonic() + deadline

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _time_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` with retries; raise AuthenticationError on 401/403."""
        policy = self.config.retry
        url = self.config.base_url + path
        timeout = (self.config.connect_timeout, self.config.read_timeout)
        started = time.monotonic()
        http_status: int | None = None
        error: str | None = None
        text: str | None = None
        attempt = 0
        while attempt < policy.max_attempts:
            self.gate.wait(self.stop)
            if self.stop.is_set():
                error = "run stopped before this request could be completed"
                break
            if self._time_left() <= 0:
                error = "deadline exceeded before the request could be delivered"
                break
            attempt += 1
            retry_after: str | None = None
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
                http_status, text = None, None
                error = f"{type(exc).__name__} on attempt {attempt}"
            except requests.RequestException as exc:
                # not a network fault: retrying cannot help; the message may quote headers
                error = f"{type(exc).__name__}: the request could not be made"
                return Outcome("failed", None, attempt, time.monotonic() - started, error, None)
            else:
                http_status = resp.status_code
                text = _body_text(resp)
                retry_after = resp.headers.get("Retry-After")
                resp.close()
                if 200 <= http_status < 300:
                    return Outcome(
                        "sent", http_status, attempt, time.monotonic() - started, None, text
                    )
                if http_status in (401, 403):
                    self.stop.set()
                    raise AuthenticationError(
                        f"the API refused the key (HTTP {http_status}); check CHURN_API_KEY. "
                        "The run was stopped.",
                        status=http_status,
                        attempts=attempt,
                    )
                if http_status in (404, 405) or 300 <= http_status < 400:
                    self.stop.set()
                    raise TransportError(
                        f"the API answered HTTP {http_status} for {path}: check base_url "
                        "(redirects are not followed: they would carry the key elsewhere). "
                        "The run was stopped.",
                        status=http_status,
                        attempts=attempt,
                    )
                error = f"HTTP {http_status}"
                if http_status not in RETRY_STATUSES:
                    return Outcome(
                        "rejected", http_status, attempt, time.monotonic() - started, error, text
                    )
            if attempt >= policy.max_attempts:
                break
            with self._rng_lock:
                wait = policy.wait_for(attempt, retry_after, self._rng)
            if wait > self._time_left():
                error = f"{error}; deadline would pass before the next retry"
                break
            if http_status == 429:
                self.gate.pause(wait)
            log.debug("retrying %s in %.2fs after %s", path, wait, error)
            sleep(wait, self.stop)
        return Outcome("failed", http_status, attempt, time.monotonic() - started, error, text)
