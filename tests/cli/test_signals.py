"""Signals outside the send: SIGINT or SIGTERM while the result files are written waits for
them to be complete, then ends the program (130 / 143) without a traceback. Real signals
on a child process, sent while the per-row file's temporary is on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import MakeEvents

pytestmark = pytest.mark.e2e  # real processes throughout

N_ROWS = 50_000
CLI = [sys.executable, "-m", "churn_connector._cli", "send", "events"]


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
