"""Concurrent workers on one ledger: processes of their own (as Airflow's mapped tasks or
Spark's tasks are), sending overlapping data through one ledger, each one exactly right;
a worker killed mid-run, and a PostgreSQL server stopped mid-run, lose nothing."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._ledger import redact, scope_of
from tests.ledger.conftest import location
from tests.ledger.servers import PG_PASSWORD, PostgresServer
from tests.ledger.writer import events_table, users_table

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.e2e


def start_writer(
    url: str, sandbox: cc.Sandbox, now: pd.Timestamp, *args: str
) -> subprocess.Popen[str]:
    env = {**os.environ, "CHURN_BASE_URL": sandbox.base_url, "CHURN_API_KEY": sandbox.api_key}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ledger.writer", url, now.isoformat(), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> list[dict[str, dict[str, int]]]:
    """Each worker's counts, once all are done."""
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-3000:]
    counts: list[dict[str, dict[str, int]]] = json.loads(out.strip().splitlines()[-1])
    return counts


def delivered(counts: dict[str, int]) -> int:
    """Rows sent or skipped; the rest must be none."""
    assert counts["invalid"] == counts["failed"] == counts["rejected"] == 0, counts
    return counts["sent"] + counts["skipped"]


@pytest.mark.parametrize(
    ("backend", "workers"),
    [("postgres", 2), ("postgres", 8), ("file", 8), ("s3", 2), ("sqlite", 2)],
)
def test_concurrent_workers_sharing_a_ledger_record_exactly_what_was_acknowledged(
    backend: str,
    workers: int,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    url = location(backend, request, tmp_path)
    # worker i sends events [100 i, 100 i + 200) and users [10 i, 10 i + 20): each half
    # overlaps a neighbour's, so workers race on the same keys
    writers = start_writer(url, sandbox, now, "--events", "0", "200", "--users", "0", "20",
                           "--workers", str(workers))  # fmt: skip
    exactly_right(url, sandbox, now, finished(writers), workers)


def exactly_right(
    url: str,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    results: list[dict[str, dict[str, int]]],
    workers: int,
    events_span: int = 200,
    users_span: int = 20,
) -> None:
    """Every worker delivered its share; the API and the ledger hold each row once."""
    assert len(results) == workers
    for counts in results:
        assert delivered(counts["events"]) == events_span
        assert delivered(counts["identities"]) == delivered(counts["changed"]) == users_span
    events = events_table(now, 0, events_span // 2 * (workers + 1))
    users = users_table(0, users_span // 2 * (workers + 1), changed=True)
    stats = sandbox.stats()
    assert (stats["stored"], stats["conflicts"]) == (len(events), 0)
    with cc.Ledger(url) as ledger:
        assert ledger.count("events") == len(events)
        assert ledger.count("identities") == len(users)
    # the ledger holds what the API holds: a re-run of everything sends nothing
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    again = client.send_events(events, now=now, ledger=url, progress=False)
    assert (again.counts["sent"], again.counts["skipped"]) == (0, len(events))
    assert client.identify(users, ledger=url, progress=False).counts["skipped"] == len(users)
    held = sandbox.users().set_index("external_user_id")["traits"]
    assert all(
        held[u] == {"plan": p}
        for u, p in zip(users["external_user_id"], users["traits.plan"], strict=True)
    )


MERGED = re.compile(r"^merged ([\d,]+) segment files")


@pytest.mark.parametrize(("backend", "workers"), [("file", 4), ("s3", 2)])
def test_compaction_while_workers_write_loses_nothing_and_resurrects_nothing(
    backend: str,
    workers: int,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    figures: Any,
) -> None:
    url = location(backend, request, tmp_path)
    # a segment per acknowledged request, tombstones before changed users: many small
    # files appear while the compactions below merge and delete the ones they listed
    writers = start_writer(url, sandbox, now, "--events", "0", "200", "--users", "0", "20",
                           "--workers", str(workers), "--batch-size", "10",
                           "--segment-requests", "1")  # fmt: skip
    compactions = merged = 0
    deadline = time.monotonic() + 150
    with cc.Ledger(url) as ledger:
        while writers.poll() is None and time.monotonic() < deadline:
            found = MERGED.match(ledger.compact())
            assert found is not None
            compactions += 1
            merged += int(found.group(1).replace(",", ""))
    assert compactions >= 2 and merged > 0  # they ran while the workers wrote
    exactly_right(url, sandbox, now, finished(writers), workers)
    figures(f"{backend}: {compactions} compactions merged {merged} segments during the writes")


def count_when(url: str, kind: str, at_least: int, process: subprocess.Popen[str]) -> int:
    """The ledger's records of ``kind`` once there are ``at_least`` (the writer still runs)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the writer ended before it could be killed"
        with cc.Ledger(url, read_only=True) as ledger:
            found = ledger.count(kind)
        if found >= at_least:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the ledger never held {at_least} records")


@pytest.mark.parametrize("backend", ["postgres", "file"])
def test_a_worker_killed_mid_run_loses_nothing_and_a_rerun_completes(
    backend: str,
    now: pd.Timestamp,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    figures: Any,
) -> None:
    url = location(backend, request, tmp_path)
    with cc.Sandbox(latency=0.02) as sandbox:
        writer = start_writer(url, sandbox, now, "--events", "0", "3000", "--batch-size", "10")
        # segments are written after the first acknowledgement, then every 1000 requests
        recorded = count_when(url, "events", 200 if backend == "postgres" else 10, writer)
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        stored_then = sandbox.stats()["stored"]
        sandbox.set_faults(latency=0.0)
        events = events_table(now, 0, 3000)
        client = cc.Client(sandbox.base_url, sandbox.api_key)
        result = client.send_events(events, now=now, ledger=url, batch_size=100, progress=False)
        assert delivered(result.counts) == len(events)
        assert result.counts["skipped"] >= recorded  # what was recorded is not sent again
        stats = sandbox.stats()
        assert (stats["stored"], stats["conflicts"]) == (len(events), 0)
    with cc.Ledger(url) as ledger:
        assert ledger.count("events") == len(events)
    figures(
        f"{backend}: killed with {recorded} recorded, {stored_then} stored; the re-run skipped "
        f"{result.counts['skipped']}, sent {result.counts['sent']} ({stats['duplicates']} re-sent)"
    )


def test_a_postgres_server_stopped_mid_run_stops_the_run_loudly_and_loses_nothing(
    postgres: PostgresServer,
    pg_url: str,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = events_table(now, 0, 1200)

    def slices() -> Iterator[pd.DataFrame]:
        for i, lo in enumerate(range(0, len(events), 200)):
            if i == 2:
                postgres.stop()  # while the first slices' requests are in flight or recorded
            yield events.iloc[lo : lo + 200]

    client = cc.Client(sandbox.base_url, sandbox.api_key, max_concurrency=2)
    try:
        with (
            caplog.at_level(logging.DEBUG),
            pytest.raises(cc.LedgerError) as info,
        ):
            client.send_events(slices(), now=now, ledger=pg_url, batch_size=20, progress=False)
    finally:
        postgres.start()
    error = info.value
    assert error.path == redact(pg_url) and ":***@" in error.path
    assert error.retryable  # the server may come back
    # every row read is accounted; the caller's slices are read up to two ahead of the
    # ones booked, so the server may stop with only the first slice in the book
    assert error.rows is not None and sum(error.counts.values()) == len(error.rows) >= 200
    shown = " ".join([str(error), repr(error), error.path, caplog.text, error.rows.to_csv()])
    assert PG_PASSWORD not in shown
    again = client.send_events(events, now=now, ledger=pg_url, batch_size=20, progress=False)
    assert delivered(again.counts) == len(events)
    stats = sandbox.stats()
    assert (stats["stored"], stats["conflicts"]) == (len(events), 0)
    with cc.Ledger(pg_url) as ledger:
        scope = scope_of(client.config.base_url, client.config.api_key)
        assert len(ledger.known(scope, "events", list(again.rows["message_id"]))) == len(events)
