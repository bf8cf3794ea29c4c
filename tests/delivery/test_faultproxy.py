"""Self-tests of the fault proxy: each mode, against a tiny upstream, with raw clients."""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

import pytest

from tests.faultproxy import EARLY_HINTS, MODES, FaultProxy, check_mode

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


TIMEOUT = 2.0
QUIET = 0.3  # how long "never answers" is watched for


class _Handler(BaseHTTPRequestHandler):
    """Answers every request 200 with a small JSON body; records complete bodies."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body go out in two writes
    server: Upstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def version_string(self) -> str:
        return "up"  # short heads keep the trickle test fast

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = self.rfile.read(length)
        except OSError:
            body = b""
        if len(body) < length:
            self.server.record_incomplete()
            self.close_connection = True
            return
        count = self.server.record(body)
        payload = json.dumps({"n": count, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve


class Upstream(ThreadingHTTPServer):
    """The upstream the proxy forwards to, with what it received."""

    daemon_threads = True

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.incomplete = 0
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a DNS lookup that can take seconds
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # resets are the point of these tests

    def record(self, body: bytes) -> int:
        with self._lock:
            self.bodies.append(body)
            return len(self.bodies)

    def record_incomplete(self) -> None:
        with self._lock:
            self.incomplete += 1

    def wait_until(self, condition: Callable[[], bool], timeout: float = TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if condition():
                    return True
            time.sleep(0.01)
        return False


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(TIMEOUT)


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[FaultProxy]:
    with FaultProxy(f"127.0.0.1:{upstream.server_port}", trickle_interval=0.003, max_body=16) as p:
        yield p
    assert p.errors == []


def request_bytes(body: bytes = b"hello", path: str = "/x") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def read_message(stream: BinaryIO) -> tuple[int, dict[str, str], bytes]:
    """One response from a socket file: status, lower-cased headers, Content-Length body."""
    status_line = stream.readline()
    if not status_line:
        raise EOFError("the proxy closed the connection")
    headers: dict[str, str] = {}
    for _ in range(100):
        line = stream.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    status = int(status_line.split()[1])
    length = 0 if 100 <= status < 200 else int(headers.get("content-length", "0"))
    return status, headers, stream.read(length)


def connect(proxy: FaultProxy, timeout: float = TIMEOUT) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def peer_closed(sock: socket.socket) -> bool:
    """True if the proxy closes (FIN) or resets the connection, after any bytes in flight."""
    try:
        for _ in range(1000):
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    return False


def test_pass_forwards_requests_on_one_keep_alive_connection(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    with closing(http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=TIMEOUT)) as conn:
        for n, body in enumerate([b"one", b"two"], start=1):
            conn.request("POST", "/x", body=body)
            response = conn.getresponse()
            assert response.status == 200
            assert json.loads(response.read()) == {"n": n, "path": "/x"}
    assert upstream.bodies == [b"one", b"two"]
    assert (proxy.requests_seen, proxy.requests_forwarded) == (2, 2)
    assert proxy.mode_counts == {mode: 2 if mode == "pass" else 0 for mode in MODES}
    assert (proxy.connections_accepted, proxy.upstream_connects) == (1, 1)
    assert proxy.wait_for(lambda p: p.open_connections == 0)
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"


def test_reset_mid_body_never_delivers_a_whole_request(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.script_modes(["reset_mid_body"])
    with connect(proxy) as sock:
        sock.sendall(request_bytes(b"0123456789"))
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
    # the upstream got the head and part of the body, then the reset
    assert upstream.wait_until(lambda: upstream.incomplete == 1)
    assert upstream.bodies == []
    assert (proxy.requests_seen, proxy.requests_forwarded) == (1, 0)
    assert proxy.mode_counts["reset_mid_body"] == 1


def test_reset_after_store_resets_the_client_after_the_upstream_answered(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.script_modes(["reset_after_store"])
    with connect(proxy) as sock:
        sock.sendall(request_bytes(b"stored"))
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
    assert upstream.bodies == [b"stored"]
    assert proxy.requests_forwarded == 1
    assert proxy.mode_counts["reset_after_store"] == 1


def test_half_response_cuts_the_body_in_half_then_closes(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.script_modes(["half_response"])
    with closing(http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=TIMEOUT)) as conn:
        conn.request("POST", "/x", body=b"hi")
        response = conn.getresponse()
        assert response.status == 200
        length = int(response.getheader("Content-Length") or 0)
        with pytest.raises(http.client.IncompleteRead) as info:
            response.read()
    assert len(info.value.partial) == length // 2 > 0
    assert upstream.bodies == [b"hi"]
    assert proxy.mode_counts["half_response"] == 1


def test_stall_forwards_then_never_answers_until_the_client_leaves(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.script_modes(["stall"])
    with connect(proxy, timeout=QUIET) as sock:
        sock.sendall(request_bytes(b"stalled"))
        with pytest.raises(TimeoutError):
            sock.recv(1)
        assert proxy.open_connections == 1
    assert upstream.bodies == [b"stalled"]
    assert proxy.requests_forwarded == 1
    assert proxy.wait_for(lambda p: p.open_connections == 0)


def test_trickle_sends_one_byte_per_interval(proxy: FaultProxy) -> None:
    proxy.script_modes(["trickle"])
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(request_bytes())
        received = b""
        reads = 0
        for _ in range(10_000):
            chunk = sock.recv(4096)
            received += chunk
            reads += 1
            if not chunk or (b"\r\n\r\n" in received and received.endswith(b"}")):
                break
        elapsed = time.monotonic() - started
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b'{"n": 1, "path": "/x"}')
    # one byte per send: the client sees (nearly) one read per byte, spread over time
    assert reads > len(received) // 2
    assert elapsed >= (len(received) - 1) * proxy.trickle_interval * 0.9


def test_blackhole_swallows_a_new_connection_without_reading(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.mode = "blackhole"
    with connect(proxy, timeout=QUIET) as sock:
        sock.sendall(request_bytes())
        with pytest.raises(TimeoutError):
            sock.recv(1)
        assert proxy.open_connections == 1
    assert upstream.bodies == []
    assert proxy.requests_seen == 0
    assert proxy.mode_counts["blackhole"] == 1


def test_blackhole_on_a_keep_alive_connection_swallows_the_next_request(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.script_modes(["pass", "blackhole"])
    with connect(proxy, timeout=QUIET) as sock, sock.makefile("rb") as stream:
        sock.sendall(request_bytes(b"first"))
        assert read_message(stream)[0] == 200
        sock.sendall(request_bytes(b"second"))
        with pytest.raises(TimeoutError):
            stream.read(1)
    assert upstream.bodies == [b"first"]
    assert proxy.requests_seen == 2
    assert proxy.mode_counts["blackhole"] == 1


def test_early_hints_precede_the_real_response_then_the_script_ends(proxy: FaultProxy) -> None:
    proxy.script_modes(["early_hints"])
    assert proxy.pending_modes() == ("early_hints",)
    with connect(proxy) as sock, sock.makefile("rb") as stream:
        sock.sendall(request_bytes())
        assert stream.read(len(EARLY_HINTS)) == EARLY_HINTS
        assert read_message(stream)[0] == 200
        # the script is used up: the next request on the same connection passes
        sock.sendall(request_bytes())
        assert stream.peek(len(b"HTTP/1.1 200"))[:12] == b"HTTP/1.1 200"
        assert read_message(stream)[0] == 200
    assert proxy.pending_modes() == ()
    assert proxy.mode_counts["early_hints"] == 1
    assert proxy.mode_counts["pass"] == 1


def test_too_large_answers_413_and_keeps_the_connection(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.mode = "too_large"
    with connect(proxy) as sock, sock.makefile("rb") as stream:
        sock.sendall(request_bytes(b"x" * (proxy.max_body + 1)))
        status, headers, body = read_message(stream)
        assert status == 413
        assert "connection" not in headers
        assert json.loads(body)["error"]["code"] == "payload_too_large"
        sock.sendall(request_bytes(b"x" * proxy.max_body))
        assert read_message(stream)[0] == 200
    assert upstream.bodies == [b"x" * proxy.max_body]
    assert (proxy.requests_seen, proxy.requests_forwarded) == (2, 1)
    assert (proxy.mode_counts["too_large"], proxy.mode_counts["pass"]) == (1, 1)


def test_close_is_prompt_with_stuck_connections(upstream: Upstream) -> None:
    proxy = FaultProxy(("127.0.0.1", upstream.server_port), script=["stall", "trickle"])
    with proxy, connect(proxy) as stalled, connect(proxy) as trickled:
        stalled.sendall(request_bytes())
        trickled.sendall(request_bytes())
        proxy.mode = "blackhole"
        with connect(proxy) as blackholed:
            assert proxy.wait_for(lambda p: p.open_connections == 3 and p.requests_forwarded == 2)
            started = time.monotonic()
            proxy.close()
            assert time.monotonic() - started < 1.0
            assert peer_closed(stalled)
            assert peer_closed(trickled)
            assert peer_closed(blackholed)
    assert proxy.open_connections == 0
    assert proxy.errors == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT).close()
    with pytest.raises(RuntimeError, match="closed"):
        proxy.start()


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1:PORT"):
        FaultProxy("10.0.0.1:80")
    with pytest.raises(ValueError, match=r"127\.0\.0\.1:PORT"):
        FaultProxy("http://example.com:80")
    bad: Any = "nope"
    with pytest.raises(ValueError, match="unknown fault mode"):
        check_mode(bad)
    proxy = FaultProxy("http://localhost:8080")
    with pytest.raises(ValueError, match="unknown fault mode"):
        proxy.script_modes(["pass", bad])
    with pytest.raises(RuntimeError, match="not been started"):
        _ = proxy.url
    proxy.close()  # never started: a no-op
