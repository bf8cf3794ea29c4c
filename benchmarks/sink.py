"""A minimal HTTP receiver for throughput benchmarks, run in its own process.

It stands in for a fast remote API so the numbers measure the client, not the server (the
strict sandbox checks every event and stores it in SQLite: 40-70k events/s). Any
POST path is accepted; the body is read (gzip or deflate when the client says so), parsed
as JSON and its events counted: ``events`` (ours), ``batch`` (Segment, PostHog), a JSON
array, or 1 for a single object. The handler answers 200 with a small JSON body the
configured latency after the request arrived: its own reading and parsing count in the
latency (a sleep after them added them to every answer: with 64 identify requests in flight
on 2 busy cores, 0.9 ms at the 90th percentile and 26 ms at the 99th). ``GET /stats``
returns the counts, so a benchmark can check that every event arrived, and the sending span
since ``GET /mark`` (first request in to last answer out). Loopback only; one thread per
connection; no per-request logging. ``--record FILE``: one line per request, the SHA-256 of
its (decoded) body and its number of events, so a benchmark can compare what two programs
put on the wire byte for byte.

    python benchmarks/sink.py [--port 0] [--latency SECONDS] [--record FILE]

Prints ``listening <port>`` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
import threading
import time
import zlib
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:
    import orjson

    loads = orjson.loads
    dumps = orjson.dumps
except ImportError:  # pragma: no cover - the benchmark venv has orjson
    import json

    loads = json.loads

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj).encode()


class Counts:
    """What arrived, by path; one lock, taken once per request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = time.time()
        self.requests = 0
        self.events = 0
        self.bytes_on_wire = 0
        self.bytes_decoded = 0
        self.bad_requests = 0
        self.encodings: dict[str, int] = defaultdict(int)
        self.paths: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # requests, events
        self.connections = 0
        # the sending span since the last mark: first request in, last answer out
        self.first_in: float | None = None
        self.last_out: float | None = None

    def mark(self) -> None:
        with self.lock:
            self.first_in = self.last_out = None

    def arrived(self, at: float) -> None:
        with self.lock:
            if self.first_in is None or at < self.first_in:
                self.first_in = at

    def answered(self, at: float) -> None:
        with self.lock:
            if self.last_out is None or at > self.last_out:
                self.last_out = at

    def add(self, path: str, events: int, wire: int, decoded: int, encoding: str) -> None:
        with self.lock:
            self.requests += 1
            self.events += events
            self.bytes_on_wire += wire
            self.bytes_decoded += decoded
            self.encodings[encoding] += 1
            entry = self.paths[path]
            entry[0] += 1
            entry[1] += events

    def bad(self) -> None:
        with self.lock:
            self.bad_requests += 1

    def connected(self) -> None:
        with self.lock:
            self.connections += 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "events": self.events,
                "bytes_on_wire": self.bytes_on_wire,
                "bytes_decoded": self.bytes_decoded,
                "bad_requests": self.bad_requests,
                "encodings": dict(self.encodings),
                "paths": {p: {"requests": r, "events": e} for p, (r, e) in self.paths.items()},
                "connections": self.connections,
                "first_in": self.first_in,  # time.monotonic(): comparable across processes
                "span_s": (
                    self.last_out - self.first_in
                    if self.first_in is not None and self.last_out is not None
                    else None
                ),
                "uptime_s": time.time() - self.started,
            }


COUNTS = Counts()
RECORD: Any = None  # the --record file, when given


def count_events(body: Any) -> int:
    """Events in one request body: our ``events``, Segment's/PostHog's ``batch``, or 1."""
    if isinstance(body, list):
        return len(body)
    if isinstance(body, dict):
        for key in ("events", "batch"):
            items = body.get(key)
            if isinstance(items, list):
                return len(items)
        return 1
    return 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse their connections
    disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms to every response
    latency = 0.0

    def setup(self) -> None:
        super().setup()
        COUNTS.connected()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        body = dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        arrived = time.monotonic()
        COUNTS.arrived(arrived)
        raw = self._body()
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        try:
            if encoding == "gzip":
                data = gzip.decompress(raw)
            elif encoding == "deflate":
                data = zlib.decompress(raw)
            else:
                data = raw
            events = count_events(loads(data))
        except Exception:
            COUNTS.bad()
            self._answer(400, {"error": "unreadable body"})
            return
        path = self.path.split("?", 1)[0]
        COUNTS.add(path, events, len(raw), len(data), encoding)
        if RECORD is not None:
            line = f"{hashlib.sha256(data).hexdigest()} {events}\n"
            with COUNTS.lock:
                RECORD.write(line)
                RECORD.flush()
        if self.latency:
            time.sleep(max(0.0, arrived + self.latency - time.monotonic()))
        self._answer(200, {"ok": True, "accepted": events})
        COUNTS.answered(time.monotonic())

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/stats":
            self._answer(200, COUNTS.snapshot())
        elif self.path.split("?", 1)[0] == "/mark":
            COUNTS.mark()
            self._answer(200, {"ok": True})
        else:
            self._answer(404, {"error": "POST events anywhere; GET /stats"})

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog (5) drops SYNs when 32 clients connect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before answering")
    parser.add_argument("--record", help="append 'sha256-of-body events' per request here")
    args = parser.parse_args()
    Handler.latency = args.latency
    global RECORD
    if args.record:
        RECORD = open(args.record, "a")  # noqa: SIM115 - open for the process's life
    server = Server(("127.0.0.1", args.port), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
