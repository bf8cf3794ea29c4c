"""An ``AsyncTracker`` left open when its event loop ends (``asyncio.run`` returns with it
open): it flushes within ``flush_timeout``, as the thread tracker does at interpreter exit,
or says at WARNING what was not delivered. Never a silent loss. In real processes, against
a sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e

CHILD = """
import asyncio, logging, os
import churn_connector as cc
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")

async def main():
    client = cc.AsyncClient(os.environ["URL"], os.environ["KEY"])
    tracker = client.tracker(flush_timeout=float(os.environ["FLUSH"]){spool})
    for i in range(100):
        await tracker.track("u1", "page_view", properties={{"i": i}})
    print("leaving", flush=True)  # the tracker stays open

asyncio.run(main())
"""


def run_child(sandbox: cc.Sandbox, flush: float, spool: str = "") -> tuple[str, float]:
    """The child's stderr (it must exit 0), and its seconds."""
    env = {**os.environ, "URL": sandbox.base_url, "KEY": sandbox.api_key, "FLUSH": str(flush)}
    code = CHILD.format(spool=f", spool={spool!r}" if spool else "")
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "leaving"
    assert "Traceback" not in child.stderr
    return child.stderr, time.monotonic() - started


def test_the_events_of_a_tracker_left_open_are_delivered_as_the_loop_ends() -> None:
    with cc.Sandbox(latency=0.05) as sandbox:
        err, _ = run_child(sandbox, flush=30)
        sent = sandbox.events()
    # today: 4 of 100 (the requests in flight), exit 0, nothing said
    assert sent["properties"].map(lambda p: p["i"]).nunique() == 100
    assert err == ""  # all delivered: nothing to say


def test_what_the_loop_end_cannot_deliver_in_time_is_said_and_the_wait_is_bounded() -> None:
    with cc.Sandbox(latency=5.0) as sandbox:
        err, seconds = run_child(sandbox, flush=1.0)
    assert "WARNING async tracker at the event loop's end:" in err
    assert "100 event(s) not delivered" in err and "lost: there is no spool" in err
    assert seconds < 4.5  # flush_timeout (1 s) and the start, not the API's 5 s a request


def test_with_a_spool_what_is_left_stays_for_the_next_tracker(tmp_path: Path) -> None:
    spool = str(tmp_path / "spool.sqlite")
    with cc.Sandbox(latency=5.0) as sandbox:
        err, _ = run_child(sandbox, flush=0.5, spool=spool)
    assert f"remain in the spool {spool}" in err
    with cc.Sandbox() as sandbox:
        client = cc.Client(sandbox.base_url, sandbox.api_key)
        with client.tracker(spool) as tracker:
            report = tracker.flush(timeout=30)
        sent = sandbox.events()
    assert report.ok
    assert sorted(sent["properties"].map(lambda p: p["i"]).unique()) == list(range(100))
