"""The sandbox reads a body only for an authenticated POST to an endpoint, and only up to
its cap (32 MiB by default): anything else is answered at once, the body never read, the
connection closed. Raw sockets, so the client can announce a body it never sends."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e

HUGE = 100 << 20  # announced, never sent


def _answer(sandbox: cc.Sandbox, head: str) -> bytes:
    """Send ``head`` and a few bytes of the announced body; the status line received."""
    address = urlsplit(sandbox.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=5) as sock:
        sock.sendall(head.encode() + b"\r\n" + b"x" * 10)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)  # a sandbox waiting for the body times this out
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


@pytest.mark.parametrize(
    ("key", "path", "status"),
    [
        (None, "/v1/events/batch", b"401"),
        ("wrong_key_0000000000000000", "/v1/events/batch", b"401"),
        ("right", "/v1/nowhere", b"404"),
        ("right", "/v1/events/batch", b"413"),  # above the default cap
    ],
)
def test_a_body_is_not_read_unless_authenticated_and_within_the_cap(
    sandbox: cc.Sandbox, key: str | None, path: str, status: bytes
) -> None:
    auth = ""
    if key is not None:
        auth = f"Authorization: Bearer {sandbox.api_key if key == 'right' else key}\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: sandbox\r\nContent-Type: application/json\r\n"
        f"{auth}Content-Length: {HUGE}\r\n"
    )
    line = _answer(sandbox, head)
    assert line.startswith(b"HTTP/1.1 " + status), line
