"""Exceptions: one root for errors, interrupts that no ``except Exception`` swallows, typed
keyword-only attributes, ``retryable``, and every one survives pickling (Airflow and Spark
move them between processes)."""

from __future__ import annotations

import pickle
import signal
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._ledger import ScopedLedger
from churn_connector._ledger.sqlite import SqliteLedger

FRAME = pd.DataFrame({"row": [0, 1], "status": ["sent", "failed"]})
EXAMPLES: list[cc.ChurnConnectorError] = [
    cc.ChurnConnectorError("root"),
    cc.ConfigurationError("bad option"),
    cc.InputError("broken file", path="/data/x.csv", line=12),
    cc.DataValidationError("2 invalid", n_invalid=2, n_rows=10),
    cc.TransportError("stopped", status=404, attempts=1, counts={"failed": 3}, rows=FRAME),
    cc.AuthenticationError("refused", status=401, attempts=1, counts={"failed": 2}),
    cc.DeliveryError("not delivered", counts={"failed": 3}, rows=FRAME, chunks=FRAME),
    cc.LedgerError("locked", path="/l.sqlite", counts={"sent": 1}, rows=FRAME, retryable=True),
]
INTERRUPTED = cc.Interrupted(
    "interrupted: 1 of 2 rows delivered",
    signal=int(signal.SIGTERM),
    counts={"sent": 1, "failed": 1},
    rows=FRAME,
    chunks=FRAME,
)
STOPPED: list[cc.RunStopped] = [
    cc.InputError("broken", path="/x.csv", counts={"sent": 1}, rows=FRAME, chunks=FRAME),
    cc.TransportError("unreachable", attempts=1, counts={"failed": 2}, rows=FRAME),
    cc.AuthenticationError("refused", status=401, counts={"failed": 2}),
    cc.LedgerError("read-only", path="/l.sqlite", counts={"sent": 1}),
    INTERRUPTED,
]


@pytest.mark.parametrize("exc", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_exception_derives_from_the_root(exc: Exception) -> None:
    assert isinstance(exc, cc.ChurnConnectorError)


@pytest.mark.parametrize("exc", [*EXAMPLES, *STOPPED], ids=lambda e: type(e).__name__)
def test_exceptions_pickle_with_message_and_typed_attributes(exc: BaseException) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    for name, value in vars(exc).items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(getattr(back, name), value)
        else:
            assert getattr(back, name) == value


def test_attributes_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        cc.TransportError("stopped", 401)  # type: ignore[call-arg]


def test_a_transport_error_carries_the_results_of_the_stopped_run() -> None:
    exc = cc.AuthenticationError("refused", status=403, attempts=2)
    full = exc.with_results({"sent": 1}, FRAME, FRAME)
    assert type(full) is cc.AuthenticationError
    assert (full.status, full.attempts, full.counts) == (403, 2, {"sent": 1})


def test_authentication_error_is_a_transport_error() -> None:
    assert issubclass(cc.AuthenticationError, cc.TransportError)


def test_an_interrupt_passes_through_except_exception() -> None:
    # a notebook's or a task's ``except Exception:`` must not swallow Ctrl-C or a kill
    def careless_caller() -> str:
        try:
            raise INTERRUPTED
        except Exception:
            return "swallowed"

    with pytest.raises(cc.Interrupted) as info:
        careless_caller()
    assert info.value is INTERRUPTED


def test_an_interrupt_is_a_keyboard_interrupt_and_a_stopped_run_not_an_error() -> None:
    assert isinstance(INTERRUPTED, KeyboardInterrupt)
    assert isinstance(INTERRUPTED, cc.RunStopped)
    assert not isinstance(INTERRUPTED, Exception)
    assert not isinstance(INTERRUPTED, cc.ChurnConnectorError)


@pytest.mark.parametrize("exc", STOPPED, ids=lambda e: type(e).__name__)
def test_every_stopped_run_carries_its_results_under_one_name(exc: cc.RunStopped) -> None:
    with pytest.raises(cc.RunStopped) as info:
        raise exc
    assert sum(info.value.counts.values()) > 0
    assert info.value.rows is None or info.value.rows.equals(FRAME)
    full = exc.with_results({"sent": 5}, FRAME, FRAME)
    assert type(full) is type(exc)
    assert full.counts == {"sent": 5}
    assert full.retryable == exc.retryable


def test_errors_that_stop_a_run_are_errors_too() -> None:
    for cls in (cc.InputError, cc.TransportError, cc.AuthenticationError, cc.LedgerError):
        assert issubclass(cls, cc.RunStopped)
        assert issubclass(cls, cc.ChurnConnectorError)
        assert issubclass(cls, Exception)
    assert not issubclass(cc.DeliveryError, cc.RunStopped)  # the run finished


def test_the_private_name_of_run_stopped_still_works() -> None:
    from churn_connector._core.exceptions import _RunStopped  # noqa: PLC0415 - the old name

    assert _RunStopped is cc.RunStopped


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (cc.ChurnConnectorError("root"), False),
        (cc.ConfigurationError("bad option"), False),
        (cc.DataValidationError("2 invalid", n_invalid=2, n_rows=10), False),
        (cc.InputError("broken file", path="/x.csv"), False),
        (cc.InputError("reading failed part way: timed out", retryable=True), True),
        (cc.TransportError("connection refused"), True),
        (cc.TransportError("TLS certificate not trusted", retryable=False), False),
        (cc.AuthenticationError("refused", status=401), False),
        (cc.LedgerError("read-only", path="/l.sqlite"), False),
        (cc.LedgerError("locked", path="/l.sqlite", retryable=True), True),
        (cc.DeliveryError("rows failed", counts={"failed": 2, "rejected": 1}), True),
        (cc.DeliveryError("rows rejected", counts={"failed": 0, "rejected": 3}), False),
        (cc.DeliveryError("rows invalid", counts={"invalid": 3}), False),
        (INTERRUPTED, True),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_every_exception_says_whether_retrying_can_help(
    exc: BaseException,
    retryable: bool,  # noqa: FBT001
) -> None:
    assert getattr(exc, "retryable") is retryable  # noqa: B009 - every class declares it
    assert pickle.loads(pickle.dumps(exc)).retryable is retryable


def test_a_ledger_locked_by_another_process_is_retryable_a_read_only_one_is_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.sqlite"
    with cc.Ledger(path):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the file
    try:
        with SqliteLedger(path) as locked:
            locked._db.execute("PRAGMA busy_timeout = 0")  # fail at once, not in 30 s
            with pytest.raises(cc.LedgerError) as info:
                ScopedLedger(locked, "scope").record("events", [("k", "d")])
        assert info.value.retryable
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with SqliteLedger(path) as read_only:
        read_only._db.execute("PRAGMA query_only = ON")  # as a file mounted read-only answers
        with pytest.raises(cc.LedgerError) as info:
            ScopedLedger(read_only, "scope").record("events", [("k", "d")])
    assert not info.value.retryable
