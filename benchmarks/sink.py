"""A minimal HTTP receiver for throughput benchmarks: reads the body, waits, answers 200.

The sandbox checks every event in Python and stores it in SQLite, which makes it the
bottleneck of a throughput benchmark; this sink stands in for a fast remote API so the
numbers measure the client. Loopback only.

    python benchmarks/sink.py PORT LATENCY_SECONDS
"""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else delayed ACKs add ~40 ms to every response
    latency = 0.0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(self.latency)
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    port, latency = int(sys.argv[1]), float(sys.argv[2])
    Handler.latency = latency
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
