"""A run that stops part way accounts for every input row: the rows never read are ``failed``
"not sent" where the input's length is known; where it is not, the exception, the summary
and the result files say from which row on the input was not read. The stop here is real:
the key refused (401) from the 4th request on, answered by the fault proxy over HTTP."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.conftest import Figures, MakeEvents
from tests.faultproxy import FaultProxy

pytestmark = pytest.mark.e2e  # real HTTP throughout

N_ROWS, BATCH, PASSING = 20_000, 500, 3  # the 4th request on is refused
SENT = PASSING * BATCH


@pytest.fixture
def refusing(sandbox: cc.Sandbox) -> Iterator[FaultProxy]:
    """The first PASSING requests reach the sandbox; every later one is answered 401."""
    with FaultProxy(sandbox.base_url, script=["pass"] * PASSING, mode="unauthorized") as proxy:
        yield proxy


def _send(proxy: FaultProxy, sandbox: cc.Sandbox, data: object) -> cc.RunStopped:
    client = cc.Client(proxy.url, sandbox.api_key, max_concurrency=1, batch_size=BATCH)
    with pytest.raises(cc.AuthenticationError) as info:
        client.send_events(data, slice_rows=2_000)
    return info.value


@pytest.mark.parametrize("kind", ["dataframe", "parquet"])
def test_a_run_stopped_by_a_401_accounts_for_every_row_of_an_input_of_known_length(
    kind: str,
    refusing: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
    figures: Figures,
) -> None:
    events = make_events(now, n=N_ROWS, users=50)
    data: object = events
    if kind == "parquet":
        events.to_parquet(tmp_path / "events.parquet")
        data = tmp_path / "events.parquet"
    stopped = _send(refusing, sandbox, data)
    assert stopped.rows is not None
    assert sum(stopped.counts.values()) == len(stopped.rows) == N_ROWS
    assert stopped.counts["sent"] == SENT == sandbox.stats()["stored"]
    assert stopped.counts["failed"] == N_ROWS - SENT
    assert list(stopped.rows.index) == list(range(N_ROWS))  # the input's own labels
    unsent = stopped.rows.loc[stopped.rows["status"] == "failed", "error"]
    assert unsent.str.startswith("not sent: the run stopped (").all()
    assert stopped.not_read is None
    figures(f"{kind}: {sum(stopped.counts.values()):,} of {N_ROWS:,} rows accounted")


def test_a_stopped_generator_says_from_which_row_it_was_not_read(
    refusing: FaultProxy, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=N_ROWS, users=50)

    def slices() -> Iterator[pd.DataFrame]:
        for first in range(0, N_ROWS, 2_000):
            yield events.iloc[first : first + 2_000]

    stopped = _send(refusing, sandbox, slices())
    assert stopped.rows is not None
    read = len(stopped.rows)
    assert SENT < read < N_ROWS  # only what was read is in the book; its length is unknown
    assert sum(stopped.counts.values()) == read
    last = stopped.rows.index[-1]
    said = f"the input was not read to the end: no row after row {last} was read"
    assert stopped.not_read == said
    assert said[:1].upper() + said[1:] in str(stopped)


def test_the_rows_file_of_a_stopped_csv_send_ends_with_a_row_saying_the_input_was_cut(
    refusing: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    make_events(now, n=N_ROWS, users=50).to_csv(tmp_path / "events.csv", index=False)
    rows = tmp_path / "rows.csv"
    argv = ["send", "events", str(tmp_path / "events.csv"), "--base-url", refusing.url]
    argv += ["--batch-size", str(BATCH), "--concurrency", "1", "--slice-rows", "2000"]
    assert main([*argv, "--rows", str(rows), "-q"]) == 3
    assert "The input was not read to the end: no row after row" in capsys.readouterr().err
    written = pd.read_csv(rows, keep_default_na=False)
    *read, marker = written.itertuples(index=False)
    assert SENT < len(read) < N_ROWS
    assert (marker.row, marker.status) == ("", "failed")
    assert (
        marker.error
        == f"the input was not read to the end: no row after row {read[-1].row} was read"
    )


def test_a_stopped_run_writes_what_its_ledger_buffered(
    refusing: FaultProxy,
    sandbox: cc.Sandbox,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
) -> None:
    client = cc.Client(refusing.url, sandbox.api_key, max_concurrency=1, batch_size=BATCH)
    ledger = cc.Ledger(tmp_path / "ledger.sqlite")  # the caller's: the run does not close it
    with pytest.raises(cc.AuthenticationError) as info:
        client.send_events(make_events(now, n=4_000, users=50), ledger=ledger, slice_rows=2_000)
    assert info.value.counts["sent"] == SENT
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM acknowledged WHERE kind = 'events'").fetchone() == (
            SENT,
        )
    ledger.close()
