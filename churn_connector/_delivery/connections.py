"""Keep-alive HTTP/1.1 connections to the API, on urllib3, with deadlines that hold.

urllib3 2.x keeps the pool, checks idle connections before reuse, opens CONNECT tunnels
through a proxy and sets up TLS. What the package adds is a connection class that hands its
socket to the attempt's ``Flight`` the moment the socket exists, so the watchdog (an
attempt's ``request_timeout``, the run's ``deadline``) and an interrupt end any phase of an
attempt: the name lookup (on a thread of its own, waited for no longer than the attempt may
last), the TCP connect, the TLS handshake, the request and the answer. It also skips interim
1xx answers and tells the stale keep-alive race (the server closed an idle connection as the
request went out: sent again at once on a new connection, not an attempt) from a failure.

Trust: the first CAs of one order (``trust``: ``ca_bundle``, ``REQUESTS_CA_BUNDLE``,
``CURL_CA_BUNDLE``, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, then certifi's bundle or the
system's store), the same for the async client and a session of yours. TLS verification
is always on (but for loopback with ``verify=False``); a proxy is only ever a CONNECT
tunnel, so TLS runs from us to the API end to end and the key is never readable on the way.
"""

from __future__ import annotations

# getaddrinfo encodes a host name with the idna codec, which Python imports on first use:
# a fork while a sender thread is inside that import leaves the child's import of it (and
# so its every connection) waiting forever on the import lock the parent's thread held
import encodings.idna  # noqa: F401
import http.client
import logging
import socket
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from .._core import ClientConfig, ConfigurationError, SecretHeaders, check_proxy, endpoint_of
from .failures import NetworkFailure, classify, closed_without_answer
from .pool import BODY_LIMIT, Abort, Answer, Flight, Flights, current_flight
from .trust import Trust, context_class, trust_of

log = logging.getLogger("churn_connector")

_DNS_POLL = 0.05  # seconds: how often a name lookup's wait looks whether it was aborted
_STALE_RETRIES = 2  # per attempt: the kept-alive connections found closed as a request left
# bodies up to this size go out in one write with the request's head (a larger one is
# not copied: one more system call costs less than copying it)
_COALESCE_BYTES = 64 * 1024


class _HandsOver:
    """Hands the TLS socket to the attempt's flight before the handshake, so an abort ends
    a handshake that stalls or trickles too (a mixin over Python's context or truststore's)."""

    def wrap_socket(self, sock: Any, *args: Any, **kwargs: Any) -> Any:
        handshake = kwargs.pop("do_handshake_on_connect", True)
        kwargs["do_handshake_on_connect"] = False
        tls = super().wrap_socket(sock, *args, **kwargs)  # type: ignore[misc]
        flight = current_flight()
        if flight is not None:
            flight.phase = "tls"
            flight.hold(tls)
        if handshake:
            try:
                tls.do_handshake()
            except BaseException:
                tls.close()  # urllib3 closes what wrap_socket returns, not what it raised on
                raise
        return tls


def ssl_context(config: ClientConfig) -> ssl.SSLContext:
    """Verification on, trusting the first CAs of the order (``trust``); off only for
    loopback (``verify=False``)."""
    trust = trust_of(config) if config.verify else Trust("verify=False")
    # hostname checked, certificate required
    context = context_class(_HandsOver, trust)(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    trust.load(context)
    if not config.verify:  # refused by ClientConfig unless the host is loopback
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _Response(http.client.HTTPResponse):
    """A response that skips every interim 1xx answer (http.client only skips 100), and
    tells the flight that the answer began."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            flight = current_flight()
            if flight is not None:
                flight.answered = True
            if not 102 <= status < 200:
                return version, status, reason
            http.client.parse_headers(self.fp)  # e.g. 103 Early Hints: not the answer


class _Owned:
    """What the package's connections add to urllib3's: the socket is the flight's to end
    from its creation, names resolve within the attempt's deadline, requests are counted
    (a request on a connection that answered before is on a kept-alive one)."""

    host: str
    port: int
    _dns_host: str
    socket_options: Any
    source_address: tuple[str, int] | None
    timeout: Any
    sock: socket.socket | None
    _answers = 0  # answers on the current socket
    _coalesce = False  # within ``request``: the head waits for the body, one write for both
    _head: bytes | None = None

    def _new_conn(self) -> socket.socket:
        flight = current_flight()
        self._answers = 0
        try:
            addresses = _resolve(self._dns_host, self.port, flight)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        error: OSError | None = None
        for family, kind, proto, _, address in addresses:
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as exc:  # EMFILE: out of file descriptors
                raise NewConnectionError(self, f"Failed to create a socket: {exc}") from exc  # type: ignore[arg-type]
            try:
                if flight is not None:
                    flight.phase = "connect"
                    flight.hold(sock)  # from now on an abort ends the connect
                for option in self.socket_options or ():
                    sock.setsockopt(*option)
                timeout = self.timeout if isinstance(self.timeout, int | float) else None
                if flight is not None:
                    left = flight.left()
                    timeout = left if timeout is None else min(timeout, left)
                sock.settimeout(timeout)
                if self.source_address:
                    sock.bind(self.source_address)
                sock.connect(address)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        if isinstance(error, TimeoutError):
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out") from error
        raise NewConnectionError(self, f"Failed to establish a new connection: {error}") from error  # type: ignore[arg-type]

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        flight = current_flight()
        if flight is not None:
            # connected within the request (plain HTTP): what fails now fails writing it
            flight.phase = "send"

    def request(self, *args: Any, **kwargs: Any) -> None:
        flight = current_flight()
        if flight is not None:
            flight.reused = self._answers > 0
            flight.phase = "send"
            if self.sock is not None:
                flight.hold(self.sock)  # a kept-alive socket: this attempt's to end now
        body = kwargs.get("body", args[2] if len(args) > 2 else None)
        # urllib3 writes the head and the body apart: two segments (TCP_NODELAY), two
        # wake-ups of the server and a second system call per request, which at 64
        # identify requests in flight was a third of a request's CPU; the same bytes go
        # out in one write instead
        self._coalesce = isinstance(body, bytes) and 0 < len(body) <= _COALESCE_BYTES
        try:
            super().request(*args, **kwargs)  # type: ignore[misc]
        finally:
            head, self._head, self._coalesce = self._head, None, False
        if head is not None:  # the body never came (it cannot, but never lose the head)
            super().send(head)  # type: ignore[misc]
        if flight is not None:
            flight.phase = "answer"

    def send(self, data: Any) -> None:
        if self._coalesce:
            if self._head is None:
                self._head = bytes(data)  # the head: held for the body
                return
            data, self._head, self._coalesce = self._head + data, None, False
        super().send(data)  # type: ignore[misc]

    def getresponse(self) -> Any:
        response = super().getresponse()  # type: ignore[misc]
        self._answers += 1
        return response


class _HTTPConnection(_Owned, HTTPConnection):
    response_class = _Response


class _HTTPSConnection(_Owned, HTTPSConnection):
    response_class = _Response


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection

    def _validate_conn(self, conn: Any) -> None:
        # urllib3's, without its InsecureRequestWarning: verification is off only where
        # ClientConfig allowed it (verify=False, for loopback hosts)
        if conn.is_closed:
            conn.connect()


def _resolve(host: str, port: int, flight: Flight | None) -> list[Any]:
    """``getaddrinfo`` that ends by the attempt's deadline (and with an abort): a resolver
    that does not answer blocks a thread of its own, not the attempt."""
    kind = socket.SOCK_STREAM
    try:  # an address needs no lookup
        return socket.getaddrinfo(host, port, socket.AF_UNSPEC, kind, 0, socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass
    if flight is None:
        return socket.getaddrinfo(host, port, socket.AF_UNSPEC, kind)
    flight.phase = "dns"
    found: list[Any] = []
    done = threading.Event()

    def look_up() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, socket.AF_UNSPEC, kind))
        except OSError as exc:
            found.append(exc)
        finally:
            done.set()

    threading.Thread(target=look_up, name="churn-dns", daemon=True).start()
    while not done.wait(_DNS_POLL):
        if flight.woken.is_set() or flight.left() <= 0:
            raise TimeoutError(f"no answer from the name resolver for {host}")
    result = found[0]
    if isinstance(result, OSError):
        raise result
    return result  # type: ignore[no-any-return]


def _proxy_of(config: ClientConfig, host: str) -> str | None:
    if config.proxy is not None:
        return config.proxy
    if not config.trust_env or urllib.request.proxy_bypass(host):
        return None
    scheme = urlsplit(config.base_url).scheme
    found = urllib.request.getproxies().get(scheme)
    if not found:
        return None
    check_proxy(found, config.base_url, source=f"{scheme.upper()}_PROXY (the environment)")
    return found


def proxy_for(config: ClientConfig) -> str | None:
    """The proxy between us and the API, if any: ``proxy``, else (with ``trust_env``) the
    environment's unless ``NO_PROXY`` names the host; checked, and refused for a plain
    http:// base URL, where it would read the key. Both posters ask here."""
    where = endpoint_of(config.base_url)
    proxy = _proxy_of(config, where.host)
    if proxy is not None and where.scheme != "https":
        raise ConfigurationError(
            "a proxy is configured (or found in the environment) for a plain http:// base "
            "URL: the proxy would read the key; use https:// or unset the proxy"
        )
    return proxy


class ConnectionPool:
    """At most ``size`` keep-alive connections to the API's host; thread-safe."""

    def __init__(self, config: ClientConfig, size: int) -> None:
        self.config = config
        where = endpoint_of(config.base_url)
        self.https = where.scheme == "https"
        self.host, self.port, self.prefix = where.host, where.port, where.path.rstrip("/")
        self.where = f"{self.host}:{self.port}"
        self._proxy = proxy_for(config)
        self.flights = Flights()
        # never more attempts in flight than ``size``, so the pool needs no blocking; and
        # blocking would hang at interpreter exit: urllib3 empties its pools from an atexit
        # finalizer, before a tracker's exit flush posts through them
        options: dict[str, Any] = {"maxsize": size, "block": False, "retries": False}
        if self.https:
            options["ssl_context"] = ssl_context(config)
        manager: urllib3.PoolManager
        if self._proxy is None:
            manager = urllib3.PoolManager(num_pools=1, **options)
        else:
            proxy = urlsplit(self._proxy)
            headers = {}
            if proxy.username is not None:
                token = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
                headers = urllib3.make_headers(proxy_basic_auth=token)
            plain = f"http://{proxy.hostname}:{proxy.port or 80}"  # no userinfo kept
            manager = urllib3.ProxyManager(plain, num_pools=1, proxy_headers=headers, **options)
        manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        self._manager = manager
        self._pool = manager.connection_from_host(self.host, self.port, where.scheme)

    def post(self, path: str, body: bytes, headers: SecretHeaders, abort: Abort) -> Answer:
        """POST ``body``; the answer, or NetworkFailure (the abort's reason if it fired)."""
        with self.flights.flying(abort) as flight:
            stale = 0
            while True:
                try:
                    return self._exchange(path, body, headers, flight)
                except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
                    failure = self._failure(exc, flight, stale)
                if failure is not None:
                    raise failure  # outside the except block: no context of urllib3's frames
                # the server closed the idle connection as the request went out: it never
                # saw it; sent again at once, on a new connection, and no attempt counted
                log.debug("a kept-alive connection was closed by the server; sent again")
                stale += 1
                flight.reused = False

    def _failure(self, exc: BaseException, flight: Flight, stale: int) -> NetworkFailure | None:
        """The failure to report; None for the stale keep-alive race, to be sent again."""
        if flight.aborted is not None:
            return NetworkFailure(flight.aborted, unreachable=False)
        race = flight.reused and not flight.answered and closed_without_answer(exc)
        if race and stale < _STALE_RETRIES:
            return None
        return classify(exc, self.where, phase=flight.phase)

    def _exchange(self, path: str, body: bytes, headers: SecretHeaders, flight: Flight) -> Answer:
        config = self.config
        timeout = urllib3.Timeout(connect=config.connect_timeout, read=config.read_timeout)
        response = self._pool.urlopen(
            "POST",
            self.prefix + path,
            body=body,
            headers=headers,  # type: ignore[arg-type]
            retries=False,
            redirect=False,
            assert_same_host=False,
            timeout=timeout,
            preload_content=False,
            release_conn=False,
            decode_content=False,
        )
        try:
            data = response.read(BODY_LIMIT, decode_content=False)
        except BaseException:
            _discard(response)
            raise
        # a body longer than the limit (or endless) is not read out: its connection goes
        cut = len(data) >= BODY_LIMIT
        flight.finish()  # before the connection goes back: no abort may reach it after
        if cut:
            _discard(response)
        else:
            response.release_conn()
        # whole (at most BODY_LIMIT): the key is masked before anything is trimmed
        text = data.decode("utf-8", "replace") if data else None
        return Answer(response.status, text, response.headers.get("Retry-After"), cut)

    def abort_all(self, reason: str) -> None:
        """End every attempt in flight now (an interrupt, or the run stopping)."""
        self.flights.abort_all(reason)

    def close(self) -> None:
        self.flights.close()
        self._manager.clear()


def _discard(response: Any) -> None:
    """Close the response's connection instead of handing it back half read."""
    connection = getattr(response, "connection", None)
    if connection is not None:
        connection.close()
    response.release_conn()
