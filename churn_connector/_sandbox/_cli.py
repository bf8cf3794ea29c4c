"""``churn-connector sandbox``: serve a sandbox until Ctrl-C or SIGTERM.

Keys come from ``CHURN_API_KEY`` (comma-separated for several applications), never from the
command line, where they would land in shell history and process lists.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from ._core import Sandbox, generate_test_key
from ._engine import DEFAULT_MAX_BODY_BYTES

EXIT_OK = 0
EXIT_USAGE = 3  # the package's exit code for usage and configuration errors


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0.0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def build_parser(prog: str = "churn-connector sandbox") -> argparse.ArgumentParser:
    """The argument parser (exposed so the package CLI can embed it)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a strict local stand-in for the ingestion API. "
        "API keys come from CHURN_API_KEY (comma-separated); without it a test key is made.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--db", help="SQLite file to keep data in (default: memory)")
    parser.add_argument("--latency", type=_seconds, default=0.0, help="seconds per request")
    parser.add_argument("--error-rate", type=_probability, default=0.0, help="P(5xx)")
    parser.add_argument("--rate-limit-rate", type=_probability, default=0.0, help="P(429)")
    parser.add_argument("--retry-after", type=_seconds, default=1.0, help="429 Retry-After")
    parser.add_argument(
        "--drop-rate", type=_probability, default=0.0, help="P(stored, response lost)"
    )
    parser.add_argument("--seed", type=int, default=None, help="fault seed (default: random)")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="413 above this size, the body unread (default 32 MiB; 0: no cap)",
    )
    return parser


def _keys_from_env() -> list[str] | None:
    raw = os.environ.get("CHURN_API_KEY", "")
    keys = [key.strip() for key in raw.split(",") if key.strip()]
    return keys or None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted; 0 on a clean stop, 3 on a usage or configuration error."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and on usage errors (2)
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    env_keys = _keys_from_env()
    keys = env_keys or [generate_test_key()]
    try:
        sandbox = Sandbox(
            api_keys=keys,
            host=args.host,
            port=args.port,
            db=args.db,
            latency=args.latency,
            error_rate=args.error_rate,
            rate_limit_rate=args.rate_limit_rate,
            retry_after=args.retry_after,
            drop_rate=args.drop_rate,
            seed=args.seed,
            max_body_bytes=args.max_body_bytes or None,
        )
        sandbox.start()
    except (ValueError, TypeError, OSError) as exc:
        print(f"churn-connector sandbox: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    previous = _install_sigterm(stop)
    try:
        print(f"Sandbox listening on {sandbox.base_url}", flush=True)
        print(f"export CHURN_BASE_URL={sandbox.base_url}", flush=True)
        if env_keys is None:  # a generated test key is printed; a key from the env never is
            print(f"export CHURN_API_KEY={sandbox.api_key}", flush=True)
        else:
            print(f"Using {len(env_keys)} API key(s) from CHURN_API_KEY", flush=True)
        if args.db:
            print(f"Storing data in {args.db}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        while not stop.wait(0.5):  # a timed wait keeps Ctrl-C responsive on every platform
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        sandbox.close()
    print("Sandbox stopped.", flush=True)
    return EXIT_OK


def _install_sigterm(stop: threading.Event) -> Any:
    """Make SIGTERM stop the loop; returns the previous handler (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return signal.signal(signal.SIGTERM, on_sigterm)


if __name__ == "__main__":
    raise SystemExit(main())
