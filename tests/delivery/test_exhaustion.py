"""Resource exhaustion is named: a process out of file descriptors (EMFILE) stops the run
with what to change, not a retried "OSError". Tested in a child process whose descriptor
limit leaves no room for a socket."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e  # real HTTP and processes throughout

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import os, resource, sys
import pandas as pd
import churn_connector as cc
from tests.conftest import make_events

now = pd.Timestamp.now(tz="UTC").floor("s")
events = make_events(now, n=100)
cc.validate_events(events, now=now)  # everything imported and built before the limit
client = cc.Client(sys.argv[1], sys.argv[2], max_concurrency=4)
used = len(os.listdir("/proc/self/fd"))
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (used + 1, hard))  # the spill file; no socket
try:
    client.send_events(events, now=now, batch_size=10)
except cc.TransportError as exc:
    print(exc.retryable, exc.attempts, exc, sep="|")
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_running_out_of_file_descriptors_stops_the_run_naming_the_fix(
    sandbox: cc.Sandbox,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, sandbox.base_url, sandbox.api_key],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    retryable, attempts, message = done.stdout.strip().split("|")
    assert message == (
        f"cannot send to the API at {sandbox.base_url.removeprefix('http://')}: too many open "
        "files: lower max_concurrency or raise ulimit -n (OSError: [Errno 24] Too many open "
        "files). The run was stopped."
    )
    assert (retryable, attempts) == ("False", "1")  # not retried: no attempt can succeed
    assert len(sandbox.requests_log()) < 10  # the run stopped: not every request went out
