"""Keep-alive HTTP/1.1 connections to the API, with deadlines that hold.

Built on the standard library's ``http.client`` rather than ``requests``: the hot path posts
thousands of 100 KB bodies a second, and owning the sockets is what lets a request deadline
hold against a server that trickles its answer (a read timeout applies per socket read) and
lets an interrupt end every request in flight at once. TLS verification is always on
(``ssl.create_default_context``); a proxy is only ever a CONNECT tunnel, so TLS runs from
us to the API end to end and the key is never readable on the way.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import select
import socket
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .._core.config import ClientConfig, SecretHeaders
from .._core.exceptions import ConfigurationError
from .._core.words import Placeholder, option

BODY_LIMIT = 64 * 1024  # only a trimmed excerpt is kept; a huge or endless body is cut off
_WATCH_EVERY = 0.1  # seconds between the watchdog's looks at requests in flight


@dataclass(frozen=True)
class Abort:
    """End an attempt that has not finished ``after`` seconds from its start, saying why."""

    after: float
    reason: str


@dataclass(frozen=True)
class Answer:
    """The server's final answer to one attempt."""

    status: int
    text: str | None
    retry_after: str | None


class NetworkFailure(Exception):
    """An attempt that got no HTTP answer; ``unreachable`` when the host cannot be used at all
    (connection refused, DNS, TLS), which retrying each request will not heal; then
    ``retryable`` says whether a later run can (a server down: yes; TLS trust: no)."""

    def __init__(self, message: str, *, unreachable: bool, retryable: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        self.retryable = retryable


class _Response(http.client.HTTPResponse):
    """A response that skips every interim 1xx answer (http.client only skips 100)."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 102 <= status < 200:
                return version, status, reason
            http.client.parse_headers(self.fp)  # e.g. 103 Early Hints: not the answer


class _HTTPConnection(http.client.HTTPConnection):
    response_class = _Response


class _HTTPSConnection(http.client.HTTPSConnection):
    response_class = _Response


_Connection = _HTTPConnection | _HTTPSConnection


@dataclass(eq=False)  # in a set by identity
class _Flight:
    """One attempt in flight: its connection, when it must end, and whether it was ended."""

    connection: _Connection
    deadline: float
    reason: str
    aborted: str | None = None

    def abort(self, reason: str) -> None:
        if self.aborted is None:
            self.aborted = reason
        sock = self.connection.sock
        if sock is not None:
            # the socket-level shutdown wakes a thread blocked reading it, TLS or not
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


def ssl_context(config: ClientConfig) -> ssl.SSLContext:
    """Verification on, trusting the CAs the caller names; else the system's (or those of
    SSL_CERT_FILE / SSL_CERT_DIR, read by OpenSSL) and REQUESTS_CA_BUNDLE's."""
    bundle = config.ca_bundle
    try:
        context = ssl.create_default_context(cafile=bundle)
        if bundle is None and (bundle := os.environ.get("REQUESTS_CA_BUNDLE")):
            context.load_verify_locations(cafile=bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"cannot load the CA bundle {bundle!r}: {exc}") from None
    if not config.verify:  # refused by ClientConfig unless the host is loopback
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _proxy_of(config: ClientConfig, host: str) -> str | None:
    if config.proxy is not None:
        return config.proxy
    if not config.trust_env or urllib.request.proxy_bypass(host):
        return None
    found = urllib.request.getproxies().get(urlsplit(config.base_url).scheme)
    return found or None


def _failure(
    exc: BaseException,
    where: str,
    *,
    trust_fix: str | None = None,
    tls_fix: str | None = None,
) -> NetworkFailure:
    """Name what went wrong, and whether retrying can help; ``trust_fix`` and ``tls_fix``
    say what to change for an untrusted certificate and for other TLS errors."""
    ca = option("ca_bundle", Placeholder("<your CA>.pem"))
    trust_fix = trust_fix or f"pass {ca} for a private CA"
    if isinstance(exc, ConnectionRefusedError):
        return NetworkFailure(f"connection refused by {where}", unreachable=True)
    if isinstance(exc, socket.gaierror):
        # "temporary failure in name resolution" may heal; an unknown name will not
        return NetworkFailure(
            f"cannot resolve the host of {where} ({exc})",
            unreachable=True,
            retryable=exc.errno == socket.EAI_AGAIN,
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or exc.reason
        return NetworkFailure(
            f"TLS certificate of {where} not trusted ({detail}); {trust_fix}",
            unreachable=True,
            retryable=False,
        )
    if isinstance(exc, ssl.SSLError):
        if exc.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL"):
            return NetworkFailure(
                f"the server at {where} does not speak TLS on this port",
                unreachable=True,
                retryable=False,
            )
        # a server that wants a client certificate ends TLS without saying much
        detail = exc.reason or "the server ended the TLS connection"
        fix = f"; {tls_fix}" if tls_fix else ""
        return NetworkFailure(
            f"TLS error with {where} ({detail}){fix}", unreachable=True, retryable=False
        )
    if isinstance(exc, OSError) and str(exc).startswith("Tunnel connection failed"):
        # http.client: "Tunnel connection failed: 503 Service Unavailable"; a 5xx may heal
        code = str(exc).removeprefix("Tunnel connection failed:").split()[:1]
        return NetworkFailure(
            f"the proxy refused the tunnel to {where} ({exc})",
            unreachable=True,
            retryable=bool(code) and code[0].startswith("5"),
        )
    if isinstance(exc, TimeoutError):
        return NetworkFailure("read timeout", unreachable=False)
    return NetworkFailure(type(exc).__name__, unreachable=False)


def _dropped(conn: _Connection) -> bool:
    """True when an idle kept-alive connection was closed by the server (its socket reads
    as ready: end of stream, or bytes nobody asked for)."""
    sock = conn.sock
    if sock is None:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class ConnectionPool:
    """At most ``size`` keep-alive connections to the API's host; thread-safe."""

    def __init__(self, config: ClientConfig, size: int) -> None:
        parts = urlsplit(config.base_url)
        self.config = config
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.where = f"{self.host}:{self.port}"
        self._ssl = ssl_context(config) if self.https else None
        self._proxy = _proxy_of(config, self.host)
        if self._proxy is not None and not self.https:
            raise ConfigurationError(
                "a proxy is configured (or found in the environment) for a plain http:// base "
                "URL: the proxy would read the key; use https:// or unset the proxy"
            )
        self._idle: list[_Connection] = []
        self._flights: set[_Flight] = set()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None

    # -- connections ---------------------------------------------------------------------
    def _new(self) -> _Connection:
        timeout = self.config.connect_timeout
        if not self.https:
            return _HTTPConnection(self.host, self.port, timeout=timeout)
        if self._proxy is None:
            return _HTTPSConnection(self.host, self.port, timeout=timeout, context=self._ssl)
        proxy = urlsplit(self._proxy)
        conn = _HTTPSConnection(
            proxy.hostname or "", proxy.port or 80, timeout=timeout, context=self._ssl
        )
        headers = {}
        if proxy.username is not None:
            token = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
            headers["Proxy-Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        conn.set_tunnel(self.host, self.port, headers=headers)
        return conn

    def _checkout(self) -> tuple[_Connection, bool]:
        self._slots.acquire()
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(), False
            if not _dropped(conn):
                return conn, True
            conn.close()

    def _checkin(self, conn: _Connection, *, reusable: bool) -> None:
        with self._lock:
            if reusable and not self._closed.is_set():
                self._idle.append(conn)
                reusable = True
            else:
                reusable = False
        if not reusable:
            conn.close()
        self._slots.release()

    # -- one attempt ---------------------------------------------------------------------
    def post(self, path: str, body: bytes, headers: SecretHeaders, abort: Abort) -> Answer:
        """POST ``body``; the answer, or NetworkFailure (the abort's reason if it fired)."""
        self._start_watchdog()
        conn, reused = self._checkout()
        flight = _Flight(conn, time.monotonic() + abort.after, abort.reason)
        reusable = False
        with self._lock:
            self._flights.add(flight)
        try:
            answer, reusable = self._exchange(conn, path, body, headers, reused=reused)
            return answer
        except (OSError, http.client.HTTPException, ValueError) as exc:
            conn.close()
            if flight.aborted is not None:
                raise NetworkFailure(flight.aborted, unreachable=False) from None
            raise _failure(exc, self.where) from None
        finally:
            with self._lock:
                self._flights.discard(flight)
            self._checkin(conn, reusable=reusable and flight.aborted is None)

    def _exchange(
        self, conn: _Connection, path: str, body: bytes, headers: SecretHeaders, *, reused: bool
    ) -> tuple[Answer, bool]:
        if not reused:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(self.config.read_timeout)
        conn.request("POST", self.prefix + path, body=body, headers=headers)  # type: ignore[arg-type]
        resp = conn.getresponse()
        data = resp.read(BODY_LIMIT)
        # what was not read (a huge or endless body) leaves the connection unusable
        reusable = resp.isclosed() and not resp.will_close
        # whole (at most BODY_LIMIT): the key is masked before anything is trimmed
        text = data.decode("utf-8", "replace") if data else None
        return Answer(resp.status, text, resp.getheader("Retry-After")), reusable

    # -- ending attempts -----------------------------------------------------------------
    def abort_all(self, reason: str) -> None:
        """End every attempt in flight now (an interrupt, or the run stopping)."""
        with self._lock:
            flights = list(self._flights)
        for flight in flights:
            flight.abort(reason)

    def _start_watchdog(self) -> None:
        if self._watchdog is None:
            with self._lock:
                if self._watchdog is None:
                    self._watchdog = threading.Thread(
                        target=self._watch, name="churn-send-watchdog", daemon=True
                    )
                    self._watchdog.start()

    def _watch(self) -> None:
        """Abort attempts past their deadline: a trickling server never holds a run."""
        while not self._closed.wait(_WATCH_EVERY):
            now = time.monotonic()
            with self._lock:
                late = [f for f in self._flights if f.deadline <= now and f.aborted is None]
            for flight in late:
                flight.abort(flight.reason)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._watchdog is not None:
            self._watchdog.join(timeout=1.0)
