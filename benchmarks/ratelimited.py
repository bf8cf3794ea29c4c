"""A receiver with a rate limit, run in its own process: an API that answers 429 above N
requests a second.

Its limit is a token bucket of ``--rate`` tokens a second holding at most ``--burst`` (a
quarter of a second's worth by default): each request takes one token and is answered 200
(``{"accepted": <events>}``), or, with none left, 429 with ``Retry-After: 1`` (as most
rate-limited APIs do). Any POST path is accepted. ``GET /stats`` returns what arrived:
each answer's time (``time.time()``) and status, so a caller can measure the rate it got
and the share of 429s. Loopback only; one thread per connection.

    python benchmarks/ratelimited.py [--rate 20] [--burst 5] [--port 0]

Prints ``listening <port>`` on stdout once it accepts connections. The shared request
budget's test (tests/delivery/test_budget.py) and benchmark (bench.py, ``budget``) use it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Limit:
    """The token bucket, and the log of answers (time, status)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = time.monotonic()
        self.lock = threading.Lock()
        self.log: list[tuple[float, int]] = []

    def take(self) -> int:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            status = 429
            if self.tokens >= 1:
                self.tokens -= 1
                status = 200
            self.log.append((time.time(), status))
            return status


def handler(limit: Limit) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _answer(self, status: int, body: bytes, extra: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            status = limit.take()
            if status == 429:
                body = b'{"error":{"code":"rate_limited","message":"above the rate limit"}}'
                self._answer(429, body, {"Retry-After": "1"})
                return
            try:
                parsed = json.loads(raw)
                events = len(parsed["events"]) if "events" in parsed else 1
            except (ValueError, TypeError, KeyError):
                events = 0
            self._answer(200, json.dumps({"accepted": events}).encode(), {})

        def do_GET(self) -> None:
            if self.path != "/stats":
                self._answer(404, b"{}", {})
                return
            with limit.lock:
                body = json.dumps({"answers": limit.log}).encode()
            self._answer(200, body, {})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--burst", type=float, default=None)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    limit = Limit(args.rate, args.burst if args.burst is not None else max(1.0, args.rate / 4))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(limit))
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()


# ------------------------------------------------------------------ four workers, measured


def start(rate: float, python: str = sys.executable) -> tuple[subprocess.Popen[str], str]:
    """This receiver in a process of its own: the process and its base URL."""
    process = subprocess.Popen(
        [python, __file__, "--rate", str(rate)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline().split()
    if line[:1] != ["listening"]:
        process.kill()
        raise RuntimeError("the rate-limited receiver did not start")
    return process, f"http://127.0.0.1:{line[1]}"


def stop(process: subprocess.Popen[str]) -> None:
    """End a receiver that ``start`` started."""
    process.terminate()
    process.wait(10)
    if process.stdout is not None:
        process.stdout.close()


def events_file(path: Path, worker: int, n: int) -> Path:
    """``n`` valid events of their own for one worker, as NDJSON."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    lines = [
        json.dumps(
            {
                "external_user_id": f"w{worker}_u{i % 7}",
                "event_type": "page_view",
                "occurred_at": (now - dt.timedelta(seconds=i)).isoformat(),
                "properties": {"seq": i, "worker": worker},
            }
        )
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def four_workers(
    cli: list[str],
    folder: Path,
    *,
    budget: str | None,
    env: dict[str, str],
    workers: int = 4,
    rate: float = 20.0,
    each: int = 50,
    timeout: float = 180.0,
) -> dict[str, Any]:
    """``workers`` processes of ``cli`` (``churn-connector``), each sending ``each`` events
    one a request at ``--max-requests-per-second rate``, sharing ``budget`` (or not),
    against this receiver limited to ``rate``: the requests answered, the rate accepted
    (from the first 200 to the last) and the share of 429s."""
    receiver, url = start(rate)
    try:
        files = [events_file(folder / f"w{i}.ndjson", i, each) for i in range(workers)]
        shared = ["--budget", budget] if budget else []
        children = [
            subprocess.Popen(
                [
                    *cli,
                    "send",
                    "events",
                    str(f),
                    "--base-url",
                    url,
                    "--batch-size",
                    "1",
                    "--concurrency",
                    "4",
                    "--max-requests-per-second",
                    f"{rate:g}",
                    "-v",
                    *shared,
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for f in files
        ]
        outputs = [c.communicate(timeout=timeout) for c in children]
        with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:  # noqa: S310
            log = json.loads(answer.read())["answers"]
    finally:
        stop(receiver)
    ok = sorted(t for t, status in log if status == 200)
    limited = sum(1 for _, status in log if status == 429)
    span = ok[-1] - ok[0] if len(ok) > 1 else float("nan")
    return {
        "workers": workers,
        "budget": "shared" if budget else "each its own",
        "requests": len(log),
        "accepted": len(ok),
        "rate_per_s": (len(ok) - 1) / span if span else float("nan"),
        "answered_429": limited,
        "share_429": limited / len(log) if log else float("nan"),
        "seconds": span,
        "exit_codes": [c.returncode for c in children],
        "output": "".join(out + err for out, err in outputs),
    }
