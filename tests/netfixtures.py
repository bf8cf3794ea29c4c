"""Network peers for reliability tests, all on 127.0.0.1: an HTTPS server with a throw-away
CA, a CONNECT proxy that records every byte a client sends it (a canary), and a port whose
connects are never answered."""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase

import trustme


def read_request(rfile: BufferedIOBase) -> tuple[bytes, bytes] | None:
    """One request's head and body (Content-Length framing, 0 when absent); None at the
    connection's end."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = rfile.readline(65536)
        if not line:
            return None
        head += line
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    return head, rfile.read(length)


@contextlib.contextmanager
def unanswered_connects() -> Iterator[int]:
    """A port whose connects hang: it listens, never accepts, and its queue is full."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):  # fill the accept queue; what does not fit stays SYN_SENT
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
            time.sleep(0.2)
            probe = socket.socket()
            probe.settimeout(0.5)
            try:  # the premise: a connect here hangs
                probe.connect(("127.0.0.1", port))
            except TimeoutError:
                pass
            else:
                raise AssertionError("a connect to a full accept queue was answered")
            finally:
                probe.close()
            yield port
        finally:
            for filler in fillers:
                filler.close()


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    server: _HttpsServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.clients is not None:
            peer = self.connection.getpeercert()
            subject = dict(item for rdn in (peer or {}).get("subject", ()) for item in rdn)
            self.server.clients.append(str(subject.get("commonName", "")))
        body = b'{"accepted":true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _HttpsServer(ThreadingHTTPServer):
    daemon_threads = True
    clients: list[str] | None = None


@contextlib.contextmanager
def https_server(ca: trustme.CA, *, clients: list[str] | None = None) -> Iterator[int]:
    """An HTTPS server for localhost and 127.0.0.1 that answers every POST 200; its port.

    Given ``clients``, it requires a client certificate signed by ``ca`` (mutual TLS) and
    appends each request's client common name to the list."""
    server = _HttpsServer(("127.0.0.1", 0), _Answer)
    server.clients = clients
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    if clients is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class ConnectProxy(socketserver.ThreadingTCPServer):
    """A CONNECT proxy on 127.0.0.1 that records everything clients send through it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.received = bytearray()
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> ConnectProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def note(self, data: bytes) -> None:
        with self._lock:
            self.received += data


class _Tunnel(socketserver.BaseRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        self.server.note(head)
        self.server.requests.append(head.split(b"\r\n", 1)[0])
        line = head.split(b"\r\n", 1)[0].split()
        if len(line) < 2 or line[0] != b"CONNECT":
            self.request.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        host, _, port = line[1].decode().rpartition(":")
        with socket.create_connection((host, int(port)), timeout=5) as upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._pipe(upstream)

    def _pipe(self, upstream: socket.socket) -> None:
        ends = [self.request, upstream]
        for _ in range(100_000):  # bounded: a tunnel of a test never lives that long
            readable, _, _ = select.select(ends, [], [], 5.0)
            if not readable:
                return
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                if sock is self.request:
                    self.server.note(data)
                    upstream.sendall(data)
                else:
                    self.request.sendall(data)
