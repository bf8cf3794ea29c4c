"""The run's deadline holds in every phase of an attempt: a TCP connect that gets no answer
(a listening socket whose accept queue is full drops our SYNs), a TLS handshake the server
never answers, and an answer that trickles. Each socket-level timeout is far longer than
the deadline, so only the deadline can end the run in time."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import Figures

pytestmark = pytest.mark.e2e  # real sockets throughout

DEADLINE = 2.0
SLACK = 4.0  # the deadline plus a few seconds, for a loaded machine


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
            with pytest.raises(TimeoutError):  # the premise: a connect here hangs
                probe.connect(("127.0.0.1", port))
            probe.close()
            yield port
        finally:
            for filler in fillers:
                filler.close()


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a byte (a TLS handshake stalls)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def _timed(url: str, events: pd.DataFrame, now: pd.Timestamp) -> tuple[float, cc.SendResult]:
    client = cc.Client(
        url,
        "sk_test_deadline",
        deadline=DEADLINE,
        request_timeout=1.0,
        connect_timeout=30.0,
        read_timeout=30.0,
        verify=False,
    )
    cc.validate_events(events, now=now)  # warm: the schema is built before the clock starts
    started = time.monotonic()
    result = client.send_events(events, now=now)
    return time.monotonic() - started, result


@pytest.mark.parametrize("phase", ["connect", "tls"])
def test_the_deadline_ends_an_attempt_stalled_in_any_phase(
    phase: str, events: pd.DataFrame, now: pd.Timestamp, figures: Figures
) -> None:
    server = unanswered_connects() if phase == "connect" else silent_server()
    with server as port:
        scheme = "http" if phase == "connect" else "https"
        elapsed, result = _timed(f"{scheme}://127.0.0.1:{port}", events, now)
    attempts = int(result.chunks["attempts"].sum())
    figures(
        f"{phase} stalled: deadline {DEADLINE} s, ended after {elapsed:.1f} s, {attempts} attempts"
    )
    assert elapsed < DEADLINE + SLACK
    assert result.counts["failed"] == len(events)
    assert result.rows["error"].str.contains("deadline").all()
