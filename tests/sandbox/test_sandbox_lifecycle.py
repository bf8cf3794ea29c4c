"""Lifecycle: start/stop, many sandboxes at once, file persistence, the clock, the CLI."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
import requests

from churn_connector._sandbox import Fault, Sandbox
from churn_connector._sandbox._cli import main
from tests.sandbox.conftest import Api, ApiFor, MakeEvent, MakeSandbox

REPO = Path(__file__).resolve().parents[2]


def test_default_key_is_a_random_test_key() -> None:
    first, second = Sandbox(), Sandbox()
    try:
        assert re.fullmatch(r"sk_test_[0-9a-f]{24}", first.api_key)
        assert first.api_key != second.api_key
        assert first.api_keys == (first.api_key,)
    finally:
        first.close()
        second.close()


def test_context_manager_serves_and_stops(make_event: MakeEvent, session: requests.Session) -> None:
    with Sandbox() as sandbox:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", sandbox.base_url)
        response = session.get(sandbox.base_url + "/v1/identify", timeout=5)
        assert response.status_code == 405
    assert not sandbox.running
    with pytest.raises(requests.ConnectionError):
        session.get(sandbox.base_url + "/v1/identify", timeout=5)
    sandbox.close()


def test_repr_never_shows_the_key(sandbox: Sandbox) -> None:
    assert sandbox.api_key not in repr(sandbox)
    assert sandbox.base_url in repr(sandbox)


def test_stop_is_idempotent_and_quick_with_idle_keep_alive_connections(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    api.batch([make_event()])  # leaves a pooled keep-alive connection open
    started = time.monotonic()
    sandbox.stop()
    sandbox.stop()
    assert time.monotonic() - started < 1.0


def test_stop_does_not_wait_for_a_stalled_request(sandbox: Sandbox, make_event: MakeEvent) -> None:
    sandbox.script_faults([Fault("stall", seconds=30)])
    outcome: queue.Queue[object] = queue.Queue()

    def call() -> None:
        with requests.Session() as s:
            try:
                outcome.put(
                    s.post(
                        sandbox.base_url + "/v1/events/batch",
                        json={"events": [make_event()]},
                        headers={"X-API-Key": sandbox.api_key},
                        timeout=10,
                    ).status_code
                )
            except requests.RequestException as exc:
                outcome.put(exc)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 5
    while sandbox.pending_faults() and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    sandbox.stop()
    assert time.monotonic() - started < 3.0
    thread.join(10)
    assert outcome.get(timeout=1) is not None  # the client finished, one way or the other


def test_data_stays_readable_after_stop(sandbox: Sandbox, api: Api, make_event: MakeEvent) -> None:
    api.batch([make_event()])
    sandbox.stop()
    assert len(sandbox.events()) == 1


def test_restart_after_stop_serves_the_same_data(
    sandbox: Sandbox, api: Api, make_event: MakeEvent
) -> None:
    api.batch([make_event(1)])
    sandbox.stop()
    sandbox.start()
    assert api.batch([make_event(1)]).json()["duplicates"] == 1


def test_start_twice_is_an_error(sandbox: Sandbox) -> None:
    with pytest.raises(RuntimeError, match="already running"):
        sandbox.start()


def test_base_url_before_start_is_an_error() -> None:
    sandbox = Sandbox()
    try:
        with pytest.raises(RuntimeError, match="not been started"):
            _ = sandbox.base_url
    finally:
        sandbox.close()


def test_many_sandboxes_run_at_once_and_stay_separate(
    make_sandbox: MakeSandbox, make_event: MakeEvent
) -> None:
    sandboxes = [make_sandbox() for _ in range(6)]
    assert len({sb.base_url for sb in sandboxes}) == 6

    def send(index: int) -> int:
        sandbox = sandboxes[index % 6]
        with requests.Session() as s:
            return s.post(
                sandbox.base_url + "/v1/events/batch",
                json={"events": [make_event(index)]},
                headers={"X-API-Key": sandbox.api_key},
                timeout=5,
            ).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(send, range(36)))
    assert statuses == [200] * 36
    for i, sandbox in enumerate(sandboxes):
        expected = {f"msg-{n}" for n in range(i, 36, 6)}
        assert set(sandbox.events()["message_id"]) == expected


def test_file_db_persists_across_instances_and_is_inspectable(
    tmp_path: Path, make_event: MakeEvent, api_for: ApiFor, now: datetime
) -> None:
    db = tmp_path / "sandbox.sqlite"
    with Sandbox(api_keys=["persist_key"], db=db, clock=lambda: now) as first:
        api_for(first).batch([make_event(1)])
        api_for(first).identify({"external_user_id": "u1", "traits": {"a": 1}})
    first.close()
    with Sandbox(api_keys=["persist_key"], db=db, clock=lambda: now) as second:
        assert second.events()["message_id"].tolist() == ["msg-1"]
        assert second.users()["traits"].tolist() == [{"a": 1}]
        assert api_for(second).batch([make_event(1)]).json()["duplicates"] == 1
    second.close()
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT count(*) FROM events").fetchone()
    conn.close()
    assert count == 1
    assert b"persist_key" not in db.read_bytes()  # partitions are key digests, not keys


def test_naive_clock_gives_500_not_a_guess(
    make_sandbox: MakeSandbox, api_for: ApiFor, make_event: MakeEvent, now: datetime
) -> None:
    sandbox = make_sandbox(clock=lambda: now.replace(tzinfo=None))
    response = api_for(sandbox).batch([make_event()])
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"


# --------------------------------------------------------------------------- CLI


def _run_cli(args: list[str], env_key: str | None) -> tuple[list[str], int, str]:
    """Start the CLI, POST one event to the printed URL, SIGTERM it; (lines, rc, status)."""
    env = {k: v for k, v in os.environ.items() if k != "CHURN_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if env_key is not None:
        env["CHURN_API_KEY"] = env_key
    code = f"from churn_connector._sandbox._cli import main; raise SystemExit(main({args!r}))"
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        [sys.executable, "-u", "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    ) as proc:
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                lines.put(line)

        reader = threading.Thread(target=pump)
        reader.start()
        seen: list[str] = []
        try:
            while not any(line.startswith("Press Ctrl-C") for line in seen):
                seen.append(lines.get(timeout=15).rstrip("\n"))
            url = next(line.split("=", 1)[1] for line in seen if "CHURN_BASE_URL" in line)
            key = env_key or next(
                line.split("=", 1)[1] for line in seen if "CHURN_API_KEY=" in line
            )
            with requests.Session() as s:
                status = s.post(
                    url + "/v1/identify",
                    json={"external_user_id": "u1"},
                    headers={"X-API-Key": key.split(",")[0]},
                    timeout=5,
                ).status_code
        finally:
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=15)
            reader.join(5)
    return seen, rc, str(status)


def test_cli_serves_with_a_generated_key_and_stops_on_sigterm() -> None:
    lines, rc, status = _run_cli(["--port", "0", "--latency", "0"], env_key=None)
    assert status == "200"
    assert rc == 0
    assert any(re.fullmatch(r"export CHURN_API_KEY=sk_test_[0-9a-f]{24}", line) for line in lines)
    assert any(re.search(r"http://127\.0\.0\.1:\d+", line) for line in lines)


def test_cli_uses_keys_from_the_environment_and_never_prints_them() -> None:
    lines, rc, status = _run_cli(["--port", "0"], env_key="env_key_one,env_key_two")
    assert (status, rc) == ("200", 0)
    assert not any("env_key" in line for line in lines)
    assert not any("export CHURN_API_KEY" in line for line in lines)


@pytest.mark.parametrize(
    "argv", [["--error-rate", "2"], ["--port", "x"], ["--bogus"], ["--latency", "-1"]]
)
def test_cli_usage_errors_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 3
    assert "usage" in capsys.readouterr().err


def test_a_client_resetting_mid_request_prints_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Sandbox() as sb:
        host, port = sb.base_url.removeprefix("http://").split(":")
        for _ in range(3):
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(
                    b"POST /v1/events/batch HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                    b"Content-Type: application/json\r\n\r\n{"
                )
                # SO_LINGER 0: close() sends a reset instead of a clean end of stream
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                time.sleep(0.05)
        time.sleep(0.3)  # let the handler threads meet the reset
    assert "Traceback" not in capsys.readouterr().err
