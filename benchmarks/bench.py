"""The benchmark suite of churn_connector: one table on stdout, the same in JSON.

    make bench                                   # installs .[dev,bench] and .venv-bench, runs this
    .venv/bin/python benchmarks/bench.py [--quick] [--only e2e,peers] [--rows N] ...

Sections (``--only`` / ``--skip`` take a comma-separated list):

* ``transform``: rows/s of the events path without network, stage by stage (read, pandera
  validation, wire JSON + message ids, ids alone) and whole (an in-process dry run), on a
  typed Parquet export and on a CSV export whose timestamps are RFC 3339 text;
* ``cpu``: client CPU per delivered event: the real CLI as a child process against the
  receiver (another process), ``(CPU(N rows) - CPU(1k rows)) / (N - 1k)`` from the child's
  user + sys time, for the bench's own export shape and flat typed columns, Parquet and
  CSV, repeated (median and spread); beside each the floor (floor.py: the same bytes, Arrow
  kernels and a native hash, checked byte for byte at the receiver) and our ratio to it;
* ``callgrind``: instructions per event of the CLI's dry run, (Ir(200k) - Ir(20k)) / 180k,
  which do not move with the machine's load (callgrind.py);
* ``e2e``: events/s of the CLI, start-up included, at 0 and 50 ms receiver latency for each
  ``--concurrency``; and what the receiver takes from a trivial client (its ceiling);
* ``identify``: users/s of ``cc.Client(...).identify(users)`` at 50 ms, default concurrency;
* ``memory``: peak RSS of ``churn-connector send events FILE --dry-run`` (300k and 3M rows);
* ``sandbox``: events/s the strict sandbox ingests from the CLI, its CPU and memory, in
  memory and with a database file (sandbox.py);
* ``peers``: at 50 ms, same receiver, same data: ours (the CLI at default settings) beside a
  naive per-row ``requests.post`` loop, the hand-written streaming loop, Segment's
  analytics-python and PostHog's client (see peers.py), as events/s and ratios;
* ``ledger``: the CLI at 50 ms, default settings, with a SQLite ledger and with a PostgreSQL
  one (a server started here, as the tests start theirs, with ``fsync`` on): the send's wall
  time (PostgreSQL's overhead), a re-run that skips everything, and the ledger's own read
  rate (``known()`` over every key, one query per 50k-key slice as a run reads it).
* ``sync``: an incremental sync (``--cursor``, a ledger) of the new rows of a PostgreSQL
  table (10M old rows, 10k new: a server started here), its wall time against the floor (a
  query selecting only the new rows) and against the whole table without a cursor, whose
  peak RSS is the memory of a query send (syncs.py).
* ``track``: one-off events: client CPU per ``track()`` call beyond the HTTP exchange (the
  scalar engine alone, and a whole call less the CPU of posting its bytes), and the events/s
  a tracker reaches at 50 ms latency (memory queue; and with its SQLite spool).
* ``plan``: what a tracking plan costs: the CPU of validating 1M rows (Parquet, CSV) with a
  20-event-type plan of ~5 rules each over the CPU without one (budget 1.3x; plan_cost.py).

Every run talks to a receiver on 127.0.0.1 only (benchmarks/sink.py, in its own process),
which counts the events that arrive: a run that loses events says so. Exports are generated
once into ``--cache`` (default benchmarks/.cache/) and reused.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

import churn_connector as cc

sys.path.insert(0, str(Path(__file__).resolve().parent))

import callgrind  # sibling modules of this script
import exports
import plan_cost
import sandbox
import syncs
from harness import (
    HERE,
    KEY,
    ROOT,
    Arrived,
    Child,
    Report,
    Row,
    Sink,
    check_ours,
    cli_send,
    delivered_note,
    fmt,
    machine,
    measure,
    peer,
    receiver,
    run_child,
    user_python,
)

SECTIONS = (
    "transform",
    "cpu",
    "callgrind",
    "e2e",
    "identify",
    "memory",
    "sandbox",
    "peers",
    "track",
    "ledger",
    "plan",
    "sync",
)
SMALL_ROWS = 1_000  # the start-up baseline of the CPU measurement

# ----------------------------------------------------------------------------- sections


def transform(args: argparse.Namespace, report: Report) -> None:
    """Rows/s of the events path without network: stages, then the whole in-process path."""
    for kind in ("parquet", "csv"):
        path = exports.export(args.cache, args.rows, kind)
        label = f"{kind} {args.rows // 1000}k"
        try:
            stages = stage_times(path)
        except (ImportError, AttributeError, TypeError) as exc:
            # the stages use package internals, which may move; the whole path below does not
            report.add(Row("transform", f"stages, {label}", None, "", f"internals moved: {exc}"))
        else:
            n = int(stages.pop("rows"))
            invalid = int(stages.pop("invalid"))
            if invalid:
                report.problem(f"transform {label}: {invalid:,} rows of the export are invalid")
            names = {
                "read": "read slices",
                "validate": "validation (pandera schema + bookkeeping)",
                "transform": "transform (wire JSON + message ids)",
                "ids": "message ids alone (hash + UUID text)",
            }
            for stage, seconds in stages.items():
                report.add(
                    Row(
                        "transform",
                        f"{names[stage]}, {label}",
                        n / seconds,
                        "rows/s",
                        details={"rows": n, "seconds": seconds},
                    )
                )
        client = cc.Client("http://127.0.0.1:9", KEY)  # a dry run sends nothing
        gc.collect()
        started = time.perf_counter()
        result = client.send_events(path, dry_run=True, progress=False)
        seconds = time.perf_counter() - started
        counts = dict(result.counts)
        if counts.get("would_send") != args.rows:
            report.problem(f"transform {label}: dry run would send {counts}, not every row")
        report.add(
            Row(
                "transform",
                f"events path, in-process dry run (read to request bodies), {label}",
                result.n_rows / seconds,
                "rows/s",
                details={"rows": result.n_rows, "seconds": seconds, "counts": counts},
            )
        )
        del result


def stage_times(path: Path) -> dict[str, float]:
    """Seconds per stage over the whole file, each stage timed on its own per slice."""
    from churn_connector._events.stream import EventStream  # noqa: PLC0415
    from churn_connector._options.events import EventOptions  # noqa: PLC0415
    from churn_connector._slices import paused_gc  # noqa: PLC0415
    from churn_connector._wire import ids  # noqa: PLC0415 - internals, guarded by the caller
    from churn_connector._wire.events import build_events  # noqa: PLC0415

    options = EventOptions(now=pd.Timestamp.now(tz="UTC"))
    stream = EventStream(path, options)
    times = {"read": 0.0, "validate": 0.0, "transform": 0.0, "ids": 0.0}
    rows = invalid = 0
    slices = stream.slices()
    gc.collect()
    while True:
        t0 = time.perf_counter()
        df = next(slices, None)
        t1 = time.perf_counter()
        times["read"] += t1 - t0
        if df is None:
            break
        with paused_gc():
            t1 = time.perf_counter()
            begun = stream.begin(df)
            t2 = time.perf_counter()
            wire = build_events(begun.work, options)
            t3 = time.perf_counter()
        ids.message_ids(wire.body)
        t4 = time.perf_counter()
        times["validate"] += t2 - t1
        times["transform"] += t3 - t2
        times["ids"] += t4 - t3
        rows += len(df)
        invalid += len(df) - len(begun.valid)
    return {**times, "rows": rows, "invalid": invalid}


def cpu(args: argparse.Namespace, report: Report) -> None:
    """Client CPU per delivered event, start-up excluded: (CPU(N) - CPU(1k)) / (N - 1k), for
    each shape of export; beside it the floor's (floor.py) and our ratio to it, same run."""
    big_n, small_n = args.rows, SMALL_ROWS
    stamps = {
        "parquet": "the bench's own: typed, properties a struct",
        "csv": "the bench's own: text timestamps with offsets, properties JSON",
        "parquet-flat": "flat typed columns",
        "csv-flat": "flat columns, --dtype properties.seats=int64",
    }
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp, "bodies")
        record.touch()
        with receiver(0.0, record) as sink:
            for kind in args.cpu_kinds:
                cpu_kind(args, report, sink, record, kind, stamps[kind], big_n, small_n)


def recorded(record: Path, since: int) -> tuple[Counter[str], int]:
    """The bodies the receiver recorded after byte ``since`` (digest -> count), and the end."""
    data = record.read_bytes()
    return Counter(data[since:].decode().splitlines()), len(data)


def cpu_kind(
    args: argparse.Namespace,
    report: Report,
    sink: Sink,
    record: Path,
    kind: str,
    shape: str,
    big_n: int,
    small_n: int,
) -> None:
    """One shape: ours and the floor, small and big, interleaved so they share the load."""
    big = exports.export(args.cache, big_n, kind)
    small = exports.export(args.cache, small_n, kind)
    options = exports.FLAT_CSV_OPTIONS if kind == "csv-flat" else ()
    marginal: dict[str, list[float]] = {"ours": [], "floor": []}
    kernel: list[float] = []
    startup: dict[str, list[float]] = {"ours": [], "floor": []}
    identical: bool | None = None
    for rep in range(args.repeats):
        runs: dict[tuple[str, int], Child] = {}
        bodies: dict[str, Counter[str]] = {}
        for who in ("ours", "floor"):
            for n, path in ((small_n, small), (big_n, big)):
                mark = record.stat().st_size
                if who == "ours":
                    child, arrived = measure(sink, lambda p=path: cli_send(p, sink.url, *options))
                else:
                    child, arrived = measure(sink, lambda p=path: floor_send(p, sink.url))
                check_ours(report, f"cpu {kind} {who} {n} rows #{rep + 1}", child, arrived, n)
                runs[who, n] = child
                if n == big_n:
                    bodies[who], _ = recorded(record, mark)
        same = bodies["ours"] == bodies["floor"]
        identical = same if identical is None else identical and same
        if not same:
            report.problem(f"cpu {kind} #{rep + 1}: the floor's bodies differ from ours")
        for who in ("ours", "floor"):
            b, s = runs[who, big_n], runs[who, small_n]
            marginal[who].append((b.cpu_s - s.cpu_s) / (big_n - small_n) * 1e6)
            startup[who].append(s.cpu_s)
        b, s = runs["ours", big_n], runs["ours", small_n]
        kernel.append((b.sys_s - s.sys_s) / (big_n - small_n) * 1e6)
    ours, floor = marginal["ours"], marginal["floor"]
    ratios = [o / f for o, f in zip(ours, floor, strict=True) if f > 0]
    label = f"{kind} ({shape}), {big_n // 1000}k vs 1k rows"
    report.add(
        Row(
            "cpu",
            f"client CPU per delivered event, {label}",
            statistics.median(ours),
            "µs/event",
            f"median of {len(ours)}, spread {min(ours):.2f} to {max(ours):.2f}; of which "
            f"kernel {statistics.median(kernel):.2f}; start-up CPU "
            f"{statistics.median(startup['ours']):.2f} s; "
            f"load {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
            details={
                "marginal_us": ours,
                "kernel_us": kernel,
                "startup_cpu_s": startup["ours"],
                "receiver_latency_s": 0.0,
            },
        )
    )
    report.add(
        Row(
            "cpu",
            f"floor (floor.py: Arrow kernels, native hash), {label}",
            statistics.median(floor),
            "µs/event",
            f"median of {len(floor)}, spread {min(floor):.2f} to {max(floor):.2f}; "
            + ("bodies byte-identical to ours" if identical else "bodies DIFFER from ours"),
            details={"marginal_us": floor, "startup_cpu_s": startup["floor"]},
        )
    )
    report.add(
        Row(
            "cpu",
            f"ours / floor, {label}",
            statistics.median(ratios) if ratios else None,
            "x",
            "per repeat: " + ", ".join(f"{r:.2f}" for r in ratios),
            details={"ratios": ratios},
        )
    )


def floor_send(path: Path, url: str) -> Child:
    """floor.py posting ``path`` to ``url`` at our default concurrency."""
    concurrency = cc.Client("http://127.0.0.1:9", KEY).config.max_concurrency
    return run_child(
        [user_python(), str(HERE / "floor.py"), str(path), url, "--concurrency", str(concurrency)]
    )


def callgrind_section(args: argparse.Namespace, report: Report) -> None:
    """Instructions per event of the CLI's dry run (see callgrind.py)."""
    callgrind.section(
        report,
        args.cache,
        args.callgrind_kinds,
        args.callgrind_rows[0],
        args.callgrind_rows[1],
        args.callgrind_repeats,
        floor=args.callgrind_floor,
    )


def sandbox_section(args: argparse.Namespace, report: Report) -> None:
    """The sandbox under the CLI (see sandbox.py)."""
    sandbox.section(report, args.cache, args.sandbox_events, args.sandbox_db_events)


def e2e(args: argparse.Namespace, report: Report) -> None:
    """Events/s of the CLI, start-up included, per latency and concurrency."""
    path = exports.export(args.cache, args.rows, "parquet")
    for latency_ms in args.latency_ms:
        with receiver(latency_ms / 1000) as sink:
            if latency_ms == 0:
                (child, result), arrived = measure(
                    sink,
                    lambda url=sink.url: peer(
                        "blast", path, url, "--seconds", str(args.blast_seconds)
                    ),
                )
                report.add(
                    Row(
                        "e2e",
                        "receiver ceiling: pre-built 500-event bodies, 8 connections, 0 ms",
                        arrived.events / max(result.get("send_s", 0.0), 1e-9),
                        "events/s",
                        details={"arrived": asdict(arrived), "peer": result},
                    )
                )
            for c in args.concurrency:
                child, arrived = measure(
                    sink, lambda c=c, url=sink.url: cli_send(path, url, "--concurrency", str(c))
                )
                ok = check_ours(report, f"e2e {latency_ms} ms c={c}", child, arrived, args.rows)
                span = ""
                if latency_ms and arrived.span_s:
                    # how close the sending span comes to c x 500 events per round trip
                    ceiling = c * 500 / (latency_ms / 1000)
                    rate = arrived.events / arrived.span_s
                    span = (
                        f"; sending span {arrived.span_s:.2f} s at {rate:,.0f} events/s = "
                        f"{rate / ceiling:.0%} of {c} x 500 / RTT"
                    )
                report.add(
                    Row(
                        "e2e",
                        f"CLI end to end, {args.rows // 1000}k rows Parquet, {latency_ms} ms, "
                        f"concurrency {c}",
                        args.rows / child.wall_s if ok else None,
                        "events/s",
                        f"{child.wall_s:.1f} s, CPU {child.cpu_s:.1f} s, "
                        + delivered_note(arrived.events, args.rows)
                        + span,
                        details={
                            "wall_s": child.wall_s,
                            "cpu_s": child.cpu_s,
                            "maxrss_mib": child.maxrss_mib,
                            "arrived": asdict(arrived),
                        },
                    )
                )


def identify(args: argparse.Namespace, report: Report) -> None:
    """Users/s of the Python API at 50 ms, default identify concurrency, in a fresh process."""
    with receiver(0.05) as sink:
        cmd = [user_python(), str(HERE / "identify_run.py"), sink.url, str(args.users)]
        child, arrived = measure(sink, lambda: run_child(cmd))
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        report.problem(f"identify: the run exited {child.returncode}: {child.tail()}")
        return
    out = orjson.loads(lines[-1])
    started, seconds, concurrency = out["started"], out["seconds"], out["concurrency"]
    sent = int(out["counts"]["sent"])
    if arrived.events != sent:
        report.problem(f"identify: the receiver counted {arrived.events} of {sent} sent users")
    ceiling = concurrency / 0.05
    # the whole call (the first call's pandera import and schema included) and its parts:
    # until the first request arrived, and the receiver's span (first in to last answer out)
    first = None if arrived.first_in is None else arrived.first_in - started
    span = arrived.span_s
    parts = []
    if first is not None:
        parts.append(f"first request {first:.2f} s after the call")
    if span:
        parts.append(f"{sent / span:,.0f} users/s over the receiver's span ({span:.2f} s)")
    report.add(
        Row(
            "identify",
            f"identify, Python API, 50 ms, default concurrency ({concurrency})",
            sent / seconds,
            "users/s",
            f"{sent:,} of {args.users:,} sample users valid and sent in {seconds:.2f} s, "
            f"start-up included ({sent / seconds / ceiling:.0%} of the ceiling, "
            f"{ceiling:,.0f}/s); " + "; ".join([*parts, delivered_note(arrived.events, sent)]),
            details={
                "seconds": seconds,
                "first_request_s": first,
                "span_s": span,
                "ceiling": ceiling,
                "counts": out["counts"],
                "paths": arrived.paths,
            },
        )
    )


def memory(args: argparse.Namespace, report: Report) -> None:
    """Peak RSS of the CLI's dry run on Parquet exports, and how it grows with the rows."""
    peaks: dict[int, float] = {}
    for rows in args.memory_rows:
        path = exports.export(args.cache, rows, "parquet")
        child = cli_send(path, "http://127.0.0.1:9", "--dry-run")  # sends nothing
        if child.returncode != 0:
            report.problem(f"memory {rows}: churn-connector exited {child.returncode}")
        report.add(
            Row(
                "memory",
                f"peak RSS, send --dry-run, {rows:,}-row Parquet",
                child.maxrss_mib,
                "MiB",
                f"{child.wall_s:.1f} s = {rows / child.wall_s:,.0f} rows/s, "
                f"CPU {child.cpu_s:.1f} s",
                details={"wall_s": child.wall_s, "cpu_s": child.cpu_s, "rows": rows},
            )
        )
        peaks[rows] = child.maxrss_mib
    if len(peaks) > 1:
        (small, low), (large, high) = min(peaks.items()), max(peaks.items())
        report.add(
            Row(
                "memory",
                f"peak RSS growth, {large:,} rows against {small:,}",
                high / low,
                "x",
                f"{(high - low) * 2**20 / (large - small):.0f} bytes a row past the first "
                f"{small:,}",
                details={"bytes_per_row": (high - low) * 2**20 / (large - small)},
            )
        )


def peers(args: argparse.Namespace, report: Report) -> None:
    """Ours beside what a data engineer would use instead, at 50 ms, same data and receiver."""
    path = exports.export(args.cache, args.rows, "parquet")
    c = cc.Client("http://127.0.0.1:9", KEY).config.max_concurrency  # our default
    k = f"{args.rows // 1000}k"
    with receiver(0.05) as sink:
        child, arrived = measure(sink, lambda: cli_send(path, sink.url))
        ok = check_ours(report, "peers: ours", child, arrived, args.rows)
        ours = args.rows / child.wall_s if ok else None
        report.add(
            Row(
                "peers",
                f"ours: churn-connector send, defaults (concurrency {c}), {k}",
                ours,
                "events/s",
                "; ".join(
                    [
                        f"{child.wall_s:.1f} s",
                        delivered_note(arrived.events, args.rows),
                        f"CPU {child.cpu_s / args.rows * 1e6:.1f} µs/event incl. start-up",
                        f"RSS {child.maxrss_mib:,.0f} MiB",
                        arrived.where(),
                    ]
                ),
                details={
                    "wall_s": child.wall_s,
                    "cpu_s": child.cpu_s,
                    "maxrss_mib": child.maxrss_mib,
                    "arrived": asdict(arrived),
                },
            )
        )
        dk = f"{args.peer_default_rows // 1000}k"
        sk = f"{args.shipped_rows // 1000}k"
        cases = [
            (
                f"naive requests.post per row (stopped after {args.naive_seconds:.0f} s)",
                "naive",
                args.rows,
                ["--seconds", str(args.naive_seconds)],
            ),
            (
                f"hand-written streaming loop, {c} threads, 500/request, {k}",
                "diy",
                args.rows,
                ["--concurrency", str(c)],
            ),
            (
                f"Segment, {c} threads, upload_size 500, big queue, {k}",
                "segment",
                args.rows,
                ["--concurrency", str(c), "--config", "tuned"],
            ),
            (
                f"Segment, defaults (1 thread, 100/request), big queue, {dk}",
                "segment",
                args.peer_default_rows,
                ["--config", "defaults"],
            ),
            (
                f"PostHog, {c} threads, flush_at 500, big queue, {k}",
                "posthog",
                args.rows,
                ["--concurrency", str(c), "--config", "tuned"],
            ),
            (
                f"PostHog, defaults (1 thread, 100/request), big queue, {dk}",
                "posthog",
                args.peer_default_rows,
                ["--config", "defaults"],
            ),
            (
                f"Segment as shipped (queue of 10,000), {sk}",
                "segment",
                args.shipped_rows,
                ["--config", "shipped"],
            ),
            (
                f"PostHog as shipped (queue of 10,000), {sk}",
                "posthog",
                args.shipped_rows,
                ["--config", "shipped"],
            ),
        ]
        for name, mode, limit, options in cases:
            (child, result), arrived = measure(
                sink,
                lambda m=mode, n=limit, o=options: peer(m, path, sink.url, "--limit", str(n), *o),
            )
            report.add(peer_row(report, name, child, result, arrived, limit, ours))


def peer_row(
    report: Report,
    name: str,
    child: Child,
    result: dict[str, Any],
    arrived: Arrived,
    limit: int,
    ours: float | None,
) -> Row:
    """One peer's events/s (what arrived over the child's whole life), ratio and losses."""
    handed = int(result.get("handed", limit))
    if child.returncode != 0 or not result:
        report.finding(f"{name}: exited {child.returncode}: {child.tail()}")
    complete = arrived.events >= handed
    if not complete:
        report.finding(
            f"{name}: LOST {handed - arrived.events:,} of {handed:,} events "
            f"(refused by a full queue: {result.get('refused', 0):,})"
        )
    theirs = arrived.events / child.wall_s if arrived.events else None
    ratio = ours / theirs if ours and theirs and complete else None
    notes = [
        "ours/theirs " + (f"{ratio:.1f}x" if ratio else "n/a"),
        f"{child.wall_s:.1f} s",
        delivered_note(arrived.events, handed),
    ]
    if result.get("refused"):
        notes.append(f"refused {result['refused']:,}")
    if result.get("errors"):
        notes.append(f"reported failed {result['errors']:,}")
    if arrived.events:
        notes.append(f"CPU {child.cpu_s / arrived.events * 1e6:.1f} µs/event incl. start-up")
    notes.append(f"RSS {child.maxrss_mib:,.0f} MiB")
    notes.append(arrived.where())
    return Row(
        "peers",
        name,
        theirs,
        "events/s",
        "; ".join(notes),
        details={
            "wall_s": child.wall_s,
            "cpu_s": child.cpu_s,
            "maxrss_mib": child.maxrss_mib,
            "handed": handed,
            "arrived": asdict(arrived),
            "peer": result,
            "ratio_ours_to_theirs": ratio,
        },
    )


def ledger(args: argparse.Namespace, report: Report) -> None:
    """The CLI at 50 ms with a SQLite ledger and with a PostgreSQL one: the send, a re-run
    that skips everything, and the ledger's own read rate."""
    sys.path.insert(0, str(ROOT))
    # the tests' PostgreSQL server, started the same way (psycopg: the postgres extra, in dev)
    from tests.ledger.servers import (  # noqa: PLC0415 - only this section
        PG_PASSWORD,
        PostgresServer,
        ServerMissing,
    )

    rows = args.ledger_rows
    path = exports.export(args.cache, rows, "parquet")
    try:
        server = PostgresServer(fsync=True)  # PostgreSQL's default durability, as in production
    except ServerMissing as exc:
        report.problem(f"ledger: {exc}")
        return
    env = {"PGPASSWORD": PG_PASSWORD}  # the CLI takes no password in --ledger
    walls: dict[str, list[float]] = {"SQLite": [], "PostgreSQL": []}
    reruns: dict[str, list[float]] = {"SQLite": [], "PostgreSQL": []}
    last: dict[str, str] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp, receiver(0.05) as sink:
            for repeat in range(args.repeats):
                for kind in walls:  # alternating, so a busy spell of the machine hits both
                    if kind == "SQLite":
                        where = str(Path(tmp, f"ledger-{repeat}.sqlite"))
                        last[kind] = where
                    else:
                        schema = server.fresh_schema()
                        where = server.url(schema, password=False)
                        last[kind] = server.url(schema)
                    child, arrived = measure(
                        sink, lambda w=where: cli_send(path, sink.url, "--ledger", w, env=env)
                    )
                    if check_ours(report, f"ledger {kind} send", child, arrived, rows):
                        walls[kind].append(child.wall_s)
                    child, arrived = measure(
                        sink, lambda w=where: cli_send(path, sink.url, "--ledger", w, env=env)
                    )
                    if child.returncode or arrived.events:
                        report.problem(
                            f"ledger {kind} re-run: exit {child.returncode}, {arrived.events} "
                            f"events sent again: {child.tail()}"
                        )
                    else:
                        reruns[kind].append(child.wall_s)
            reads = {kind: ledger_read_rate(where) for kind, where in last.items()}
        for kind in walls:
            if walls[kind]:
                wall = statistics.median(walls[kind])
                report.add(
                    Row(
                        "ledger",
                        f"send {rows // 1000}k rows Parquet, 50 ms, default settings, "
                        f"{kind} ledger",
                        rows / wall,
                        "events/s",
                        f"median wall {wall:.1f} s of {len(walls[kind])}: "
                        + ", ".join(f"{w:.1f}" for w in walls[kind]),
                        details={"walls_s": walls[kind]},
                    )
                )
        if walls["SQLite"] and walls["PostgreSQL"]:
            extra = statistics.median(walls["PostgreSQL"]) / statistics.median(walls["SQLite"])
            report.add(
                Row(
                    "ledger",
                    "PostgreSQL ledger's extra wall time over SQLite's (target <= 15%)",
                    (extra - 1) * 100,
                    "%",
                    "medians of the send rows above",
                )
            )
        for kind in reruns:
            if reruns[kind]:
                wall = statistics.median(reruns[kind])
                report.add(
                    Row(
                        "ledger",
                        f"re-run that skips all {rows // 1000}k rows, {kind} ledger (CLI, "
                        "start-up, read and validation included)",
                        rows / wall,
                        "events/s",
                        f"median wall {wall:.1f} s of {len(reruns[kind])}",
                        details={"walls_s": reruns[kind]},
                    )
                )
        for kind, (rate, note) in reads.items():
            report.add(
                Row(
                    "ledger",
                    f"{kind} ledger read: known() over every key, 50k keys a query "
                    "(target >= 200k keys/s)",
                    rate,
                    "keys/s",
                    note,
                )
            )
    finally:
        server.close()


def ledger_read_rate(where: str) -> tuple[float, str]:
    """Keys/s of ``known()`` over every event key of the ledger, in slices as a run asks."""
    with cc.Ledger(where, read_only=True) as book:
        keys: list[str] = []
        scope = ""
        for batch in book.batches():
            keys += batch.column("key").to_pylist()
            scope = scope or str(batch.column("scope")[0])
        started = time.perf_counter()
        found = sum(
            len(book.known(scope, "events", keys[lo : lo + 50_000]))
            for lo in range(0, len(keys), 50_000)
        )
        seconds = time.perf_counter() - started
    return found / seconds, f"{found:,} of {len(keys):,} keys found in {seconds:.2f} s"


def _cpu_per_call(calls: int, call: Callable[[int], Any]) -> float:
    """Process CPU (all threads) per call, in µs, after a warm-up."""
    for i in range(200):
        call(i)
    gc.collect()
    started = time.process_time()
    for i in range(calls):
        call(i)
    return (time.process_time() - started) / calls * 1e6


def track(args: argparse.Namespace, report: Report) -> None:
    """One-off events: CPU per track() beyond the HTTP exchange; a tracker's events/s."""
    from churn_connector._core.contract import TRACK_PATH  # noqa: PLC0415 - internals
    from churn_connector._delivery.transport import HttpPoster  # noqa: PLC0415 - internals
    from churn_connector._track.scalar import event_of  # noqa: PLC0415 - internals

    calls = 2_000 if args.quick else 10_000
    when = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    shapes: dict[str, Callable[[int], Any]] = {
        "occurred_at defaulted, 3 properties": lambda i: event_of(
            "user_42", "page_view", properties={"page": "/pricing", "n": i, "ok": True}
        ),
        "aware datetime, message_id given": lambda i: event_of(
            "user_42",
            "invoice_paid",
            occurred_at=when,
            message_id=f"evt_{i}",
            properties={"amount": 19.9},
        ),
        "RFC 3339 text with offset, context": lambda i: event_of(
            "user_42",
            "page_view",
            occurred_at="2026-11-20T09:30:00.123+01:00",
            properties={"n": i},
            context={"source": "web"},
            now=when,
        ),
    }
    for name, call in shapes.items():
        micros = _cpu_per_call(calls, call)
        report.add(Row("track", f"scalar engine (validate + wire + id): {name}", micros, "µs/call"))
    with receiver(0.0) as sink:
        client = cc.Client(sink.url, KEY)
        body = event_of("user_42", "page_view", properties={"n": 1}).body
        poster = HttpPoster(client.config, 1, deadline="call")  # as track() posts

        def exchange(i: int) -> Any:
            return poster.post(TRACK_PATH, body)

        def whole(i: int) -> Any:
            return client.track("user_42", "page_view", properties={"page": "/pricing", "n": i})

        http_only = _cpu_per_call(calls, exchange)
        full = _cpu_per_call(calls, whole)
        poster.close()
        client.close()
    report.add(
        Row(
            "track",
            "client.track() beyond the HTTP exchange (CPU of a call less that of posting "
            "its bytes)",
            full - http_only,
            "µs/call",
            f"whole call {full:.0f} µs, the HTTP exchange alone {http_only:.0f} µs "
            "(receiver in another process, 0 ms)",
            details={"whole_us": full, "http_us": http_only, "calls": calls},
        )
    )
    events = 20_000 if args.quick else 100_000
    for label, n in (("memory queue", events), ("SQLite spool", 2_000)):
        with receiver(0.05) as sink, tempfile.TemporaryDirectory() as tmp:
            client = cc.Client(sink.url, KEY)
            spool = Path(tmp) / "spool.sqlite" if label == "SQLite spool" else None
            seconds, arrived = measure(sink, lambda c=client, s=spool, n=n: _tracked(c, s, n))
        concurrency = min(4, client.config.max_concurrency)
        if arrived.events != n:
            report.problem(f"track: the receiver counted {arrived.events} of {n}")
        report.add(
            Row(
                "track",
                f"tracker at 50 ms, {label}, default concurrency ({concurrency})",
                n / seconds,
                "events/s",
                f"{n:,} events tracked and flushed in {seconds:.1f} s, "
                f"{arrived.requests:,} requests; " + delivered_note(arrived.events, n),
                details={"seconds": seconds, "paths": arrived.paths},
            )
        )


def _tracked(client: cc.Client, spool: Path | None, n: int) -> float:
    """Seconds to track ``n`` events through a tracker and flush them."""
    started = time.perf_counter()
    with client.tracker(spool, max_queue=20_000) as tracker:
        for i in range(n):
            tracker.track("user_42", "page_view", properties={"n": i})
    return time.perf_counter() - started


RUNNERS: dict[str, Callable[[argparse.Namespace, Report], None]] = {
    "transform": transform,
    "cpu": cpu,
    "callgrind": callgrind_section,
    "sandbox": sandbox_section,
    "e2e": e2e,
    "identify": identify,
    "memory": memory,
    "peers": peers,
    "ledger": ledger,
    "track": track,
    "plan": plan_cost.plan_section,
    "sync": syncs.sync_section,
}


# ----------------------------------------------------------------------------- output


def table(info: dict[str, Any], report: Report, elapsed: float) -> str:
    v = info["versions"]
    load = ", ".join(f"{x:.1f}" for x in info["load_average"])
    lines = [
        f"churn_connector {v['churn-connector']} benchmarks, {info['date']}"
        + (f", revision {info['revision']}" if info["revision"] else ""),
        f"machine: {info['cpu']}, {info['cores']} cores ({info['cores_usable']} usable), "
        f"load average at start {load}",
        f"Python {info['python']}, pandas {v['pandas']}, pyarrow {v['pyarrow']}, "
        f"numpy {v['numpy']}, orjson {v['orjson']}, pandera {v['pandera']}; peers: "
        f"segment-analytics-python {v['segment-analytics-python']}, posthog {v['posthog']}",
        f"measured programs run with {info['measured_with']} (hypothesis "
        f"{v['hypothesis'] or 'not installed'}, PySpark {v['pyspark'] or 'not installed'})",
        "",
    ]
    header = ("section", "measurement", "result", "notes")
    cells = [
        (
            r.section,
            r.name,
            "n/a" if r.value is None else f"{fmt(r.value)} {r.unit}",
            r.note,
        )
        for r in report.rows
    ]
    widths = [
        max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)
    ]
    widths[3] = len(header[3])  # notes run on: no padding

    def line(values: tuple[str, ...]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    lines.append(line(header))
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines.extend(line(c) for c in cells)
    lines.append("")
    lines.append(f"total time {elapsed / 60:.1f} min")
    if report.findings:
        lines.append("peers that lost events or failed (the receiver's count):")
        lines.extend(f"- {p}" for p in report.findings)
    if report.problems:
        lines.append("PROBLEMS in our own runs:")
        lines.extend(f"- {p}" for p in report.problems)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repeat (~3 min)")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--skip", help="comma-separated sections to leave out")
    parser.add_argument("--rows", type=int, help="events per run (default 200,000; quick 50,000)")
    parser.add_argument("--repeats", type=int, help="CPU measurement repeats (default 3)")
    parser.add_argument("--concurrency", type=int, nargs="+", help="e2e (default 1 4 8 16 32)")
    parser.add_argument("--latency-ms", type=int, nargs="+", help="e2e latencies (default 0 50)")
    parser.add_argument("--memory-rows", type=int, nargs="+", help="default 300000 3000000")
    parser.add_argument("--users", type=int, help="identify: sample users (default 5,000)")
    parser.add_argument(
        "--ledger-rows", type=int, help="ledger: events per send (default 1,000,000; quick 100,000)"
    )
    parser.add_argument("--naive-seconds", type=float, help="time bound of the naive loop (15)")
    parser.add_argument(
        "--peer-default-rows",
        type=int,
        help="events for peers at their default (slow) settings (default 20,000)",
    )
    parser.add_argument(
        "--shipped-rows",
        type=int,
        default=20_000,
        help="events for peers as shipped: above their 10,000-event queue (default 20,000)",
    )
    parser.add_argument(
        "--cpu-kinds",
        nargs="+",
        choices=exports.KINDS,
        help=f"cpu: shapes of export (default all: {' '.join(exports.KINDS)})",
    )
    parser.add_argument(
        "--callgrind-kinds",
        nargs="+",
        choices=exports.KINDS,
        help="callgrind: shapes of export (default parquet csv)",
    )
    parser.add_argument(
        "--callgrind-rows",
        type=int,
        nargs=2,
        metavar=("BIG", "SMALL"),
        help="callgrind: rows of the two runs (default 200000 20000)",
    )
    parser.add_argument("--callgrind-repeats", type=int, help="callgrind repeats (default 3)")
    parser.add_argument(
        "--callgrind-floor",
        action="store_true",
        help="callgrind: count the floor's instructions too (see callgrind.py)",
    )
    parser.add_argument(
        "--sandbox-events",
        type=int,
        nargs="*",
        help="sandbox: events per in-memory run (default 300000 2000000)",
    )
    parser.add_argument(
        "--sandbox-db-events",
        type=int,
        nargs="*",
        help="sandbox: events per run with a database file (default 1000000; 10000000 "
        "shows flat memory over 10M, ~10 min)",
    )
    parser.add_argument(
        "--plan-rows", type=int, help="plan: rows validated (default 1,000,000; quick 100,000)"
    )
    parser.add_argument(
        "--sync-rows", type=int, help="sync: old rows in the table (default 10,000,000)"
    )
    parser.add_argument("--sync-new", type=int, help="sync: new rows (default 10,000)")
    parser.add_argument(
        "--sync-full-repeats",
        action="store_true",
        help="sync: repeat the whole-table run too (default: once)",
    )
    parser.add_argument("--json", type=Path, default=HERE / "results.json", help="results file")
    parser.add_argument("--cache", type=Path, default=HERE / ".cache", help="generated exports")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults: dict[str, Any] = {
        "rows": 50_000 if quick else 200_000,
        "repeats": 1 if quick else 3,
        "concurrency": [1, 8, 32] if quick else [1, 4, 8, 16, 32],
        "latency_ms": [0, 50],
        "memory_rows": [300_000] if quick else [300_000, 3_000_000],
        "users": 1_000 if quick else 5_000,
        "ledger_rows": 100_000 if quick else 1_000_000,
        "plan_rows": 100_000 if quick else 1_000_000,
        "naive_seconds": 5.0 if quick else 15.0,
        "peer_default_rows": 5_000 if quick else 20_000,
        "cpu_kinds": list(exports.KINDS),
        "callgrind_kinds": ["parquet", "csv"],
        "callgrind_rows": [200_000, 20_000],
        "callgrind_repeats": 1 if quick else 3,
        "sandbox_events": [300_000] if quick else [300_000, 2_000_000],
        "sandbox_db_events": [300_000] if quick else [1_000_000],
        "sync_rows": 1_000_000 if quick else 10_000_000,
        "sync_new": 10_000,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.blast_seconds = 2.0 if quick else 3.0
    if args.rows <= SMALL_ROWS:
        parser.error(f"--rows must be above {SMALL_ROWS} (the CPU baseline)")
    chosen = set(SECTIONS)
    if args.only:
        chosen = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.skip:
        chosen -= {s.strip() for s in args.skip.split(",")}
    unknown = chosen - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    args.sections = [s for s in SECTIONS if s in chosen]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    info = machine()
    report = Report()
    print(f"churn_connector benchmarks: {', '.join(args.sections)}", file=sys.stderr)
    for section in args.sections:
        print(f"{section} ...", file=sys.stderr, flush=True)
        RUNNERS[section](args, report)
    elapsed = time.perf_counter() - started
    info["load_average_end"] = os.getloadavg()
    print(table(info, report, elapsed))
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    args.json.write_bytes(
        orjson.dumps(
            {
                "machine": info,
                "settings": settings,
                "elapsed_s": elapsed,
                "results": [asdict(r) for r in report.rows],
                "problems": report.problems,
                "peer_findings": report.findings,
            },
            option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
        )
    )
    print(f"results written to {args.json}", file=sys.stderr)
    # our own runs must deliver everything; peers' losses are findings, reported above
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
