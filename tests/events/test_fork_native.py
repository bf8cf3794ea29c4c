"""A process forked after a send (a multiprocessing pool, Celery, gunicorn) sends: with the
``fast`` extra installed (polars, polars-hash; dev dependencies), a child forked from a
process that ran polars hashes with hashlib, since polars' thread pool does not survive a
fork (the child's sends all failed at the deadline). Real processes, a real sandbox."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = """
import multiprocessing, os, time
import pandas as pd
import churn_connector as cc
from churn_connector._wire import ids

NOW = pd.Timestamp("2026-12-02", tz="UTC")

def events(tag):
    # 1,000 rows: past the native hash's threshold (256 rows a slice)
    return pd.DataFrame({
        "external_user_id": [f"u{i}" for i in range(1000)],
        "event_type": "page_view",
        "occurred_at": pd.Timestamp("2026-12-01", tz="UTC"),
        "properties": [{"tag": tag, "i": i} for i in range(1000)],
    })

def send(url, key, tag):
    started = time.monotonic()
    result = cc.Client(url, key, deadline=15).send_events(events(tag), now=NOW)
    ids_ = [e["context"]["$message_id"] for e in cc.events_to_wire(events("same"), now=NOW)]
    return result.counts["sent"], time.monotonic() - started, ids_, os.getpid()

if __name__ == "__main__":
    with cc.Sandbox() as sandbox:
        sent, _, parent_ids, _ = send(sandbox.base_url, sandbox.api_key, "parent")
        assert ids._native() is not None, "the parent hashed in polars (the fast extra)"
        pool = multiprocessing.get_context("fork").Pool(1)
        try:
            child = pool.apply_async(send, (sandbox.base_url, sandbox.api_key, "child"))
            child_sent, seconds, child_ids, pid = child.get(timeout=60)
        finally:
            pool.terminate()
        assert pid != os.getpid()
        print(sent, child_sent, f"{seconds:.1f}", child_ids == parent_ids)
"""


def test_a_child_forked_after_a_native_send_sends_with_the_same_ids() -> None:
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    sent, child_sent, seconds, same_ids = run.stdout.split()
    assert (sent, child_sent) == ("1000", "1000")  # today: 0 of 1000, failed at the deadline
    assert float(seconds) < 10
    assert same_ids == "True"  # hashlib's ids are polars' ids
