"""Signals outside the send end the program (130 / 143) without a traceback: while the
package is still being imported (the console script's entry module takes the signals on its
first lines), while the input is awaited before anything is sent (nothing sent, and the files
say so), and while the result files are written (they are completed first). Real signals on
real child processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import Figures, MakeEvents

pytestmark = pytest.mark.e2e  # real processes throughout

N_ROWS = 50_000
CLI = [sys.executable, "-m", "churn_connector._cli", "send", "events"]
# the installed console script (its entry module is churn_connector_cli)
SCRIPT = str(Path(sys.executable).with_name("churn-connector"))
_SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_results_are_written_completes_them_then_exits(
    signum: int, code: int, make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    export = tmp_path / "events.parquet"
    make_events(now, n=N_ROWS, users=50).to_parquet(export)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [*CLI, str(export), "--dry-run", "-q", "--rows", str(out / "rows.csv")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and any(p.suffix == ".part" for p in out.iterdir()):
            break  # the per-row file is being written
        time.sleep(0.005)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert err == "interrupted: the result files were completed first\n"
    assert len(pd.read_csv(out / "rows.csv", dtype=str)) == N_ROWS
    assert not [name for name in os.listdir(out) if name.endswith(".part")]  # no temporary


def _takes_sigterm(pid: int) -> bool:
    """The process catches SIGTERM (its ``SigCgt`` mask): Python never does by itself, so
    the entry module's first lines have run."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & _SIGTERM_BIT)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_package_is_imported_ends_the_program_quietly(
    signum: int, figures: Figures
) -> None:
    # the interpreter's own start (site, .pth files; 10-35 ms here) comes before any code
    # of ours: the signal goes from the moment the entry module has taken it, at delays
    # that land early and late in the package's import (half a second or more)
    seen = []
    for delay in (0.0, 0.02, 0.05, 0.1):
        proc = subprocess.Popen(
            [SCRIPT, "--version"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_signals,
            # each import, as it completes, is listed on stderr: what the signal cut short
            env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        )
        bound = time.monotonic() + 30
        while proc.poll() is None and not _takes_sigterm(proc.pid):
            assert time.monotonic() < bound
            time.sleep(0.001)
        time.sleep(delay)
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        lines = err.splitlines()
        imported = [line.rsplit("|", 1)[-1].strip() for line in lines if "import time:" in line]
        assert "churn_connector" not in imported, "the import ended before the signal"
        assert proc.returncode == 128 + signum, err[-2000:]
        assert [line for line in lines if "import time:" not in line] == []  # no traceback
        assert out == ""
        seen.append(f"{delay * 1000:.0f} ms: exit {proc.returncode} after {took:.3f} s")
    figures(f"signal {signum} while importing: " + "; ".join(seen))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_before_the_send_ends_the_program_with_nothing_sent(
    signum: int,
    code: int,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
    figures: Figures,
) -> None:
    export = tmp_path / "events.parquet"
    make_events(now, n=100).to_parquet(export)
    rows = tmp_path / "out" / "rows.csv"
    with socket.socket() as ledger:  # a PostgreSQL ledger that never answers: the run
        ledger.bind(("127.0.0.1", 0))  # waits for it before anything is read or sent
        ledger.listen(4)
        ledger.settimeout(60)
        dsn = f"postgresql://churn@127.0.0.1:{ledger.getsockname()[1]}/ledger"
        args = ["send", "events", str(export), "--base-url", sandbox.base_url, "--ledger", dsn]
        proc = subprocess.Popen(
            [SCRIPT, *args, "--rows", str(rows)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_signals,
            env={**os.environ, "CHURN_API_KEY": sandbox.api_key},
        )
        conn, _ = ledger.accept()  # the program is in the send command, past its imports
        with conn:
            time.sleep(0.2)
            sent = time.monotonic()
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - sent
    figures(f"signal {signum} before the send: exit {proc.returncode} after {took:.2f} s")
    assert proc.returncode == code, err
    assert err == "interrupted: 0 of 100 rows delivered (0 read, 100 never read)\n"
    assert sandbox.stats()["stored"] == 0
    written = pd.read_csv(rows)
    assert len(written) == 100 and (written["error"] == "not sent: interrupted").all()
