"""Workers of the concurrency tests, in processes of their own: each sends a range of a
deterministic events table and identifies a range of users, twice (the second time with
half the users changed), through one shared ledger, and prints its counts as JSON.

    python -m tests.ledger.writer LEDGER_URL NOW --events A B [--users A B] [--workers N]
        [--segment-requests N]

With ``--workers N``, N worker processes forked from this one send at once, worker i its
ranges shifted by i half-spans; it prints their counts as a JSON list. The workers change
their users only once all have identified them (a barrier), as two runs a day apart do:
two workers sending *different* bodies for one user at the same moment race at the API
itself, which keeps whichever arrives last, and no ledger can know which one that was.

``--segment-requests N`` (object storage): a segment every N acknowledged requests, so a
worker writes many while a compaction runs beside it.

The API is CHURN_BASE_URL with CHURN_API_KEY (a sandbox of the test process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

import pandas as pd

import churn_connector as cc


def events_table(now: pd.Timestamp, start: int, stop: int) -> pd.DataFrame:
    """Rows ``start``..``stop`` of one events table: the same rows (so the same message ids)
    in every process that sends them."""
    rows = range(start, stop)
    return pd.DataFrame(
        {
            "external_user_id": [f"user_{i % 97}" for i in rows],
            "event_type": ["page_view" if i % 2 else "login" for i in rows],
            "occurred_at": [now - pd.Timedelta(hours=1) - pd.Timedelta(seconds=i) for i in rows],
            "properties.seq": list(rows),
        }
    )


def users_table(start: int, stop: int, *, changed: bool = False) -> pd.DataFrame:
    """Users ``start``..``stop``; ``changed``: every other one with a new plan."""
    rows = range(start, stop)
    return pd.DataFrame(
        {
            "external_user_id": [f"person_{i}" for i in rows],
            "traits.plan": ["pro" if changed and i % 2 else "free" for i in rows],
        }
    )


class Barrier:
    """All forked workers wait here until each has arrived (or died: it arrives as it ends)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.ready = os.pipe()
        self.go = os.pipe()
        self.arrived = False

    def wait(self) -> None:
        """In a worker: arrive, then wait for the others."""
        if not self.arrived:
            self.arrived = True
            os.write(self.ready[1], b".")
            os.read(self.go[0], 1)

    def release(self) -> None:
        """In the parent, once every worker is forked: open the gate when all arrived."""
        os.close(self.ready[1])
        count = 0
        while count < self.parties:
            got = os.read(self.ready[0], self.parties)
            if not got:
                break
            count += len(got)
        os.write(self.go[1], b"." * self.parties)


def work(args: argparse.Namespace, worker: int, barrier: Barrier | None = None) -> dict[str, Any]:
    """Worker ``worker``'s share: the ranges shifted by half their span per worker, so each
    half overlaps a neighbour's and workers race on the same keys."""
    if args.segment_requests:
        with cc.Ledger(args.ledger, segment_requests=args.segment_requests) as ledger:
            return share(args, worker, ledger, barrier)
    return share(args, worker, args.ledger, barrier)


def share(
    args: argparse.Namespace, worker: int, ledger: str | cc.Ledger, barrier: Barrier | None
) -> dict[str, Any]:
    now = pd.Timestamp(args.now)
    client = cc.Client(max_concurrency=4, identify_concurrency=8)
    start, stop = args.events
    shift = (stop - start) // 2 * worker
    events = events_table(now, start + shift, stop + shift)
    result = client.send_events(
        events, now=now, ledger=ledger, batch_size=args.batch_size, progress=False
    )
    counts: dict[str, Any] = {"events": result.counts}
    if args.users:
        first, last = args.users
        first, last = first + (last - first) // 2 * worker, last + (last - first) // 2 * worker
        plain = client.identify(users_table(first, last), ledger=ledger, progress=False)
        if barrier is not None:
            barrier.wait()
        changed = users_table(first, last, changed=True)
        again = client.identify(changed, ledger=ledger, progress=False)
        counts["identities"] = plain.counts
        counts["changed"] = again.counts
    return counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger")
    parser.add_argument("now")
    parser.add_argument("--events", type=int, nargs=2, required=True)
    parser.add_argument("--users", type=int, nargs=2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--segment-requests", type=int)
    args = parser.parse_args(argv)
    if args.workers == 1:
        print(json.dumps([work(args, 0)]), flush=True)
        return 0
    # the workers are forked from this process once the package is imported: processes of
    # their own (own connections, own buffers), without paying for the imports N times
    children = []
    barrier = Barrier(args.workers)
    for worker in range(args.workers):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(read)
            code = 1
            try:
                os.write(write, json.dumps(work(args, worker, barrier)).encode())
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                barrier.wait()  # a worker that failed early must not hold the others back
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    barrier.release()
    results = []
    failed = 0
    for pid, read in children:
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed += 1
        else:
            results.append(json.loads(data))
    print(json.dumps(results), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
