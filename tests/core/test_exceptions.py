"""Exceptions: one root for errors, interrupts that no ``except Exception`` swallows, the
tree drawn in the module's docstring, typed keyword-only attributes, ``retryable``, and every
one survives pickling (Airflow and Spark move them between processes)."""

from __future__ import annotations

import inspect
import pickle
import re
import signal
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._core import exceptions
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
    cc.StorageError("disk full", path="/tmp/x", errno=28, counts={"failed": 1}, retryable=True),
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


def test_an_interrupt_is_a_keyboard_interrupt_not_an_error() -> None:
    assert isinstance(INTERRUPTED, KeyboardInterrupt)
    assert not isinstance(INTERRUPTED, Exception)
    assert not isinstance(INTERRUPTED, cc.ChurnConnectorError)
    assert not isinstance(INTERRUPTED, cc.RunStopped)  # that would make it an Exception


@pytest.mark.parametrize("exc", [*STOPPED, INTERRUPTED], ids=lambda e: type(e).__name__)
def test_every_stopped_run_carries_its_results_under_one_name(
    exc: cc.RunStopped | cc.Interrupted,
) -> None:
    with pytest.raises((cc.RunStopped, cc.Interrupted)) as info:
        raise exc
    caught = info.value
    assert isinstance(caught, cc.RunStopped | cc.Interrupted)
    assert sum(caught.counts.values()) > 0
    assert caught.rows is None or caught.rows.equals(FRAME)
    full = exc.with_results({"sent": 5}, FRAME, FRAME)
    assert type(full) is type(exc)
    assert full.counts == {"sent": 5}
    assert full.retryable == exc.retryable


def test_errors_that_stop_a_run_are_errors_too() -> None:
    assert issubclass(cc.RunStopped, cc.ChurnConnectorError)
    for cls in (
        cc.InputError,
        cc.TransportError,
        cc.AuthenticationError,
        cc.LedgerError,
        cc.StorageError,
    ):
        assert issubclass(cls, cc.RunStopped)
        assert issubclass(cls, Exception)
    assert not issubclass(cc.DeliveryError, cc.RunStopped)  # the run finished


def test_an_error_where_no_run_was_going_has_no_results() -> None:
    # an unreadable file given to validate_events, a refused key on track(): no frames
    for exc in (cc.InputError("broken", path="/x.csv"), cc.RunStopped("stopped")):
        assert (exc.counts, exc.rows, exc.chunks, exc.not_read) == ({}, None, None, None)


# -- the tree drawn in the module's docstring is the class tree ---------------------------

PUBLIC = {name: getattr(cc, name) for name in exceptions.__all__}
_LINE = re.compile(r"^(?P<lead>[ │├└─]*)(?P<name>[A-Z]\w*)(?P<rest>.*)$")


def drawn_tree() -> dict[str, tuple[str | None, str]]:
    """class -> (its parent in the drawing, the rest of its line), from the docstring."""
    doc = exceptions.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, tuple[str | None, str]] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name), the current branch
    for line in block.splitlines():
        match = _LINE.match(line.strip("\n"))
        assert match, f"not a line of the tree: {line!r}"
        column = len(match["lead"])
        while stack and stack[-1][0] >= column:
            stack.pop()
        drawn[match["name"]] = (stack[-1][1] if stack else None, match["rest"])
        stack.append((column, match["name"]))
    return drawn


def public_parents(cls: type) -> list[str]:
    """The nearest public classes above ``cls``: the package's private bases (``_Described``,
    ``_RunResults``) are skipped, and so is a class that another parent derives from."""

    def above(c: type) -> list[type]:
        found: list[type] = []
        for base in c.__bases__:
            for p in above(base) if base.__name__.startswith("_") else [base]:
                if p not in found and p is not object:
                    found.append(p)
        return found

    parents = above(cls)
    return [
        p.__name__ for p in parents if not any(q is not p and issubclass(q, p) for q in parents)
    ]


def test_the_tree_in_the_docstring_is_the_class_tree() -> None:
    drawn = drawn_tree()
    assert set(drawn) == {*PUBLIC, "Exception", "KeyboardInterrupt"}
    for name, cls in PUBLIC.items():
        parent, _ = drawn[name]
        assert public_parents(cls) == [parent], f"{name}: drawn under {parent}"


def test_every_class_has_one_public_parent_and_one_root_but_interrupted() -> None:
    for name, cls in PUBLIC.items():
        assert len(public_parents(cls)) == 1, name
        if cls is not cc.Interrupted:
            assert issubclass(cls, cc.ChurnConnectorError), name
    assert public_parents(cc.Interrupted) == ["KeyboardInterrupt"]
    assert public_parents(cc.ChurnConnectorError) == ["Exception"]


@pytest.mark.parametrize("name", sorted(exceptions.__all__))
def test_the_docstring_names_each_class_attributes_and_retryable(name: str) -> None:
    cls = PUBLIC[name]
    _, rest = drawn_tree()[name]
    keywords = {
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }
    for attribute in re.findall(r"\.(\w+)", rest):
        assert attribute in keywords, f"{name}: .{attribute} is drawn but not a keyword"
    said = rest.split()[-1]  # the retryable column: yes, no, starred when per instance
    if said.rstrip("*") in ("yes", "no"):
        assert cls.retryable is (said.rstrip("*") == "yes"), name
    if said.endswith("*"):
        assert "retryable" in keywords, f"{name}: decided per instance, so a keyword"


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
