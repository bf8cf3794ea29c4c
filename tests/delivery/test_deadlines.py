"""The run's deadline holds in every phase of an attempt: a name lookup that never returns,
a TCP connect that gets no answer (a listening socket whose accept queue is full drops our
SYNs), a TLS handshake the server never answers, a request body the server never reads, and
an answer that trickles. Each socket-level timeout is far longer than the deadline, so only
the deadline can end the run in time. An interrupt ends a stalled connect too."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import Figures, MakeEvents
from tests.netfixtures import unanswered_connects

pytestmark = pytest.mark.e2e  # real sockets throughout

DEADLINE = 2.0
SLACK = 4.0  # the deadline plus a few seconds, for a loaded machine


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


BLOB = 20_000  # characters of random text per event: a request of 500 events is ~10 MB


@contextlib.contextmanager
def unread_server() -> Iterator[socket.socket]:
    """A listening socket that accepts connections and never reads a byte while the test
    runs, with a small receive buffer (set before listen, so accepted sockets have it): a
    large request stalls part way."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server


def _bytes_received(server: socket.socket) -> list[int]:
    """What reached the server on each connection, read out now (the client has closed
    them)."""
    seen = []
    server.settimeout(0.5)
    with contextlib.suppress(TimeoutError):
        for _ in range(10):
            conn, _ = server.accept()
            with conn:
                conn.settimeout(2)
                seen.append(0)
                while chunk := conn.recv(1 << 16):
                    seen[-1] += len(chunk)
    return seen


def test_the_deadline_ends_a_request_whose_body_the_server_never_reads(
    make_events: MakeEvents, now: pd.Timestamp, figures: Figures
) -> None:
    events = make_events(now, n=500)
    # one request of ~10 MB: far more than both sides' socket buffers (~3 MB on loopback);
    # random text, so no layer could shrink it
    events["properties.blob"] = [os.urandom(BLOB // 2).hex() for _ in range(len(events))]
    with unread_server() as server:
        port = server.getsockname()[1]
        elapsed, result = _timed(f"http://127.0.0.1:{port}", events, now)
        received = _bytes_received(server)
    attempts = int(result.chunks["attempts"].sum())
    figures(
        f"write stalled: deadline {DEADLINE} s, ended after {elapsed:.1f} s, {attempts} "
        f"attempts; of a {len(events) * BLOB / 1e6:.0f} MB body, "
        f"{', '.join(f'{n / 1e6:.1f}' for n in received)} MB reached the server"
    )
    assert received and max(received) < len(events) * BLOB  # the premise: never whole
    assert elapsed < DEADLINE + SLACK
    assert result.counts["failed"] == len(events)
    assert result.rows["error"].str.contains("deadline").all()


# the child's name lookups never return: socket.getaddrinfo replaced by one that sleeps
# (a real resolver that stalls cannot be set up here); an address needs no lookup and
# passes through, as the resolver itself would let it
_STALLED_DNS = """
import json, socket, sys, time
import pandas as pd
import churn_connector as cc

real = socket.getaddrinfo
def stalled(host, port, family=0, type=0, proto=0, flags=0):
    if not flags & socket.AI_NUMERICHOST:
        time.sleep(60)
    return real(host, port, family, type, proto, flags)
socket.getaddrinfo = stalled

now = pd.Timestamp.now(tz="UTC").floor("s")
events = pd.DataFrame({
    "external_user_id": ["u1", "u2"],
    "event_type": ["login", "login"],
    "occurred_at": [now - pd.Timedelta(hours=1)] * 2,
})
client = cc.Client(
    "http://api.stalled-resolver.test", "sk_test_dns", deadline=float(sys.argv[1]),
    request_timeout=1.0, connect_timeout=30.0, read_timeout=30.0, allow_insecure_http=True,
)
cc.validate_events(events, now=now)
started = time.monotonic()
result = client.send_events(events, now=now)
print(json.dumps({
    "elapsed": time.monotonic() - started,
    "failed": int(result.counts["failed"]),
    "errors": sorted(set(result.rows["error"])),
    "attempts": int(result.chunks["attempts"].sum()),
}))
"""


def test_the_deadline_ends_a_name_lookup_that_never_returns(figures: Figures) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STALLED_DNS, str(DEADLINE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    figures(
        f"name lookup stalled: deadline {DEADLINE} s, ended after {seen['elapsed']:.1f} s, "
        f"{seen['attempts']} attempts"
    )
    assert seen["elapsed"] < DEADLINE + SLACK
    assert seen["failed"] == 2
    assert all("deadline" in error for error in seen["errors"]), seen["errors"]


def _syn_sent_to(port: int) -> int:
    """Sockets of this machine whose connect to ``port`` on 127.0.0.1 awaits an answer."""
    found = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2] == f"0100007F:{port:04X}" and fields[3] == "02":  # SYN_SENT
            found += 1
    return found


def _default_signals() -> None:
    # a child of a shell's background job inherits SIGINT ignored: give it the default back
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_ctrl_c_ends_a_stalled_connect_at_once(
    events: pd.DataFrame, tmp_path: Path, figures: Figures
) -> None:
    export = tmp_path / "events.parquet"
    events.to_parquet(export)
    rows = tmp_path / "rows.csv"
    script = str(Path(sys.executable).with_name("churn-connector"))
    with unanswered_connects() as port:
        before = _syn_sent_to(port)
        url = f"http://127.0.0.1:{port}"
        args = ["send", "events", str(export), "--base-url", url, "--allow-insecure-http"]
        proc = subprocess.Popen(
            [script, *args, "--connect-timeout", "30", "--rows", str(rows)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_signals,
            env={**os.environ, "CHURN_API_KEY": "sk_test_interrupt"},
        )
        bound = time.monotonic() + 60
        while _syn_sent_to(port) <= before:  # the program's connect is under way
            assert proc.poll() is None and time.monotonic() < bound, proc.communicate()
            time.sleep(0.01)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    figures(f"Ctrl-C in a stalled connect: exit {proc.returncode} after {took:.2f} s")
    assert proc.returncode == 130, err
    assert took < SLACK
    assert "Traceback" not in err
    written = pd.read_csv(rows)
    assert len(written) == len(events) and (written["status"] == "failed").all()


def test_a_body_the_server_stops_reading_is_a_write_timeout_not_a_connect_timeout(
    make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=500)
    events["properties.blob"] = [os.urandom(BLOB // 2).hex() for _ in range(len(events))]
    with unread_server() as server:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        client = cc.Client(
            url,
            "sk_test_write",
            connect_timeout=1.0,  # what bounds a write, as in urllib3
            read_timeout=30.0,
            retry=cc.RetryPolicy(max_attempts=1),
        )
        result = client.send_events(events, now=now)
    errors = set(result.rows["error"])
    assert len(errors) == 1 and "write timeout" in errors.pop()
