"""The sandbox under load: events/s it ingests from the CLI, its CPU, and its memory.

    .venv/bin/python benchmarks/sandbox.py                        # 300k and 2M, then 1M with --db
    .venv/bin/python benchmarks/sandbox.py --events 300000 --db-events 10000000
    make bench BENCH_ARGS="--only sandbox"                        # the same, as a suite section

Each run starts the sandbox in its own process (``sandbox.py serve``: ``cc.Sandbox`` with
every strict check on, in memory, or with a database file for the ``--db-events`` runs),
then the CLI at default settings sends an N-row Parquet export to it. Reported: events/s
over the sandbox's busy span (first request in to last answer out) and over the CLI's whole
run (start-up included), the sandbox's CPU per event, and its resident memory sampled every
half second (peak, and its growth per million events after the first quarter: flat memory
is a growth near zero).

Checked on every run, at the receiver: the sandbox's own counts (N stored, no duplicates,
conflicts or refused requests), and the first 1,000 rows of the export, as stored, field by
field against what ``cc.events_to_wire`` makes of them. A run that stored fewer says LOST.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

import churn_connector as cc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exports
from harness import (
    HERE,
    KEY,
    Report,
    Row,
    child_env,
    cli_send,
    delivered_note,
    fmt,
)

SAMPLE_ROWS = 1_000  # rows whose stored events are compared field by field
SAMPLE_EVERY = 0.5  # seconds between the served process's memory samples
RUN_TIMEOUT = 3_600.0  # seconds; 10M events into a database file take ~10 min here


# ----------------------------------------------------------------------------- served side


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    # VmHWM belongs to this process image: ru_maxrss would start at the parent's size
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """Wraps the sandbox's request handler: events accepted, first request in, last answer
    out; and a sampler thread: (seconds, events accepted, RSS MiB) every SAMPLE_EVERY."""

    def __init__(self, sandbox: cc.Sandbox) -> None:
        self.lock = threading.Lock()
        self.accepted = 0
        self.first_in: float | None = None
        self.last_out: float | None = None
        self.cpu_at_first: float | None = None
        self.samples: list[tuple[float, int, float]] = []
        self.started = time.monotonic()
        engine = sandbox._engine  # the benchmark times the engine's own requests
        handle = engine.handle

        def timed(request: Any) -> Any:
            arrived = time.monotonic()
            with self.lock:
                if self.first_in is None:
                    self.first_in, self.cpu_at_first = arrived, _cpu_s()
            response = handle(request)
            with self.lock:
                if response.status == 200 and isinstance(response.body, dict):
                    self.accepted += int(response.body.get("accepted", 0))
                self.last_out = time.monotonic()
            return response

        engine.handle = timed  # type: ignore[method-assign]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(SAMPLE_EVERY):
            with self.lock:
                accepted = self.accepted
            self.samples.append((time.monotonic() - self.started, accepted, _rss_mib()))


def check_sample(sandbox: cc.Sandbox, expected: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare stored events with the expected wire events, by message id, field by field
    (``error``: the query does not fit this revision's tables, e.g. an older one's)."""
    from churn_connector._sandbox._store import app_id  # noqa: PLC0415 - serve side only

    wanted = {e["context"]["$message_id"]: e for e in expected}
    marks = ",".join("?" * len(wanted))
    # one query by id (events() would load every event); the marks are only "?"s
    query = (
        "SELECT message_id, external_user_id, event_type, occurred_at, properties, context "  # noqa: S608
        "FROM events WHERE app_no = (SELECT id FROM apps WHERE app = ?) "
        f"AND message_id IN ({marks})"
    )
    try:
        rows = sandbox._store._query(query, (app_id(KEY), *wanted))
    except sqlite3.Error as exc:
        return {"checked": 0, "missing": None, "mismatched": None, "error": str(exc)}
    mismatched = 0
    for message_id, user, kind, occurred, properties, context in rows:
        stored = {
            "external_user_id": user,
            "event_type": kind,
            "occurred_at": occurred,
            "properties": orjson.loads(properties),
            "context": orjson.loads(context),
        }
        mismatched += stored != wanted[message_id]
    return {"checked": len(rows), "missing": len(wanted) - len(rows), "mismatched": mismatched}


def serve(db: str | None) -> None:
    """The served side: a sandbox until a line arrives on stdin (the path of the expected
    sample), then one JSON line of what it measured and counted."""
    sandbox = cc.Sandbox(api_keys=[KEY], db=db).start()
    meter = Meter(sandbox)
    cpu_ready = _cpu_s()
    print(f"listening {sandbox.base_url}", flush=True)
    expect_path = sys.stdin.readline().strip()
    meter.stop.set()
    meter.thread.join()
    cpu_end = _cpu_s()
    expected = orjson.loads(Path(expect_path).read_bytes()) if expect_path else []
    result = {
        "stats": sandbox.stats(),
        "accepted": meter.accepted,
        "span_s": (
            meter.last_out - meter.first_in
            if meter.first_in is not None and meter.last_out is not None
            else None
        ),
        "cpu_s": cpu_end - cpu_ready,  # start-up excluded, the idle wait included (~0)
        "cpu_busy_s": cpu_end - (meter.cpu_at_first or cpu_ready),
        "peak_rss_mib": _peak_mib(),
        "samples": meter.samples,
        "sample_check": check_sample(sandbox, expected) if expected else None,
    }
    sandbox.close()
    print(orjson.dumps(result).decode(), flush=True)


# ----------------------------------------------------------------------------- harness side


def expected_sample(path: Path, rows: int = SAMPLE_ROWS) -> list[dict[str, Any]]:
    """What the package makes of the export's first ``rows`` rows (the same ids: an id is
    a hash of the event's content)."""
    first = next(pq.ParquetFile(path).iter_batches(rows))
    with tempfile.TemporaryDirectory() as tmp:
        head = Path(tmp, "head.parquet")
        pq.write_table(pa.Table.from_batches([first]), head)
        return cc.events_to_wire(head)


def run(path: Path, rows: int, db: str | None, timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    """One run: the served sandbox, the CLI sending ``path`` to it, what both measured."""
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp, "expected.json")
        sample.write_bytes(orjson.dumps(expected_sample(path)))
        load_before = os.getloadavg()
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "sandbox.py"), "serve", *(["--db", db] if db else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_env(),
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        killer = threading.Timer(timeout + 120, proc.kill)  # never wait forever
        killer.start()
        try:
            line = proc.stdout.readline().decode()
            if not line.startswith("listening "):
                raise RuntimeError(f"the sandbox did not start: {line!r}")
            url = line.split()[1]
            child = cli_send(path, url, timeout=timeout)
            proc.stdin.write(f"{sample}\n".encode())
            proc.stdin.flush()
            served = orjson.loads(proc.stdout.readline())
            proc.wait(timeout=120)
        finally:
            killer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        db_bytes = sum(
            Path(db + suffix).stat().st_size
            for suffix in ("", "-wal")
            if db and Path(db + suffix).exists()
        )
    return {
        "rows": rows,
        "db": db is not None,
        "client": {
            "returncode": child.returncode,
            "wall_s": child.wall_s,
            "cpu_s": child.cpu_s,
            "maxrss_mib": child.maxrss_mib,
            "tail": child.tail() if child.returncode else "",
        },
        "served": served,
        "db_bytes": db_bytes,
        "load_average": [load_before, os.getloadavg()],
    }


def growth(samples: list[list[float]], rows: int) -> tuple[float | None, float | None, float]:
    """(RSS MiB once a quarter of the events were in, RSS MiB at the end, growth in bytes
    per event between the two)."""
    after = [s for s in samples if s[1] >= rows / 4]
    if not after:
        return None, None, float("nan")
    first, last = after[0], after[-1]
    events = last[1] - first[1]
    per_event = (last[2] - first[2]) * 2**20 / events if events else float("nan")
    return first[2], last[2], per_event


def problems(result: dict[str, Any]) -> list[str]:
    """What went wrong in one run, at the receiver (empty: every event stored as sent)."""
    rows, served, client = result["rows"], result["served"], result["client"]
    stats = served["stats"]
    found = []
    if client["returncode"] != 0:
        found.append(f"churn-connector exited {client['returncode']}: {client['tail']}")
    if stats["stored"] != rows:
        found.append(delivered_note(stats["stored"], rows))
    for name in ("duplicates", "conflicts", "rejected"):
        if stats[name]:
            found.append(f"{stats[name]:,} {name}")
    check = served["sample_check"] or {}
    if check.get("missing") or check.get("mismatched"):
        found.append(
            f"sample of {SAMPLE_ROWS:,}: {check.get('missing')} missing, "
            f"{check.get('mismatched')} stored otherwise than sent"
        )
    return found


def rows_of(result: dict[str, Any]) -> list[Row]:
    """The report rows of one run."""
    rows, served, client = result["rows"], result["served"], result["client"]
    span = served["span_s"]
    stored = served["stats"]["stored"]
    load = ", ".join(f"{x:.1f}" for x in result["load_average"][0])
    where = "database file (--db)" if result["db"] else "in memory (the default)"
    k = f"{rows // 1000:,}k" if rows < 1_000_000 else f"{rows / 1e6:g}M"
    check = served["sample_check"] or {}
    if check.get("error"):
        sampled = f"sample not checked ({check['error']})"
    else:
        sampled = f"sample of {check.get('checked', 0):,} stored events " + (
            "identical to events_to_wire" if not problems(result) else "NOT as sent"
        )
    notes = [
        delivered_note(stored, rows),
        sampled,
        f"CLI wall {client['wall_s']:.1f} s = {rows / client['wall_s']:,.0f} events/s "
        "with its start-up",
        f"sandbox CPU {served['cpu_busy_s'] / rows * 1e6:.1f} µs/event",
        f"peak RSS {served['peak_rss_mib']:,.0f} MiB (client {client['maxrss_mib']:,.0f})",
        f"load {load}",
    ]
    if result["db"]:
        notes.append(f"file {result['db_bytes'] / 2**20:,.0f} MiB")
    out = [
        Row(
            "sandbox",
            f"sandbox ingest, {k} events from the CLI at defaults, {where}",
            stored / span if span else None,
            "events/s",
            "; ".join(notes),
            details=result,
        )
    ]
    quarter, end, per_event = growth(served["samples"], rows)
    if result["db"] and quarter is not None and end is not None:
        out.append(
            Row(
                "sandbox",
                f"sandbox RSS growth, {k} events into a database file",
                per_event,
                "bytes/event",
                f"RSS {quarter:,.0f} MiB at a quarter of the events, {end:,.0f} MiB at the end, "
                f"peak {served['peak_rss_mib']:,.0f} MiB; flat memory is a growth near 0",
            )
        )
    return out


def section(
    report: Report, cache: Path, events: list[int], db_events: list[int]
) -> list[dict[str, Any]]:
    """Every run, in memory then with a database file; rows and problems into ``report``."""
    results = []
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        runs = [(n, None) for n in events] + [
            (n, str(Path(tmp, f"sandbox-{n}.db"))) for n in db_events
        ]
        for n, db in runs:
            path = exports.export(cache, n, "parquet")
            result = run(path, n, db)
            results.append(result)
            for problem in problems(result):
                report.problem(f"sandbox {n:,} rows{' --db' if db else ''}: {problem}")
            for row in rows_of(result):
                report.add(row)
            if db:
                for suffix in ("", "-wal", "-shm"):
                    Path(db + suffix).unlink(missing_ok=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    served = sub.add_parser("serve", help="(internal) the served sandbox of one run")
    served.add_argument("--db")
    parser.add_argument("--events", type=int, nargs="*", default=[300_000, 2_000_000])
    parser.add_argument("--db-events", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--cache", type=Path, default=HERE / ".cache")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.db)
        return 0
    report = Report()
    args.cache.mkdir(parents=True, exist_ok=True)  # a fresh clone has no benchmarks/.cache
    results = section(report, args.cache, args.events, args.db_events)
    for row in report.rows:
        shown = "n/a" if row.value is None else f"{fmt(row.value)} {row.unit}"
        print(f"{row.name}: {shown}\n    {row.note}")
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    if args.json:
        args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
