"""Events throughput: validate + wire (no network), and end to end against the sandbox.

    .venv/bin/python benchmarks/bench_events.py [--rows N] [--latency S] [--concurrency C ...]

Talks only to a sandbox on 127.0.0.1; every loop is bounded by --rows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import churn_connector as cc
from churn_connector._events.options import EventOptions
from churn_connector._events.stream import EventStream
from churn_connector._stream import batches

KEY = "sk_test_benchmark_key_0001"


def export(n: int, now: pd.Timestamp, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "external_user_id": pd.array(rng.integers(1, 50_000, n), dtype="Int64"),
            "event_type": rng.choice(["login", "page_view", "feature_used", "invoice_paid"], n),
            "occurred_at": now - pd.to_timedelta(rng.integers(0, 20 * 86_400_000, n), unit="ms"),
            "properties.plan": rng.choice(["free", "pro", "enterprise"], n),
            "properties.amount": np.where(rng.random(n) < 0.3, rng.random(n) * 100, np.nan),
            "properties.screen": [f"s{i}" for i in rng.integers(0, 50, n)],
        }
    )


def bench_transform(path: Path, now: pd.Timestamp, rows: int) -> None:
    stream = EventStream(path, EventOptions(now=now))
    started = time.perf_counter()
    sent = sum(len(batch) for batch in batches(stream))
    elapsed = time.perf_counter() - started
    print(
        f"validate+wire from parquet: {rows} rows in {elapsed:.2f} s = "
        f"{rows / elapsed:,.0f} rows/s ({sent} to send)"
    )


@contextlib.contextmanager
def receiver(latency: float, *, strict: bool) -> Iterator[str]:
    """A receiver in its own process: the strict sandbox, or the minimal sink."""
    port = free_port()
    env = {**os.environ, "CHURN_API_KEY": KEY}
    if strict:
        cmd = [
            sys.executable,
            "-m",
            "churn_connector._cli",
            "sandbox",
            "--port",
            str(port),
            "--latency",
            str(latency),
        ]
    else:
        cmd = [sys.executable, str(Path(__file__).with_name("sink.py")), str(port), str(latency)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_send(
    path: Path, now: pd.Timestamp, rows: int, latency: float, concurrency: int, *, strict: bool
) -> None:
    with receiver(latency, strict=strict) as url:
        client = cc.Client(url, KEY, max_concurrency=concurrency)
        started = time.perf_counter()
        result = client.send_events(path, now=now, progress=False)
        elapsed = time.perf_counter() - started
        assert result.ok, result.summary()
        print(
            f"send to {'sandbox' if strict else 'sink'}, latency {latency * 1000:.0f} ms, "
            f"concurrency {concurrency}: "
            f"{rows} rows in {elapsed:.2f} s = {rows / elapsed:,.0f} events/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[4, 8, 16])
    parser.add_argument("--no-send", action="store_true")
    parser.add_argument("--sandbox", action="store_true", help="receive with the strict sandbox")
    args = parser.parse_args()
    now = pd.Timestamp.now(tz="UTC")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.parquet"
        write_export(path, args.rows, now)
        print(f"peak RSS after writing the export: {peak_rss_mib():,.0f} MiB")
        bench_transform(path, now, args.rows)
        if not args.no_send:
            for c in args.concurrency:
                bench_send(path, now, args.rows, args.latency, c, strict=args.sandbox)
    print(f"peak RSS of this process: {peak_rss_mib():,.0f} MiB")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_export(path: Path, rows: int, now: pd.Timestamp, part: int = 50_000) -> None:
    """Write the export in parts, so the benchmark's own data never sits in memory whole."""
    writer = None
    try:
        for i, start in enumerate(range(0, rows, part)):
            table = pa.Table.from_pandas(
                export(min(part, rows - start), now, seed=i), preserve_index=False
            )
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


if __name__ == "__main__":
    main()
