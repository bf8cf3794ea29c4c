"""The HTTP/1.1 side: keep-alive framing around the :class:`Engine`, and a stoppable server."""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
import time
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._engine import Engine, Framing, Request, Response, default_code, error_response

_log = logging.getLogger("churn_connector.sandbox")
_DISCARD = 64 << 10  # bytes of a request's body read and dropped when it is refused unread


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive framing around :class:`Engine`."""

    protocol_version = "HTTP/1.1"
    server_version = "churn-connector-sandbox"
    # headers and body go out in separate writes; Nagle + delayed ACK would add ~40 ms each
    disable_nagle_algorithm = True
    server: SandboxHTTPServer

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        # silent unless DEBUG is on; request lines carry no headers, and keys are masked anyway
        _log.debug("%s %s", self.address_string(), self.server.engine.redact(format % args))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol errors from http.server (bad request line, ...) as JSON, then close."""
        self.close_connection = True
        reason = message or explain or f"malformed request ({default_code(code)})"
        self._write(error_response(code, reason), close=True)

    def _read(self) -> Request | None:
        lengths = self.headers.get_all("Content-Length") or []
        body: bytes | None = None
        framing: Framing = "ok"
        limit = self.server.engine.max_body_bytes
        if not self.server.engine.reads_body(self.command, self.path, self.headers) and not (
            len(lengths) == 1 and lengths[0].strip().isdigit() and int(lengths[0]) <= _DISCARD
        ):
            # answered without its body, never read (a small one is read and dropped, so
            # the connection stays open, as an API behind a proxy does)
            framing = "unread"
        elif self.headers.get("Transfer-Encoding") is not None:
            framing = "chunked"
        elif not lengths:
            body = b""
            framing = "missing_length" if self.command == "POST" else "ok"
        elif (
            len(set(lengths)) != 1
            or not lengths[0].strip().isascii()
            or not lengths[0].strip().isdigit()
        ):
            framing = "bad_length"
        elif limit is not None and int(lengths[0]) > limit:
            framing = "too_large"
        else:
            expected = int(lengths[0])
            body = self.rfile.read(expected)
            if len(body) < expected:
                return None  # the client went away mid-body
        return Request(self.command, self.path, self.headers, body, framing)

    def _serve(self) -> None:
        request = self._read()
        if request is None:
            self.close_connection = True
            return
        response = self.server.engine.handle(request)
        if response.drop:
            self.close_connection = True  # the socket closes with no response bytes at all
            return
        # an unread body would be parsed as the next request: close instead
        self._write(response, close=request.body is None)

    def _write(self, response: Response, *, close: bool) -> None:
        payload = b"" if response.body is None else _json_bytes(response.body)
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers:
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
            self.wfile.write(payload)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve


def _json_bytes(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


class SandboxHTTPServer(ThreadingHTTPServer):
    """Threaded server that can close its open keep-alive connections and join its threads."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # pooled clients open many connections at once
    block_on_close = False  # stop() joins handler threads itself, with a deadline

    def __init__(self, address: tuple[str, int], engine: Engine) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.engine = engine
        self._open: set[socket.socket] = set()
        self._handlers: list[threading.Thread] = []
        self._track = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a DNS lookup that can take seconds
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="churn-sandbox-handler",
            daemon=True,
        )
        with self._track:
            self._open.add(request)
            self._handlers = [t for t in self._handlers if t.is_alive()]
            self._handlers.append(thread)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._track:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # clients vanish mid-request in fault tests; never print tracebacks to stderr
        _log.debug("error while handling a sandbox request", exc_info=True)

    def close_connections(self) -> None:
        """Shut down every open connection so idle keep-alive handler threads exit."""
        with self._track:
            sockets = list(self._open)
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def join_handlers(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds in total) for handler threads to finish."""
        deadline = time.monotonic() + timeout
        with self._track:
            threads = list(self._handlers)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
