"""The bytes of a request on the socket: a small request's head and body in one write."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from churn_connector._delivery.connections import _COALESCE_BYTES, _HTTPConnection
from tests.netfixtures import read_request

pytestmark = pytest.mark.e2e  # real HTTP throughout

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    received: list[bytes]


class _Answers(socketserver.StreamRequestHandler):
    """Reads each request whole (Content-Length framing), keeps its bytes, answers 200."""

    server: _Server

    def handle(self) -> None:
        while (request := read_request(self.rfile)) is not None:
            head, body = request
            self.server.received.append(head + body)
            self.wfile.write(ANSWER)


@contextlib.contextmanager
def _server() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Answers)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _Writes:
    """The connection's socket, each ``sendall`` recorded."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.writes: list[bytes] = []

    def sendall(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self._sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _post(port: int, body: bytes) -> list[bytes]:
    """POST ``body`` on a connection of the package's; the writes it made."""
    conn = _HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.connect()
        writes = _Writes(conn.sock)  # type: ignore[arg-type]
        conn.sock = writes  # type: ignore[assignment]
        conn.request("POST", "/v1/identify", body=body, headers={"Content-Type": "x"})
        response = conn.getresponse()
        assert response.status == 200
        response.read()
        return writes.writes
    finally:
        conn.close()


def test_a_small_request_leaves_in_one_write_with_the_same_bytes() -> None:
    body = b'{"external_user_id":"u1","traits":{"plan":"pro"}}'
    with _server() as server:
        writes = _post(server.server_address[1], body)
    assert len(writes) == 1
    assert writes[0].endswith(b"\r\n\r\n" + body)
    assert server.received == writes  # what arrived: exactly what was written


def test_a_large_body_is_written_after_the_head_not_copied_into_it() -> None:
    body = b"x" * (_COALESCE_BYTES + 1)
    with _server() as server:
        writes = _post(server.server_address[1], body)
    assert len(writes) == 2
    assert writes[0].endswith(b"\r\n\r\n")
    assert writes[1] == body
    assert server.received == [b"".join(writes)]
