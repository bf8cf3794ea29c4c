"""The caller's own ``requests.Session`` as the way to the API: mTLS (``session.cert``),
proxies with custom auth, ``session.auth``, mounted adapters.

``SessionPool`` has ``ConnectionPool``'s interface and maps requests' outcomes onto the same
``Answer`` / ``NetworkFailure``, so ``HttpPoster`` judges and retries them alike. The session
is never changed: the key goes in a header per request, redirects are not followed (the key
must not go to another host), and TLS verification is what the session says.

The limit: requests owns these sockets, so ``abort_all`` cannot wake a request blocked in a
read. Each read waits at most ``read_timeout``, less when the attempt's deadline is nearer: a
stalled server is cut off in time, but one that trickles its answer holds an attempt up to
``read_timeout`` per read. An interrupt still ends the run at once (the sender abandons what
is in flight); an abandoned request ends, unseen, on its worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import requests  # this module is imported only when a caller hands in a session

from .._core.config import KEY_HEADERS, ClientConfig, SecretHeaders, _is_loopback
from .._core.exceptions import ConfigurationError
from .connections import BODY_LIMIT, Abort, Answer, NetworkFailure, _failure

log = logging.getLogger("churn_connector")

_READ_CHUNK = 16 * 1024


def check_session(session: object, config: ClientConfig) -> None:
    """Refuse a session the package cannot use as it is, or options that would compete
    with it, naming the fix."""
    if not isinstance(session, requests.Session):
        raise ConfigurationError(
            f"session must be a requests.Session, got {type(session).__name__}; for other "
            "clients, configure ca_bundle=, proxy= and verify= on the Client instead"
        )
    owned = {"proxy=": config.proxy is not None, "ca_bundle=": config.ca_bundle is not None}
    owned |= {"verify=False": not config.verify, "trust_env=True": config.trust_env}
    if clashes := [name for name, given in owned.items() if given]:
        raise ConfigurationError(
            f"{', '.join(clashes)} cannot be combined with session=: the session decides how "
            "to connect; configure it there (session.proxies, session.verify = '<CA>.pem', "
            "session.trust_env)"
        )
    name = KEY_HEADERS[config.auth_header]
    if name in session.headers:  # case-insensitive
        raise ConfigurationError(
            f"the session's headers set {name}, the header the API key travels in; remove it "
            "from session.headers, or pass auth_header='x-api-key' to send the key in another"
        )
    url, parts = config.base_url, urlsplit(config.base_url)
    settings = session.merge_environment_settings(url, {}, None, session.verify, None)
    if settings["verify"] is False and not _is_loopback(parts.hostname or ""):
        raise ConfigurationError(
            "session.verify = False is refused for a non-loopback host: it would send the key "
            "to anyone in between; set session.verify = '<your CA>.pem' for a private CA"
        )
    proxy = requests.utils.select_proxy(url, settings["proxies"])
    if proxy is not None and parts.scheme != "https":
        raise ConfigurationError(
            "the session (or the environment, session.trust_env) names a proxy for a plain "
            "http:// base URL: the proxy would read the key; use https:// or unset the proxy"
        )


class _SessionAuth(requests.auth.AuthBase):
    """The session's own auth, if any, checked to leave the key's header alone. Given per
    request, it also keeps requests from reading ~/.netrc (whose password would replace the
    key)."""

    def __init__(self, inner: Any, header: str) -> None:
        if isinstance(inner, tuple) and len(inner) == 2:
            inner = requests.auth.HTTPBasicAuth(*inner)  # as requests itself does
        self.inner = inner
        self.header = header

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        if self.inner is None:
            return r
        before = r.headers.get(self.header)
        r = self.inner(r)
        if r.headers.get(self.header) != before:
            raise ConfigurationError(  # not a network failure: ends the run as it is
                f"session.auth set the {self.header} header the API key travels in; pass "
                "auth_header='x-api-key' to send the key in another"
            )
        return r


class SessionPool:
    """Posts through the caller's ``requests.Session``; at most ``size`` at once."""

    def __init__(self, config: ClientConfig, size: int, session: requests.Session) -> None:
        check_session(session, config)
        parts = urlsplit(config.base_url)
        self.config = config
        self.session = session
        self.base = config.base_url.rstrip("/")
        self.where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self._auth = _SessionAuth(session.auth, KEY_HEADERS[config.auth_header])
        self._aborted: str | None = None  # set by abort_all: the run is ending
        # no more in flight than the session's adapter keeps connections: beyond that,
        # urllib3 opens a connection per request, drops it, and warns each time
        kept = getattr(session.get_adapter(self.base), "_pool_maxsize", size)
        if isinstance(kept, int) and 0 < kept < size:
            log.info(
                "at most %d requests in flight, the connections the session's adapter keeps; "
                "for %d, mount requests.adapters.HTTPAdapter(pool_maxsize=%d) for the API",
                *(kept, size, size),
            )
            size = kept
        self._slots = threading.BoundedSemaphore(size)

    def post(self, path: str, body: bytes, headers: SecretHeaders, abort: Abort) -> Answer:
        """POST ``body``; the answer, or NetworkFailure."""
        ends = time.monotonic() + abort.after
        config = self.config
        with self._slots:
            left = ends - time.monotonic()
            if self._aborted is not None or left <= 0:
                raise NetworkFailure(self._aborted or abort.reason, unreachable=False)
            # a read waits no longer than the attempt may last (a stalled server is cut off)
            timeout = (min(config.connect_timeout, left), min(config.read_timeout, left))
            try:
                resp = self.session.post(
                    self.base + path,
                    data=body,
                    headers=dict(headers.items()),
                    auth=self._auth,
                    timeout=timeout,
                    # said again: else REQUESTS_CA_BUNDLE would override session.verify
                    verify=self.session.verify,
                    allow_redirects=False,  # a redirect would carry the key to another host
                    stream=True,
                )
            except requests.HTTPError as exc:  # a session hook's raise_for_status()
                if exc.response is None:
                    raise self._failure(exc, ends, abort) from None
                resp = exc.response
            except (requests.RequestException, OSError, ValueError) as exc:
                raise self._failure(exc, ends, abort) from None
            try:
                return self._answer(resp, ends, abort)
            except (requests.RequestException, OSError, ValueError) as exc:
                raise self._failure(exc, ends, abort) from None
            finally:
                resp.close()  # back to the session's pool when read whole, else closed

    def _answer(self, resp: requests.Response, ends: float, abort: Abort) -> Answer:
        """Read at most BODY_LIMIT bytes of the body as sent (no decoding), in time."""
        data = bytearray()
        while len(data) < BODY_LIMIT:
            if self._aborted is not None:
                raise NetworkFailure(self._aborted, unreachable=False)
            if time.monotonic() >= ends:
                raise NetworkFailure(abort.reason, unreachable=False)
            chunk = resp.raw.read(min(_READ_CHUNK, BODY_LIMIT - len(data)), decode_content=False)
            if not chunk:
                break
            data += chunk
        # whole (at most BODY_LIMIT): the key is masked before anything is trimmed
        text = bytes(data).decode("utf-8", "replace") if data else None
        return Answer(resp.status_code, text, resp.headers.get("Retry-After"))

    def _failure(self, exc: BaseException, ends: float, abort: Abort) -> NetworkFailure:
        if self._aborted is not None:
            return NetworkFailure(self._aborted, unreachable=False)
        if isinstance(exc, requests.Timeout) and time.monotonic() >= ends - 0.05:
            return NetworkFailure(abort.reason, unreachable=False)
        if isinstance(exc, requests.exceptions.ProxyError):
            return NetworkFailure(
                f"cannot use the proxy to reach {self.where}", unreachable=True, retryable=False
            )
        if isinstance(exc, requests.Timeout):
            connect = isinstance(exc, requests.ConnectTimeout)
            return NetworkFailure(f"{'connect' if connect else 'read'} timeout", unreachable=False)
        failure = _failure(
            _root(exc),
            self.where,
            # the fixes are the session's: its CA and its client certificate
            trust_fix="set session.verify to your CA",
            tls_fix="if it requires a client certificate (mTLS), set session.cert",
        )
        # TLS failures (a client certificate refused, say) fail every attempt alike
        if isinstance(exc, requests.exceptions.SSLError):
            failure.unreachable = True
            failure.retryable = False
        return failure

    def abort_all(self, reason: str) -> None:
        """Make no new attempts, and report those in flight as ended when they return.

        A request blocked in a read is not woken: requests owns that socket."""
        self._aborted = reason

    def close(self) -> None:
        """Nothing to release: the session and its connections are the caller's."""


def _root(exc: BaseException) -> BaseException:
    """The error underneath requests' and urllib3's wrappers (ConnectionRefusedError, ...)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError
        inner = reason if isinstance(reason, BaseException) else exc.__cause__
        if inner is None:
            inner = next((a for a in exc.args if isinstance(a, BaseException)), None)
        if inner is None:
            return exc
        exc = inner
    return exc
