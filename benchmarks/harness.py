"""What the benchmark scripts share: result rows, child processes with their own resource
use, the receiver (sink.py) and what it counted, and the machine's description.

Imported by bench.py (the suite) and the scripts it runs as sections (sandbox.py, floor.py,
callgrind.py), each of which also runs on its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

KEY = "sk_bench_local_only_0001"
CHILD_TIMEOUT = 900.0  # seconds; no single run gets near it on this machine


# ----------------------------------------------------------------------------- results


@dataclass
class Row:
    section: str
    name: str
    value: float | None
    unit: str
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        shown = "n/a" if row.value is None else f"{fmt(row.value)} {row.unit}"
        note = f"  ({row.note})" if row.note else ""
        print(f"  [{row.section}] {row.name}: {shown}{note}", file=sys.stderr, flush=True)
        return row

    def problem(self, text: str) -> None:
        """One of our own runs failed or lost events: the benchmark exits 1."""
        self.problems.append(text)
        print(f"  !! {text}", file=sys.stderr, flush=True)

    def finding(self, text: str) -> None:
        """A peer failed or lost events: reported, not a failure of this benchmark."""
        self.findings.append(text)
        print(f"  !! {text}", file=sys.stderr, flush=True)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


# ----------------------------------------------------------------------------- processes


@dataclass
class Child:
    """A finished child process: exit code, wall time, its own CPU and peak RSS."""

    cmd: list[str]
    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_mib: float
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def tail(self) -> str:
        text = (self.stderr or self.stdout).strip().splitlines()
        return " / ".join(text[-3:])[:400]


def child_env() -> dict[str, str]:
    """The environment of every child: the key, and no way off this machine.

    Any request to a host other than loopback goes to a proxy address on which nothing
    listens, so a library with a default cloud endpoint cannot reach it by accident.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHURN_", "POSTHOG_"))}
    dead = "http://127.0.0.1:9"
    env.update(
        {
            "CHURN_API_KEY": KEY,
            "HTTP_PROXY": dead,
            "HTTPS_PROXY": dead,
            "http_proxy": dead,
            "https_proxy": dead,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def run_child(
    cmd: list[str], timeout: float = CHILD_TIMEOUT, env: dict[str, str] | None = None
) -> Child:
    """Run ``cmd`` to completion through launch.py, which reports the child's own rusage.

    Started straight from this (large) process, a child's peak RSS would start at ours.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        launcher = [sys.executable, str(HERE / "launch.py"), str(out), str(err), str(timeout)]
        done = subprocess.run(
            [*launcher, "--", *cmd],
            env={**child_env(), **(env or {})},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout + 60,
            check=False,
        )
        try:
            usage = orjson.loads(done.stdout)
        except orjson.JSONDecodeError:
            raise RuntimeError(
                f"launch.py failed: {done.stderr.decode(errors='replace')}"
            ) from None
        return Child(
            cmd=cmd,
            returncode=usage["returncode"],
            wall_s=usage["wall_s"],
            user_s=usage["user_s"],
            sys_s=usage["sys_s"],
            maxrss_mib=usage["maxrss_kib"] / 1024,  # KiB on Linux
            stdout=out.read_text(errors="replace"),
            stderr=err.read_text(errors="replace"),
            timed_out=usage["timed_out"],
        )


def user_python() -> str:
    """The interpreter of the measured programs (ours, the peers, the floor).

    ``make bench`` points ``BENCH_PYTHON`` at ``.venv-bench``: the package installed as a
    user installs it (``pip install -e .[bench]``: its dependencies, the fast extra's hash
    and the peers), without the dev venv's test tools. pandera imports hypothesis and
    PySpark when they are installed, which adds ~0.3 s of CPU to every start (measured
    0.90-1.00 s against 0.67-0.71 s for a 100-row dry run). Unset: this interpreter.
    """
    return os.environ.get("BENCH_PYTHON") or sys.executable


def cli() -> str:
    """The program under test; BENCH_CLI names another (an older revision, to compare)."""
    return os.environ.get("BENCH_CLI") or str(Path(user_python()).with_name("churn-connector"))


def cli_send(
    path: Path,
    url: str,
    *options: str,
    timeout: float = CHILD_TIMEOUT,
    env: dict[str, str] | None = None,
) -> Child:
    return run_child(
        [cli(), "send", "events", str(path), "--base-url", url, *options], timeout, env
    )


def peer(mode: str, path: Path, url: str, *options: str) -> tuple[Child, dict[str, Any]]:
    child = run_child([user_python(), str(HERE / "peers.py"), mode, str(path), url, *options])
    lines = child.stdout.strip().splitlines()
    try:
        result = orjson.loads(lines[-1]) if lines else {}
    except orjson.JSONDecodeError:
        result = {}
    return child, result


# ----------------------------------------------------------------------------- receiver


class Sink:
    """benchmarks/sink.py in its own process; ``stats()`` reads what arrived."""

    def __init__(self, latency: float, record: Path | None = None) -> None:
        self.latency = latency
        self.record = record
        extra = ["--record", str(record)] if record is not None else []
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "sink.py"), "--latency", str(latency), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        killer = threading.Timer(30, self.proc.kill)  # never wait forever for it to start
        killer.start()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        killer.cancel()
        if not line.startswith("listening "):
            self.close()
            raise RuntimeError(f"the receiver did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self, path: str = "/stats") -> dict[str, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path)
            stats: dict[str, Any] = orjson.loads(conn.getresponse().read())
            return stats
        finally:
            conn.close()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def receiver(latency: float, record: Path | None = None) -> Iterator[Sink]:
    sink = Sink(latency, record)
    try:
        yield sink
    finally:
        sink.close()


@dataclass
class Arrived:
    """What the receiver counted during one run."""

    events: int
    requests: int
    bad_requests: int
    paths: dict[str, dict[str, int]]
    encodings: dict[str, int]
    bytes_on_wire: int
    span_s: float | None  # first request in to last answer out, at the receiver
    first_in: float | None = None  # when the first request came in (time.monotonic())

    def where(self) -> str:
        paths = ", ".join(f"{p} x{c['requests']}" for p, c in self.paths.items())
        coded = {k: v for k, v in self.encodings.items() if k != "identity"}
        return paths + (f"; bodies {coded}" if coded else "")


def measure(sink: Sink, run: Callable[[], Any]) -> tuple[Any, Arrived]:
    sink.stats("/mark")
    before = sink.stats()
    result = run()
    after = sink.stats()
    paths = {}
    for path, counts in after["paths"].items():
        old = before["paths"].get(path, {"requests": 0, "events": 0})
        delta = {k: counts[k] - old[k] for k in ("requests", "events")}
        if delta["requests"]:
            paths[path] = delta
    encodings = {
        k: v - before["encodings"].get(k, 0)
        for k, v in after["encodings"].items()
        if v - before["encodings"].get(k, 0)
    }
    arrived = Arrived(
        events=after["events"] - before["events"],
        requests=after["requests"] - before["requests"],
        bad_requests=after["bad_requests"] - before["bad_requests"],
        paths=paths,
        encodings=encodings,
        bytes_on_wire=after["bytes_on_wire"] - before["bytes_on_wire"],
        span_s=after.get("span_s"),
        first_in=after.get("first_in"),
    )
    return result, arrived


def check_ours(report: Report, what: str, child: Child, arrived: Arrived, expected: int) -> bool:
    """Our CLI must exit 0 and the receiver must count every row once."""
    ok = True
    if child.returncode != 0:
        report.problem(f"{what}: churn-connector exited {child.returncode}: {child.tail()}")
        ok = False
    if arrived.events != expected:
        report.problem(f"{what}: the receiver counted {arrived.events:,} of {expected:,} events")
        ok = False
    return ok


def delivered_note(arrived: int, expected: int) -> str:
    if arrived == expected:
        return f"{arrived:,}/{expected:,} delivered"
    if arrived < expected:
        return f"LOST {expected - arrived:,}: {arrived:,}/{expected:,} delivered"
    return f"{arrived - expected:,} EXTRA: {arrived:,}/{expected:,} delivered"


# ----------------------------------------------------------------------------- machine


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def git_revision() -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        rev = subprocess.run(
            [git, "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            [git, "-C", str(ROOT), "status", "--porcelain", "--", "churn_connector"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None
    return rev + (" (package modified)" if dirty else "")


_MEASURED = (
    "churn-connector",
    "pandas",
    "pyarrow",
    "numpy",
    "orjson",
    "pandera",
    "requests",
    "urllib3",
    "hypothesis",  # pandera imports it at start-up when it is installed
    "pyspark",  # likewise
    "segment-analytics-python",
    "posthog",
)


def measured_versions() -> dict[str, str | None]:
    """The versions installed where the measured programs run (``user_python``)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(n):\n"
        "    try:\n"
        "        return m.version(n)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [user_python(), "-c", code, *_MEASURED], capture_output=True, check=True, text=True
    )
    found: dict[str, str | None] = orjson.loads(done.stdout)
    return found


def machine() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "measured_with": user_python(),
        "versions": measured_versions(),
        "revision": git_revision(),
    }
