"""Interrupts: Ctrl-C and SIGTERM end a send (and the process) within seconds while answers
stall, every row is accounted for, the result files are written, and a re-run with the ledger
completes the job with every event stored exactly once. Tested on real child processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import Figures, MakeEvents
from tests.faultproxy import FaultProxy

N_ROWS, BATCH, PASSING = 2000, 50, 10  # 40 requests; the first 10 answered, then stalls
pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


EXIT_BOUND = 5.0  # "within 2 seconds", with generous slack for a loaded machine


def _default_signals() -> None:
    # a child of a shell's background job inherits SIGINT ignored: give it the default back
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture
def export(make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path) -> Path:
    path = tmp_path / "events.parquet"
    make_events(now, n=N_ROWS, users=50).to_parquet(path)
    return path


@pytest.fixture
def stalling(sandbox: cc.Sandbox) -> Iterator[FaultProxy]:
    """The first PASSING requests are answered; every later one is stored, never answered."""
    with FaultProxy(sandbox.base_url, script=["pass"] * PASSING, mode="stall") as proxy:
        yield proxy


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )


def wait_until_stalled(proxy: FaultProxy, proc: subprocess.Popen[str]) -> None:
    ok = proxy.wait_for(lambda p: p.mode_counts["stall"] >= 4, timeout=60)
    assert ok, proc.communicate(timeout=10)


def interrupt(proc: subprocess.Popen[str], signum: int) -> tuple[float, str]:
    """Send ``signum``; the seconds until the process ended, and its stderr."""
    started = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    return time.monotonic() - started, err


def cli(export: Path, url: str, tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "churn_connector._cli",
        "send",
        "events",
        str(export),
        "--base-url",
        url,
        "--batch-size",
        str(BATCH),
        "--concurrency",
        "4",
        "--ledger",
        str(tmp_path / "ledger.sqlite"),
        "--rows",
        str(tmp_path / "rows.csv"),
        "--results",
        str(tmp_path / "chunks.csv"),
    ]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_cli_at_once_and_the_accounting_survives(
    signum: int,
    code: int,
    stalling: FaultProxy,
    sandbox: cc.Sandbox,
    export: Path,
    tmp_path: Path,
    figures: Figures,
) -> None:
    proc = start(cli(export, stalling.url, tmp_path), {"CHURN_API_KEY": sandbox.api_key})
    wait_until_stalled(stalling, proc)
    elapsed, err = interrupt(proc, signum)
    assert proc.returncode == code, err
    assert elapsed < EXIT_BOUND
    assert f"interrupted: {PASSING * BATCH:,} of {N_ROWS:,} rows delivered" in err
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == N_ROWS
    assert (rows["status"] == "sent").sum() == PASSING * BATCH
    errors = rows.loc[rows["status"] == "failed", "error"]
    assert errors.str.contains("interrupted; outcome unknown, safe to re-send").sum() >= 4 * BATCH
    assert errors.str.startswith("not sent: interrupted").any()
    assert len(pd.read_csv(tmp_path / "chunks.csv")) >= PASSING
    # the same command again, the network healthy: the job completes, each event stored once
    stalling.mode = "pass"
    again = subprocess.run(
        cli(export, stalling.url, tmp_path),
        env={**os.environ, "CHURN_API_KEY": sandbox.api_key},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    stats = sandbox.stats()
    assert stats["stored"] == N_ROWS
    assert stats["conflicts"] == 0
    figures(
        f"exit {proc.returncode} {elapsed:.2f} s after the signal; the re-run stored "
        f"{N_ROWS:,} events once, {stats['duplicates']} duplicates absorbed"
    )


# the second Ctrl-C lands while requests are abandoned, results written, the interpreter ends
@pytest.mark.parametrize("gap", [0.0, 0.02, 0.1])
def test_a_second_ctrl_c_ends_the_process_at_once_without_a_traceback(
    gap: float, stalling: FaultProxy, sandbox: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    proc = start(cli(export, stalling.url, tmp_path), {"CHURN_API_KEY": sandbox.api_key})
    wait_until_stalled(stalling, proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    assert proc.poll() is None, "the process ended before the second Ctrl-C"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    # exit 130, or killed by the signal itself when it lands as the interpreter shuts down
    # (Python puts the default handler back then): a shell shows both as 130
    assert proc.returncode in (130, -signal.SIGINT), err
    assert time.monotonic() - started < EXIT_BOUND
    assert "Traceback" not in err


SCRIPT = """
import json, sys
import churn_connector as cc
try:
    cc.Client(sys.argv[1], sys.argv[2], max_concurrency=4).send_events(
        sys.argv[3], batch_size=50, progress=False
    )
except cc.Interrupted as exc:
    print(json.dumps({"signal": exc.signal, "counts": exc.counts, "rows": len(exc.rows)}))
    sys.exit(0)
sys.exit(5)
"""


@pytest.mark.parametrize("imported", ["", "import polars\n"], ids=["alone", "beside_polars"])
def test_python_callers_get_an_interrupted_error_with_the_results(
    imported: str, stalling: FaultProxy, sandbox: cc.Sandbox, export: Path
) -> None:
    # beside polars: once it is imported, an untimed lock wait no longer wakes for SIGINT
    code = imported + SCRIPT
    args = [sys.executable, "-c", code, stalling.url, sandbox.api_key, str(export)]
    proc = start(args, {})
    wait_until_stalled(stalling, proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < EXIT_BOUND
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["signal"] == signal.SIGINT
    assert report["rows"] == sum(report["counts"].values()) == N_ROWS
    assert report["counts"]["sent"] == PASSING * BATCH


def test_an_orchestrators_own_exception_stops_a_send_the_same_way(
    stalling: FaultProxy, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    class TaskKilled(BaseException):
        """What an orchestrator's signal handler raises in the main thread."""

    def handler(signum: int, frame: object) -> None:
        raise TaskKilled

    previous = signal.signal(signal.SIGUSR1, handler)
    timer = None
    try:

        def kill_when_stalled() -> None:
            stalling.wait_for(lambda p: p.mode_counts["stall"] >= 4, timeout=60)
            os.kill(os.getpid(), signal.SIGUSR1)

        timer = threading.Thread(target=kill_when_stalled, daemon=True)
        timer.start()
        client = cc.Client(stalling.url, sandbox.api_key, max_concurrency=4)
        started = time.monotonic()
        with pytest.raises(cc.Interrupted) as info:
            client.send_events(make_events(now, n=N_ROWS), now=now, batch_size=BATCH)
        assert time.monotonic() - started < 60
    finally:
        signal.signal(signal.SIGUSR1, previous)
        if timer is not None:
            timer.join(timeout=5)
    assert isinstance(info.value.__cause__, TaskKilled)
    assert sum(info.value.counts.values()) == N_ROWS
    assert info.value.counts["sent"] == PASSING * BATCH


# Why the tests above would pass with Sender.abort_all broken: after a stop the sender waits
# at most a second for the requests in flight, then writes them off as "outcome unknown" and
# closes the books, and its workers are daemon threads, so the process exits all the same.
# What the abort itself does is end those requests: their connections are closed at once
# instead of hanging until the read timeout. This test watches that from the server's side,
# in a process that lives on after the interrupt (a notebook's kernel, a worker).

PATIENT = 300.0  # seconds the client would otherwise wait for a stalled answer


def test_an_interrupt_closes_the_connections_of_the_requests_in_flight(
    stalling: FaultProxy, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    class Stopped(BaseException):
        """What an orchestrator's (or the stop button's) handler raises in the main thread."""

    def handler(signum: int, frame: object) -> None:
        raise Stopped

    def stop_when_stalled() -> None:
        if stalling.wait_for(lambda p: p.mode_counts["stall"] >= 4, timeout=60):
            os.kill(os.getpid(), signal.SIGUSR1)

    before = set(threading.enumerate())
    previous = signal.signal(signal.SIGUSR1, handler)
    watcher = threading.Thread(target=stop_when_stalled, daemon=True)
    try:
        watcher.start()
        client = cc.Client(
            stalling.url,
            sandbox.api_key,
            max_concurrency=4,
            read_timeout=PATIENT,
            request_timeout=PATIENT,
        )
        with pytest.raises(cc.Interrupted):
            client.send_events(make_events(now, n=N_ROWS), now=now, batch_size=BATCH)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        watcher.join(timeout=5)
    # the stalled requests' connections were closed by the client, not left to time out
    assert stalling.wait_for(lambda p: p.open_connections == 0, timeout=PATIENT / 30), (
        f"{stalling.open_connections} connections still open after the interrupt"
    )
    # and no sending thread of this send is left blocked on one (an earlier test's, in the
    # same worker process, is not this send's)
    deadline = time.monotonic() + PATIENT / 30
    while left := [t.name for t in set(threading.enumerate()) - before if _sending(t)]:
        assert time.monotonic() < deadline, f"sending threads still blocked: {left}"
        time.sleep(0.05)


def _sending(thread: threading.Thread) -> bool:
    return thread.name.startswith("churn-send-")


def test_a_stopped_runs_bar_and_exception_count_delivered_rows_alike_repeats_included(
    stalling: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # three exact repeats among the first requests' rows: skipped as already delivered
    events = make_events(now, n=N_ROWS)
    events = pd.concat([events.iloc[:3], events]).reset_index(drop=True)

    class TaskKilled(BaseException):
        """What an orchestrator's signal handler raises in the main thread."""

    def handler(signum: int, frame: object) -> None:
        raise TaskKilled

    previous = signal.signal(signal.SIGUSR1, handler)
    timer = None
    try:

        def kill_when_stalled() -> None:
            stalling.wait_for(lambda p: p.mode_counts["stall"] >= 4, timeout=60)
            os.kill(os.getpid(), signal.SIGUSR1)

        timer = threading.Thread(target=kill_when_stalled, daemon=True)
        timer.start()
        client = cc.Client(stalling.url, sandbox.api_key, max_concurrency=4)
        with pytest.raises(cc.Interrupted) as info:
            client.send_events(events, now=now, batch_size=BATCH, progress=True)
    finally:
        signal.signal(signal.SIGUSR1, previous)
        if timer is not None:
            timer.join(timeout=5)
    counts = info.value.counts
    delivered = counts["sent"] + counts["skipped"]
    assert counts["skipped"] == 3 and counts["sent"] == PASSING * BATCH
    whole = N_ROWS + 3
    assert str(info.value).startswith(
        f"interrupted: {delivered:,} of {whole:,} rows delivered "
        f"({counts['sent']:,} sent, 3 skipped as already delivered"
    )
    end = [f for f in re.split(r"[\r\n]", capsys.readouterr().err) if f.strip()][-1]
    assert f"{delivered:,} of {whole:,} rows delivered" in end
    assert f"{counts['sent']:,} sent · 3 skipped · {counts['failed']:,} failed" in end
