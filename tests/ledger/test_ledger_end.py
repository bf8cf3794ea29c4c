"""A run's ledger is closed only after every read of it has stopped: the input's reader may
be a thread of its own, still reading when the run ends (an interrupt); a read that starts
after the end returns nothing, and none meets a closed ledger. Real threads, a real SQLite
file."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

import churn_connector as cc
from churn_connector._ledger import ScopedLedger


def test_no_read_meets_a_closed_ledger_after_the_run_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = cc.Ledger(str(tmp_path / "ledger.sqlite"))
    scoped = ScopedLedger(ledger, "scope")
    scoped.record("events", [(f"k{i}", "d") for i in range(2000)])
    stop = threading.Event()
    found: list[int] = []

    def reader() -> None:
        keys = [f"k{i}" for i in range(2000)]
        while not stop.is_set():
            found.append(len(scoped.known("events", keys)))

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # reads under way, as the run ends
        scoped.end()
        ledger.close()
        time.sleep(0.3)  # reads the threads start now
        stop.set()
        for thread in threads:
            thread.join(10)
    assert 2000 in found  # they did read, before the end
    assert found[-1] == 0  # and read nothing after it
    assert not [r for r in caplog.records if "ledger read failed" in r.getMessage()]
