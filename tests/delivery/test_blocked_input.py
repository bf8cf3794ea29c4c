"""An input that blocks (a cursor waiting on its server, a generator that hangs) holds the
run neither past its deadline nor past an interrupt: the rows read are accounted for, and
the result says from which row on the input was not read."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import Figures, MakeEvents

pytestmark = pytest.mark.e2e  # real HTTP throughout

HANG = 60.0  # far past any bound of these tests


def _hanging(
    events: pd.DataFrame, slices: int, blocked: threading.Event | None = None
) -> Iterator[pd.DataFrame]:
    """``slices`` slices of 100 rows, then a read that hangs (``blocked`` set as it starts)."""
    for k in range(slices):
        yield events.iloc[100 * k : 100 * (k + 1)]
    if blocked is not None:
        blocked.set()
    time.sleep(HANG)
    yield events.iloc[100 * slices :]


def test_the_deadline_holds_while_the_input_blocks(
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    events = make_events(now, n=500, users=20)
    client = cc.Client(sandbox.base_url, sandbox.api_key, deadline=2.0)
    cc.validate_events(events, now=now)  # warm: the schema is built before the clock starts
    started = time.monotonic()
    result = client.send_events(_hanging(events, 3), now=now)
    elapsed = time.monotonic() - started
    figures(f"input blocked: deadline 2 s, ended after {elapsed:.1f} s; {result.summary()}")
    assert elapsed < 2.0 + 3
    # every row read is accounted for; while the caller's own source holds the caller's
    # thread, nothing more is sent (that thread is the one that sends)
    assert result.counts["sent"] + result.counts["failed"] == 300
    assert result.counts["sent"] == sandbox.stats()["stored"]
    unsent = result.rows.loc[result.rows["status"] == "failed", "error"]
    assert (unsent == "not sent: deadline exceeded").all()
    assert result.not_read == "the input was not read to the end: no row after row 299 was read"
    assert result.exit_code == 2 and not result.ok


def test_an_interrupt_ends_a_run_whose_input_blocks_at_once(
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    figures: Figures,
) -> None:
    events = make_events(now, n=500, users=20)
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    interrupted_at: list[float] = []
    blocked = threading.Event()

    def ctrl_c_once_stored() -> None:
        # once the read hangs: a signal at a fixed time could land while the run starts,
        # or in a finaliser, where Python prints a KeyboardInterrupt and drops it
        assert blocked.wait(30)
        time.sleep(0.1)
        interrupted_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: a real signal wakes the blocked read

    killer = threading.Thread(target=ctrl_c_once_stored, daemon=True)
    # Ctrl-C as in a terminal: a job started in the background by a shell without job
    # control (as some CI runners start it) inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        killer.start()
        with pytest.raises(cc.Interrupted) as info:
            client.send_events(_hanging(events, 3, blocked), now=now)
    finally:
        signal.signal(signal.SIGINT, previous)
    ended = time.monotonic()
    killer.join(5)
    exc = info.value
    figures(f"input blocked: ended {ended - interrupted_at[0]:.2f} s after Ctrl-C; {exc}")
    assert exc.counts["sent"] + exc.counts["failed"] == 300  # every row read accounted
    assert exc.not_read == "the input was not read to the end: no row after row 299 was read"
    assert ended - interrupted_at[0] < 3.0  # the blocked read is not waited for
