"""An attempt that got no HTTP answer, named: what went wrong, and whether retrying helps.

Both pools (``connections``, ``session``) name failures here, from the error underneath
urllib3's and requests' wrappers, with the operating system's own words kept
(``ConnectionResetError: [Errno 104] Connection reset by peer``).
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl

from .._core import Placeholder, named, option

# resources of this machine, not of the API: retrying each request cannot help
_EXHAUSTED = {
    errno.EMFILE: "too many open files: lower {concurrency} or raise ulimit -n",
    errno.ENFILE: "the system ran out of open files: lower {concurrency}",
}
# the server closed the connection without a byte of an answer: on a kept-alive connection,
# the stale keep-alive race (its idle close crossed our request)
_CLOSED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class NetworkFailure(Exception):
    """An attempt that got no HTTP answer; ``unreachable`` when the host cannot be used at all
    (connection refused, DNS, TLS), which retrying each request will not heal; then
    ``retryable`` says whether a later run can (a server down: yes; TLS trust: no).
    ``fatal``: this machine cannot make requests (out of file descriptors): the run stops."""

    def __init__(
        self, message: str, *, unreachable: bool, retryable: bool = True, fatal: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        self.retryable = retryable
        self.fatal = fatal


def root_of(exc: BaseException) -> BaseException:
    """The error underneath urllib3's and requests' wrappers (ConnectionRefusedError, ...)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError, ProxyError
        inner = reason if isinstance(reason, BaseException) else exc.__cause__
        if inner is None:
            inner = next((a for a in exc.args if isinstance(a, BaseException)), None)
        if inner is None:
            return exc
        exc = inner
    return exc


def closed_without_answer(exc: BaseException) -> bool:
    """The connection ended (EOF, reset) before any byte of an answer: what a server's idle
    close looks like to a request sent on a kept-alive connection."""
    return isinstance(root_of(exc), _CLOSED)


def said(exc: BaseException) -> str:
    """The error in the system's own words: ``ConnectionResetError: [Errno 104] ...``."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def classify(
    exc: BaseException,
    where: str,
    *,
    phase: str = "answer",
    trust_fix: str | None = None,
    tls_fix: str | None = None,
) -> NetworkFailure:
    """Name what went wrong, and whether retrying can help; ``phase`` is where the attempt
    was (``dns``, ``connect``, ``tls``, ``send``, ``answer``); ``trust_fix`` and ``tls_fix``
    say what to change for an untrusted certificate and for other TLS errors."""
    root = root_of(exc)
    ca = option("ca_bundle", Placeholder("<your CA>.pem"))
    trust_fix = trust_fix or f"pass {ca} for a private CA"
    if isinstance(root, OSError) and root.errno in _EXHAUSTED:
        concurrency = named("max_concurrency")
        text = _EXHAUSTED[root.errno].format(concurrency=concurrency)
        return NetworkFailure(f"{text} ({said(root)})", unreachable=False, fatal=True)
    if isinstance(root, ConnectionRefusedError):
        return NetworkFailure(f"connection refused by {where}", unreachable=True)
    if isinstance(root, socket.gaierror):
        # "temporary failure in name resolution" may heal; an unknown name will not
        return NetworkFailure(
            f"cannot resolve the host of {where} ({root})",
            unreachable=True,
            retryable=root.errno == socket.EAI_AGAIN,
        )
    if isinstance(root, ssl.SSLCertVerificationError):
        detail = root.verify_message or root.reason
        return NetworkFailure(
            f"TLS certificate of {where} not trusted ({detail}); {trust_fix}",
            unreachable=True,
            retryable=False,
        )
    if isinstance(root, ssl.SSLEOFError | ssl.SSLZeroReturnError) and phase != "tls":
        # after the handshake: the server closed the connection, as over plain TCP
        return NetworkFailure(f"the server closed the connection ({said(root)})", unreachable=False)
    if isinstance(root, ssl.SSLError):
        if root.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL"):
            return NetworkFailure(
                f"the server at {where} does not speak TLS on this port",
                unreachable=True,
                retryable=False,
            )
        # a server that wants a client certificate ends TLS without saying much
        detail = root.reason or "the server ended the TLS connection"
        fix = f"; {tls_fix}" if tls_fix else ""
        return NetworkFailure(
            f"TLS error with {where} ({detail}){fix}", unreachable=True, retryable=False
        )
    if isinstance(root, OSError) and str(root).startswith("Tunnel connection failed"):
        # "Tunnel connection failed: 503 Service Unavailable"; a 5xx may heal
        code = str(root).removeprefix("Tunnel connection failed:").split()[:1]
        return NetworkFailure(
            f"the proxy refused the tunnel to {where} ({root})",
            unreachable=True,
            retryable=bool(code) and code[0].startswith("5"),
        )
    if isinstance(root, TimeoutError):
        kind = "read timeout"
        if phase in ("dns", "connect", "tls"):
            kind = "connect timeout"
        elif phase == "send":  # a server that stopped reading the request
            kind = "write timeout"
        return NetworkFailure(kind, unreachable=False)
    if isinstance(root, http.client.RemoteDisconnected):
        return NetworkFailure(
            "the server closed the connection without an answer", unreachable=False
        )
    return NetworkFailure(said(root), unreachable=False)
