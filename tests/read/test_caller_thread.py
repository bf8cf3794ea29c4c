"""The caller's objects stay on the caller's thread: a generator, a sqlite3 cursor behind
``pd.read_sql(..., chunksize=)``, a DuckDB cursor's reader are read only on the thread that
called; a caller's iterable that raises stops the run with an InputError carrying what was
delivered; an interrupt still ends a send while that thread reads. Over real HTTP."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc
from churn_connector._read import read_by_caller
from tests.conftest import MakeEvents
from tests.delivery.test_interrupts import EXIT_BOUND, start, wait_until_stalled
from tests.faultproxy import FaultProxy

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def texts(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as a database holds it: timestamps as RFC 3339 text."""
    return frame.assign(occurred_at=frame["occurred_at"].map(lambda t: t.isoformat()))


def test_read_sql_chunks_over_a_sqlite3_connection_are_delivered_exactly(
    client: cc.Client, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = texts(make_events(now, n=1_200, users=40))
    con = sqlite3.connect(":memory:")  # sqlite3 refuses any other thread
    events.to_sql("events", con, index=False)
    chunks = pd.read_sql("SELECT * FROM events ORDER BY rowid", con, chunksize=250)
    result = client.send_events(chunks, now=now, batch_size=100)
    assert result.counts["sent"] == 1_200 == sandbox.stats()["stored"]
    stored = sandbox.events().sort_values("external_user_id", kind="stable")
    assert sorted(stored["properties"].map(lambda p: p["seq"])) == list(range(1_200))


def test_identify_reads_read_sql_chunks_on_the_callers_thread(
    client: cc.Client, sandbox: cc.Sandbox
) -> None:
    users = pd.DataFrame(
        {"external_user_id": [f"u{i}" for i in range(300)], "email": "a@example.com"}
    )
    con = sqlite3.connect(":memory:")
    users.to_sql("users", con, index=False)
    result = client.identify(pd.read_sql("SELECT * FROM users", con, chunksize=70))
    assert result.counts["sent"] == 300 == len(sandbox.users())


def test_a_duckdb_cursors_arrow_reader_is_delivered(
    client: cc.Client, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    con = duckdb.connect()
    con.register("frame", make_events(now, n=900, users=30))
    con.execute("CREATE TABLE events AS SELECT * FROM frame")
    # DuckDB 2's fetch_record_batch(): a RecordBatchReader over a running query, which
    # holds the cursor until it is read through
    reader = con.cursor().sql("SELECT * FROM events").to_arrow_reader(200)
    result = client.send_events(reader, now=now, batch_size=100)
    assert result.counts["sent"] == 900 == sandbox.stats()["stored"]


def test_a_callers_generator_runs_only_on_the_calling_thread(
    client: cc.Client, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    seen: set[int] = set()
    events = make_events(now, n=3_000)

    def frames() -> Iterator[pd.DataFrame]:
        for first in range(0, 3_000, 500):
            seen.add(threading.get_ident())
            yield events.iloc[first : first + 500]

    result = client.send_events(frames(), now=now, slice_rows=200)
    assert result.counts["sent"] == 3_000
    assert seen == {threading.get_ident()}


def test_a_callers_iterable_that_raises_half_way_stops_with_what_was_delivered(
    client: cc.Client, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=2_400, users=20)

    def frames() -> Iterator[pd.DataFrame]:
        for first in range(0, 2_400, 600):
            if first == 1_200:
                raise sqlite3.OperationalError("database is locked")
            yield events.iloc[first : first + 600]

    with pytest.raises(cc.InputError) as info:
        client.send_events(frames(), now=now, batch_size=100)
    error = info.value
    assert str(error) == (
        "reading the input's iterable failed after 1,200 rows: "
        "it raised sqlite3.OperationalError: database is locked"
    )
    # every row read before the break was delivered (the requests in flight landed); the
    # rows after it never entered the book
    assert error.counts["sent"] == 1_200 == sandbox.stats()["stored"]
    assert error.rows is not None and len(error.rows) == 1_200
    assert isinstance(error.__cause__, cc.InputError)


def test_a_callers_reader_that_raises_is_an_input_error_too(
    client: cc.Client, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    con = duckdb.connect()
    con.register("events", make_events(now, n=10))
    # the query fails while it runs: the 6th row cannot be cast
    relation = con.sql(
        "SELECT external_user_id, event_type, occurred_at, "
        "CAST(CASE WHEN \"properties.seq\" = 5 THEN 'x' ELSE '1' END AS INTEGER) AS n "
        "FROM events"
    )
    with pytest.raises(cc.InputError, match=r"reading the duckdb .* failed after 0 rows"):
        client.send_events(relation, now=now)


CHILD = """
import json, sys
from datetime import timedelta
import pandas as pd
import churn_connector as cc
from churn_connector._read import read_by_caller

now = pd.Timestamp.now(tz="UTC")


def frames():
    for k in range(40):
        yield pd.DataFrame(
            {
                "external_user_id": [f"u{i % 50}" for i in range(50)],
                "event_type": "login",
                "occurred_at": [now - timedelta(minutes=k * 50 + i + 60) for i in range(50)],
            },
            index=range(k * 50, k * 50 + 50),
        )


try:
    cc.Client(sys.argv[1], sys.argv[2], max_concurrency=4).send_events(
        frames(), batch_size=50, slice_rows=50, progress=False
    )
except cc.Interrupted as exc:
    print(json.dumps({"counts": exc.counts, "rows": len(exc.rows)}))
    sys.exit(0)
sys.exit(5)
"""


def test_ctrl_c_stops_a_send_that_reads_the_callers_generator(sandbox: cc.Sandbox) -> None:
    with FaultProxy(sandbox.base_url, script=["pass"] * 10, mode="stall") as proxy:
        proc = start([sys.executable, "-c", CHILD, proxy.url, sandbox.api_key], {})
        wait_until_stalled(proxy, proc)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - started
    assert proc.returncode == 0, err
    assert elapsed < EXIT_BOUND
    report = json.loads(out)
    assert report["counts"]["sent"] == 10 * 50
    assert report["rows"] == sum(report["counts"].values())


def test_only_the_callers_objects_are_read_on_the_callers_thread(tmp_path: Path) -> None:
    # what the package reads itself is read ahead on the building thread, as before
    assert not read_by_caller([str(tmp_path / "a.parquet"), pd.DataFrame(), pa.table({})])
    assert read_by_caller(iter([pd.DataFrame()]))
    assert read_by_caller([pa.table({}), pa.RecordBatchReader.from_batches(pa.schema([]), [])])


def test_the_deadline_holds_while_the_callers_thread_reads_and_sends(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=40)

    def frames() -> Iterator[pd.DataFrame]:
        for first in range(0, 40, 10):
            yield events.iloc[first : first + 10]

    with FaultProxy(sandbox.base_url, mode="trickle") as proxy:
        proxy.trickle_interval = 1.0  # one byte a second: no read timeout ever fires
        client = cc.Client(proxy.url, sandbox.api_key, deadline=2.0, read_timeout=30.0)
        started = time.monotonic()
        result = client.send_events(frames(), now=now, batch_size=10)
        elapsed = time.monotonic() - started
    assert elapsed < 2.0 + 5  # the deadline plus a few seconds
    assert result.counts["failed"] == 40
    assert result.rows["error"].str.contains("deadline").all()
