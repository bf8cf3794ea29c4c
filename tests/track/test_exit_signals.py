"""Signals while the interpreter exits with a tracker open are quiet: the exit's flush ends
at the first one, what is left is counted in one WARNING, and no further signal prints a
traceback ("Exception ignored in ...") or leaves the exit waiting on a lock. Real processes,
a sandbox that answers slowly, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e

CHILD = """
import logging, os, signal, sys
import churn_connector as cc
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
if os.environ.get("OWN_SIGTERM"):  # the program's own handler, as services set one
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
tracker = cc.Client(os.environ["URL"], os.environ["KEY"]).tracker(flush_timeout=60)
tracker.track("u1", "page_view")
print("leaving", flush=True)  # the tracker stays open: the exit flushes it
"""


def signalled_at_exit(signum: int, count: int, *, own_sigterm: bool = False) -> tuple[str, float]:
    """The child's stderr and its seconds from the first signal to its end."""
    with cc.Sandbox(latency=5.0) as sandbox:  # the exit's flush waits on the API
        env = {**os.environ, "URL": sandbox.base_url, "KEY": sandbox.api_key}
        if own_sigterm:
            env["OWN_SIGTERM"] = "1"
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(CHILD)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "leaving"
        time.sleep(1.0)  # inside the exit's flush
        started = time.monotonic()
        for _ in range(count):  # over the flush's end, its WARNING and the exit after it
            child.send_signal(signum)
            time.sleep(0.002)
        while child.poll() is None and time.monotonic() - started < 1.0:
            child.send_signal(signum)
            time.sleep(0.002)
        _, err = child.communicate(timeout=30)
    return err, time.monotonic() - started


@pytest.mark.parametrize("count", [1, 3, 8])
def test_ctrl_c_during_the_exit_flush_is_quiet_however_often(count: int) -> None:
    # then one every 2 ms until the process ends: each may land anywhere in the exit
    err, seconds = signalled_at_exit(signal.SIGINT, count)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "tracker at exit: 1 event(s) not delivered" in err
    assert seconds < 10  # the flush ended at the signal, not at flush_timeout (60 s)


def test_sigterm_through_the_programs_own_handler_during_the_exit_flush_is_quiet() -> None:
    err, seconds = signalled_at_exit(signal.SIGTERM, 3, own_sigterm=True)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "tracker at exit: 1 event(s) not delivered" in err
    assert seconds < 10
