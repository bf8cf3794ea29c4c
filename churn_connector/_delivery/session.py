"""The caller's own ``requests.Session`` as the way to the API: mTLS (``session.cert``),
proxies with custom auth, ``session.auth``, mounted adapters.

``SessionPool`` is a ``Pool`` like the package's own (``connections``) and maps requests'
outcomes onto the same ``Answer`` / ``NetworkFailure``, so ``HttpPoster`` judges and retries
them alike. The session is never changed: the key goes in a header per request, redirects
are not followed (the key must not go to another host), and TLS verification is what the
session says. What the session's own code raises (a hook, an auth, an adapter) stops the
run with a ``TransportError`` that names it; its traceback, whose frames hold the request's
headers and so the key, is dropped.

The limit: requests owns these sockets. Once the answer's head has arrived, the watchdog
and an interrupt end the attempt through urllib3's ``HTTPResponse.shutdown()``; before
that, nothing can wake a request blocked in a read. Each read waits at most
``read_timeout``, less when the attempt's deadline is nearer: a stalled server is cut off in
time, but one that trickles its answer's head holds an attempt up to ``read_timeout`` per
read. An interrupt still ends the run at once (the sender abandons what is in flight); an
abandoned request ends, unseen, on its worker thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import requests  # this module is imported only when a caller hands in a session

from .._core import (
    KEY_HEADERS,
    ChurnConnectorError,
    ClientConfig,
    ConfigurationError,
    SecretHeaders,
    TransportError,
    endpoint_of,
    is_loopback,
)
from .failures import NetworkFailure, classify, closed_without_answer
from .pool import BODY_LIMIT, Abort, Answer, Flight, Flights
from .trust import trust_of

log = logging.getLogger("churn_connector")

_READ_CHUNK = 16 * 1024
_NETWORK = (requests.RequestException, OSError)


def check_session(session: object, config: ClientConfig) -> None:
    """Refuse a session the package cannot use as it is, or options that would compete
    with it, naming the fix."""
    if not isinstance(session, requests.Session):
        raise ConfigurationError(
            f"session must be a requests.Session, got {type(session).__name__}; for other "
            "clients, configure ca_bundle=, proxy= and verify= on the Client instead"
        )
    owned = {"proxy=": config.proxy is not None, "ca_bundle=": config.ca_bundle is not None}
    owned |= {"ca_store='system'": config.ca_store != "certifi"}
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
    url, parts = config.base_url, endpoint_of(config.base_url)
    settings = session.merge_environment_settings(url, {}, None, session.verify, None)
    if settings["verify"] is False and not is_loopback(parts.host):
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


def _verify_of(session: requests.Session, config: ClientConfig) -> Any:
    """``session.verify``; where it is left at ``True`` and the session reads the environment
    (``trust_env``), the package's trust order instead (``trust``), of which requests alone
    reads only ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE``."""
    if session.verify is not True or not session.trust_env:
        return session.verify
    trust = trust_of(config)
    if trust.cafile is not None and trust.capath is not None:
        log.warning(
            "a requests session trusts one file or folder: SSL_CERT_FILE is trusted, "
            "SSL_CERT_DIR (%s) is not; set session.verify to choose",
            trust.capath,
        )
    return trust.cafile or trust.capath


class SessionPool:
    """Posts through the caller's ``requests.Session``; at most ``size`` at once."""

    def __init__(self, config: ClientConfig, size: int, session: requests.Session) -> None:
        check_session(session, config)
        parts = endpoint_of(config.base_url)
        self.config = config
        self.session = session
        self.base = config.base_url.rstrip("/")
        self.where = f"{parts.host}:{parts.port}"
        self.flights = Flights()
        self._auth = _SessionAuth(session.auth, KEY_HEADERS[config.auth_header])
        self._verify = _verify_of(session, config)
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
        """POST ``body``; the answer, or NetworkFailure; TransportError when the session's
        own code raised."""
        with self._slots, self.flights.flying(abort) as flight:
            closed = False
            while True:
                if flight.aborted is not None or flight.left() <= 0:
                    raise NetworkFailure(flight.aborted or abort.reason, unreachable=False)
                try:
                    return self._attempt(path, body, headers, flight)
                except _NETWORK as exc:
                    failure: NetworkFailure | None = self._failure(exc, flight)
                    # the stale keep-alive race looks like this: sent again at once, once
                    if not closed and not flight.answered and closed_without_answer(exc):
                        failure = None
                if failure is not None:
                    raise failure  # outside the except block: no context of requests' frames
                closed = True

    def _attempt(self, path: str, body: bytes, headers: SecretHeaders, flight: Flight) -> Answer:
        config = self.config
        # a read waits no longer than the attempt may last (a stalled server is cut off)
        left = flight.left()
        timeout = (min(config.connect_timeout, left), min(config.read_timeout, left))
        resp = self._send(path, body, headers, timeout)
        flight.answered = True
        try:
            raw = resp.raw
            if callable(getattr(raw, "shutdown", None)) and getattr(raw, "connection", None):
                flight.hold(raw)  # urllib3's HTTPResponse.shutdown(): the body's reads end
            return self._answer(resp, flight)
        except ValueError as exc:  # a read on a response shut down by an abort
            raise requests.ConnectionError(exc) from None
        finally:
            flight.finish()  # before the connection goes back: no abort may reach it after
            resp.close()  # back to the session's pool when read whole, else closed

    def _send(
        self, path: str, body: bytes, headers: SecretHeaders, timeout: tuple[float, float]
    ) -> requests.Response:
        """The session's answer to the POST; what the session's own code raises (a hook, an
        auth, an adapter) stops the run, without the frames that hold the key."""
        stop: ChurnConnectorError | None = None
        try:
            return self.session.post(
                self.base + path,
                data=body,
                headers=dict(headers.items()),
                auth=self._auth,
                timeout=timeout,
                # said again: else requests would read REQUESTS_CA_BUNDLE alone
                verify=self._verify,
                allow_redirects=False,  # a redirect would carry the key to another host
                stream=True,
            )
        except requests.HTTPError as exc:  # a session hook's raise_for_status()
            if exc.response is None:
                raise
            return exc.response
        except _NETWORK:
            raise
        except Exception as exc:  # the session's own code: its frames hold the key
            stop = _stopped_by_the_session(exc, self.config)
        assert stop is not None
        raise stop  # outside the except block: the session's frames are not kept

    def _answer(self, resp: requests.Response, flight: Flight) -> Answer:
        """Read at most BODY_LIMIT bytes of the body as sent (no decoding), in time."""
        data = bytearray()
        while len(data) < BODY_LIMIT:
            if flight.aborted is not None:
                raise NetworkFailure(flight.aborted, unreachable=False)
            if flight.left() <= 0:
                raise NetworkFailure(flight.reason, unreachable=False)
            chunk = resp.raw.read(min(_READ_CHUNK, BODY_LIMIT - len(data)), decode_content=False)
            if not chunk:
                break
            data += chunk
        if flight.aborted is not None:  # woken by an abort: the body is cut short
            raise NetworkFailure(flight.aborted, unreachable=False)
        # whole (at most BODY_LIMIT): the key is masked before anything is trimmed
        text = bytes(data).decode("utf-8", "replace") if data else None
        cut = len(data) >= BODY_LIMIT
        return Answer(resp.status_code, text, resp.headers.get("Retry-After"), cut)

    def _failure(self, exc: BaseException, flight: Flight) -> NetworkFailure:
        if flight.aborted is not None:
            return NetworkFailure(flight.aborted, unreachable=False)
        if isinstance(exc, requests.Timeout) and flight.left() <= 0.05:
            return NetworkFailure(flight.reason, unreachable=False)
        if isinstance(exc, requests.exceptions.ProxyError):
            return NetworkFailure(
                f"cannot use the proxy to reach {self.where}", unreachable=True, retryable=False
            )
        if isinstance(exc, requests.Timeout):
            connect = isinstance(exc, requests.ConnectTimeout)
            return NetworkFailure(f"{'connect' if connect else 'read'} timeout", unreachable=False)
        tls = isinstance(exc, requests.exceptions.SSLError)
        failure = classify(
            exc,
            self.where,
            # requests does not say whether TLS failed in the handshake: a server that
            # refuses a client certificate often just closes the connection there
            phase="tls" if tls else "answer",
            # the fixes are the session's: its CA and its client certificate
            trust_fix="set session.verify to your CA",
            tls_fix="if it requires a client certificate (mTLS), set session.cert",
        )
        if tls:  # TLS failures (a client certificate refused, say) fail every attempt alike
            failure.unreachable = True
            failure.retryable = False
        return failure

    def abort_all(self, reason: str) -> None:
        """Make no new attempts, and end those in flight: at once where the answer's body
        is being read; a request blocked before its answer's head is not woken (requests
        owns that socket)."""
        self.flights.abort_all(reason)

    def close(self) -> None:
        """The watchdog stops; the session and its connections are the caller's."""
        self.flights.close()


def _stopped_by_the_session(exc: Exception, config: ClientConfig) -> ChurnConnectorError:
    """The run-stopping error for what the session's own code raised, the key masked."""
    if isinstance(exc, ChurnConnectorError):  # our check of session.auth: as it is
        return exc.with_traceback(None)
    said = config.api_key.scrub(f"{type(exc).__name__}: {exc}")
    return TransportError(
        f"the session raised {said} (a hook, an auth or an adapter of the requests.Session "
        "passed as session=); the run was stopped",
        retryable=False,
    )
