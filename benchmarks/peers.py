"""What a data engineer would use instead of churn_connector, each run as its own process.

    python benchmarks/peers.py MODE FILE BASE_URL [--concurrency C] [--limit N] [--seconds S]
                               [--config shipped|defaults|tuned]

MODE is one of:

* ``naive``: ``pd.read_parquet`` then one ``requests.post`` per row to ``/v1/events/track``
  (a new connection each time), stopped after ``--seconds``;
* ``diy``: the hand-written streaming loop: record batches of 500 streamed from the Parquet
  file, ``to_dict("records")``, uuid4 message ids, orjson, one ``requests.Session`` whose pool
  holds ``--concurrency`` connections, a thread pool of the same size sending while the next
  batch is prepared; no validation; the wire format of the API contract;
* ``segment``: Segment's analytics-python (``track``), host pointed at BASE_URL;
* ``posthog``: PostHog's Python client (``capture``), host pointed at BASE_URL;
* ``blast``: one pre-built 500-event body posted over ``--concurrency`` connections for
  ``--seconds``: what the receiver itself can take.

For segment and posthog, ``--config shipped`` keeps every default (a 10,000-event queue:
what does not fit is dropped); ``defaults`` only raises the queue so that nothing is dropped;
``tuned`` also sets as many sender threads as ``--concurrency`` and 500 events per request.

The key comes from CHURN_API_KEY. Prints one JSON line: events handed to the library,
refused (queue full), reported as failed, acknowledged (where the loop can tell) and the
time from the first row read to completion.
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import orjson
import pandas as pd
import pyarrow.parquet as pq
import requests
from requests.adapters import HTTPAdapter


def records(path: str, limit: int, batch_rows: int = 500) -> Iterator[list[dict[str, Any]]]:
    """The export's rows as dicts, streamed in record batches, at most ``limit`` in all."""
    seen = 0
    with pq.ParquetFile(path) as file:
        for batch in file.iter_batches(batch_size=batch_rows):
            rows: list[dict[str, Any]] = batch.to_pandas().to_dict("records")
            rows = rows[: limit - seen]
            seen += len(rows)
            if rows:
                yield rows
            if seen >= limit:
                return


def occurred_at(ts: pd.Timestamp) -> str:
    """The contract's ``YYYY-MM-DDTHH:MM:SS.mmmZ`` for a UTC timestamp."""
    return ts.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wire_event(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "external_user_id": str(row["external_user_id"]),
        "event_type": row["event_type"],
        "occurred_at": occurred_at(row["occurred_at"]),
        "properties": row["properties"] or {},
        "context": {"$message_id": str(uuid.uuid4())},
    }


def naive(args: argparse.Namespace, key: str) -> dict[str, Any]:
    """One POST per row, no session: the loop that works on 100 rows and not on 100k."""
    df = pd.read_parquet(args.file)
    headers = {"Authorization": f"Bearer {key}"}
    acknowledged = errors = handed = 0
    started = time.monotonic()
    for row in df.head(args.limit).to_dict("records"):
        if time.monotonic() - started > args.seconds:
            break
        handed += 1
        response = requests.post(
            args.url + "/v1/events/track", json=wire_event(row), headers=headers, timeout=30
        )
        if response.ok:
            acknowledged += 1
        else:
            errors += 1
    return {
        "handed": handed,
        "acknowledged": acknowledged,
        "errors": errors,
        "send_s": time.monotonic() - started,
    }


def diy(args: argparse.Namespace, key: str) -> dict[str, Any]:
    """The streaming loop a careful data engineer writes by hand, without validation."""
    session = requests.Session()
    session.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=args.concurrency))
    session.headers.update({"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    url = args.url + "/v1/events/batch"

    def post(body: bytes, n: int) -> int:
        response = session.post(url, data=body, timeout=30)
        response.raise_for_status()
        return n

    acknowledged = errors = handed = 0
    started = time.monotonic()
    inflight: deque[Future[int]] = deque()

    def settle(future: Future[int]) -> None:
        nonlocal acknowledged, errors
        try:
            acknowledged += future.result()
        except requests.RequestException:
            errors += 1

    with ThreadPoolExecutor(args.concurrency) as pool:
        for rows in records(args.file, args.limit, 500):
            body = orjson.dumps({"events": [wire_event(r) for r in rows]})
            handed += len(rows)
            while len(inflight) >= 2 * args.concurrency:  # bounded read-ahead
                settle(inflight.popleft())
            inflight.append(pool.submit(post, body, len(rows)))
        while inflight:
            settle(inflight.popleft())
    return {
        "handed": handed,
        "acknowledged": acknowledged,
        "errors": errors,
        "send_s": time.monotonic() - started,
    }


class ErrorCount:
    """An ``on_error`` callback for the libraries: counts the events they gave up on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events = 0
        self.calls = 0

    def __call__(self, error: Exception, batch: list[Any]) -> None:
        with self.lock:
            self.calls += 1
            self.events += len(batch)


def segment(args: argparse.Namespace, key: str) -> dict[str, Any]:
    from segment.analytics import Client  # noqa: PLC0415 - each peer imports only its own library

    on_error = ErrorCount()
    options: dict[str, Any] = {}
    if args.config == "tuned":
        options = {"thread": args.concurrency, "upload_size": 500}
    if args.config != "shipped":
        options["max_queue_size"] = args.limit + 1000  # the default (10,000) drops the rest
    client = Client(write_key=key, host=args.url, on_error=on_error, **options)
    refused = handed = 0
    started = time.monotonic()
    for rows in records(args.file, args.limit, 10_000):
        for r in rows:
            handed += 1
            ok, _ = client.track(
                user_id=str(r["external_user_id"]),
                event=r["event_type"],
                properties=r["properties"] or {},
                timestamp=r["occurred_at"].to_pydatetime(),
            )
            refused += not ok
    enqueued_s = time.monotonic() - started
    client.flush()  # queue.join(): every event attempted (a failure counts as done)
    send_s = time.monotonic() - started
    client.join()
    return {
        "handed": handed,
        "refused": refused,
        "errors": on_error.events,
        "enqueued_s": enqueued_s,
        "send_s": send_s,
    }


def posthog(args: argparse.Namespace, key: str) -> dict[str, Any]:
    from posthog import Posthog  # noqa: PLC0415 - each peer imports only its own library

    on_error = ErrorCount()
    options: dict[str, Any] = {}
    if args.config == "tuned":
        options = {"thread": args.concurrency, "flush_at": 500}
    if args.config != "shipped":
        options["max_queue_size"] = args.limit + 1000  # the default (10,000) drops the rest
    client = Posthog(key, host=args.url, on_error=on_error, **options)
    refused = handed = 0
    started = time.monotonic()
    for rows in records(args.file, args.limit, 10_000):
        for r in rows:
            handed += 1
            sent = client.capture(
                r["event_type"],
                distinct_id=str(r["external_user_id"]),
                properties=r["properties"] or {},
                timestamp=r["occurred_at"].to_pydatetime(),
            )
            refused += sent is None
    enqueued_s = time.monotonic() - started
    # flush() gives up after 10 s by default, events still queued; shutdown() then drains
    client.flush(**({} if args.config == "shipped" else {"timeout_seconds": None}))
    flushed = time.monotonic() - started
    client.shutdown()
    send_s = time.monotonic() - started
    return {
        "handed": handed,
        "refused": refused,
        "errors": on_error.events,
        "enqueued_s": enqueued_s,
        "flushed_s": flushed,
        "send_s": send_s,
    }


def blast(args: argparse.Namespace, key: str) -> dict[str, Any]:
    """Post one pre-built 500-event body over C keep-alive connections for ``--seconds``."""
    rows = next(records(args.file, 500, 500))
    body = orjson.dumps({"events": [wire_event(r) for r in rows]})
    parts = urlsplit(args.url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    deadline = time.monotonic() + args.seconds
    lock = threading.Lock()
    totals = {"acknowledged": 0, "errors": 0, "handed": 0}

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        acknowledged = errors = handed = 0
        while time.monotonic() < deadline:
            handed += len(rows)
            conn.request("POST", "/v1/events/batch", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                acknowledged += len(rows)
            else:
                errors += len(rows)
        conn.close()
        with lock:
            totals["acknowledged"] += acknowledged
            totals["errors"] += errors
            totals["handed"] += handed

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {**totals, "send_s": time.monotonic() - started}


MODES = {"naive": naive, "diy": diy, "segment": segment, "posthog": posthog, "blast": blast}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("file")
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--limit", type=int, default=200_000, help="rows to send at most")
    parser.add_argument("--seconds", type=float, default=15.0, help="naive, blast: time bound")
    parser.add_argument("--config", choices=["shipped", "defaults", "tuned"], default="defaults")
    args = parser.parse_args()
    key = os.environ.get("CHURN_API_KEY", "")
    if not key:
        sys.exit("set CHURN_API_KEY")
    args.url = args.url.rstrip("/")
    result = MODES[args.mode](args, key)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
