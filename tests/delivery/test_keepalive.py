"""The stale keep-alive race: a server's idle close crosses a new request on a reused
connection. The request never reached the API, so it is sent again at once on a new
connection: not an attempt, no back-off, never "unreachable". The server here answers the
first request of each connection and closes the connection, unanswered, on the next one:
the race, every time."""

from __future__ import annotations

import contextlib
import socketserver
import ssl
import threading
from collections.abc import Iterator

import pandas as pd
import pytest
import requests
import trustme

import churn_connector as cc
from tests.conftest import Figures, MakeEvents
from tests.netfixtures import read_request

pytestmark = pytest.mark.e2e  # real HTTP throughout

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class _OneAnswerPerConnection(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        answered = False
        while read_request(self.rfile) is not None:
            with self.server.lock:
                if answered:
                    self.server.closed += 1
                else:
                    self.server.answered += 1
            if answered:
                return  # closed without a byte of an answer: the idle close crossing it
            self.wfile.write(ANSWER)
            self.wfile.flush()
            answered = True


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OneAnswerPerConnection)
        self.lock = threading.Lock()
        self.answered = 0
        self.closed = 0


@contextlib.contextmanager
def racing_server(ca: trustme.CA | None = None) -> Iterator[_Server]:
    server = _Server()
    if ca is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["pool", "session", "pool over tls"])
def test_a_request_crossing_an_idle_close_is_sent_again_at_once_and_costs_no_attempt(
    path: str,
    ca: trustme.CA,
    ca_file: str,
    make_events: MakeEvents,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    events = make_events(now, n=200, users=20)
    tls = path == "pool over tls"
    options: dict[str, object] = {"ca_bundle": ca_file} if tls else {}
    if path == "session":
        options = {"session": requests.Session()}
    with racing_server(ca if tls else None) as server:
        client = cc.Client(
            f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}",
            "sk_test_race",
            retry=cc.RetryPolicy(max_attempts=1),
            max_concurrency=1,
            batch_size=20,
            **options,  # type: ignore[arg-type]
        )
        result = client.send_events(events, now=now)
    figures(
        f"{path}: {server.answered} answered, {server.closed} closed unanswered on a reused "
        f"connection; {result.counts['sent']} of 200 rows sent, attempts "
        f"{sorted(set(result.chunks['attempts']))}, {result.elapsed_s:.2f} s"
    )
    assert server.closed >= 5  # the race happened, again and again
    assert result.ok and result.counts["sent"] == 200
    assert (result.chunks["attempts"] == 1).all()
    assert server.answered == 10
