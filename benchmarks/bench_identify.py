"""Identify throughput at a given sandbox latency (one request per user).

    .venv/bin/python benchmarks/bench_identify.py [--users N] [--latency S] [--concurrency C ...]

The sandbox runs in its own process on 127.0.0.1; every loop is bounded by --users.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from bench_events import KEY, receiver

import churn_connector as cc
from churn_connector.samples import sample_users


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=5_000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[16, 32, 64])
    args = parser.parse_args()
    users = sample_users(args.users)
    report = cc.validate_identities(users)
    print(f"{args.users} users, {report.n_valid} valid")
    for c in args.concurrency:
        with receiver(args.latency, strict=True) as url:
            client = cc.Client(url, KEY, identify_concurrency=c)
            started = time.perf_counter()
            result = client.identify(users, progress=False)
            elapsed = time.perf_counter() - started
            sent = result.counts["sent"]
            print(
                f"identify, sandbox latency {args.latency * 1000:.0f} ms, concurrency {c}: "
                f"{sent} requests in {elapsed:.2f} s = {sent / elapsed:,.0f} users/s "
                f"(p50 request {pd.Series(result.chunks['elapsed_s']).median() * 1000:.0f} ms)"
            )


if __name__ == "__main__":
    main()
