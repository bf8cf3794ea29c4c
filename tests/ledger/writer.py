"""Workers of the concurrency tests, in processes of their own: each sends a range of a
deterministic events table and identifies a range of users, twice (the second time with
half the users changed), through one shared ledger, and prints its counts as JSON.

    python -m tests.ledger.writer LEDGER_URL NOW --events A B [--users A B] [--workers N]

With ``--workers N``, N worker processes forked from this one send at once, worker i its
ranges shifted by i half-spans; it prints their counts as a JSON list.

The API is CHURN_BASE_URL with CHURN_API_KEY (a sandbox of the test process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

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


def work(args: argparse.Namespace, worker: int) -> dict[str, dict[str, int]]:
    """Worker ``worker``'s share: the ranges shifted by half their span per worker, so each
    half overlaps a neighbour's and workers race on the same keys."""
    now = pd.Timestamp(args.now)
    client = cc.Client(max_concurrency=4, identify_concurrency=8)
    start, stop = args.events
    shift = (stop - start) // 2 * worker
    events = events_table(now, start + shift, stop + shift)
    result = client.send_events(
        events, now=now, ledger=args.ledger, batch_size=args.batch_size, progress=False
    )
    counts = {"events": result.counts}
    if args.users:
        first, last = args.users
        first, last = first + (last - first) // 2 * worker, last + (last - first) // 2 * worker
        plain = client.identify(users_table(first, last), ledger=args.ledger, progress=False)
        changed = users_table(first, last, changed=True)
        again = client.identify(changed, ledger=args.ledger, progress=False)
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
    args = parser.parse_args(argv)
    if args.workers == 1:
        print(json.dumps([work(args, 0)]), flush=True)
        return 0
    # the workers are forked from this process once the package is imported: processes of
    # their own (own connections, own buffers), without paying for the imports N times
    children = []
    for worker in range(args.workers):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(read)
            code = 1
            try:
                os.write(write, json.dumps(work(args, worker)).encode())
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(write)
        children.append((pid, read))
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
