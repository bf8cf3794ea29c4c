"""Shared fixtures: a sandbox per test, a client for it, and a small events table.

The folders mirror the package's (``core``, ``read``, ``json``, ``validate``, ``events``,
``identities``, ``ledger``, ``delivery``, ``notebook``, ``cli``, ``tasks``, ``docs``, and the
``sandbox``, ``airflow`` and ``spark`` suites). In each, unit tests stand beside end-to-end
ones, which are marked ``e2e``: they go over real HTTP (a sandbox, a fault proxy, a TLS
server) or run the program, a kernel or a server in a process of their own.
``pytest -m "not e2e"`` runs the unit tests alone.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol, TypedDict

import pandas as pd
import pytest
import trustme

import churn_connector as cc
from churn_connector._core.types import ExtraColumns

# the ledger's PostgreSQL and S3-compatible servers, started when a test first needs them
pytest_plugins = ["tests.ledger.servers"]


class MakeEvents(Protocol):
    """The type of the ``make_events`` fixture (the module-level ``make_events`` below)."""

    def __call__(self, now: pd.Timestamp, n: int = ..., users: int = ...) -> pd.DataFrame: ...


class WireOptions(TypedDict, total=False):
    """The keywords of ``cc.events_to_wire`` besides ``now``, for typed test helpers."""

    naive_timezone: str | None
    extra_columns: ExtraColumns
    namespace: str | None
    id_columns: Sequence[str] | None
    slice_rows: int


# suites that need a pytest process of their own
OWN_PROCESS = tuple(Path(__file__).parent / name for name in ("airflow", "spark", "dagster"))


# what the fault and interrupt tests saw (requests, retries, duplicates absorbed, seconds),
# printed after the run: figures for reviewers, never asserted on as timings. They travel
# in the test's report (its user properties), so those seen in pytest-xdist's workers reach
# the summary the main process prints
FIGURE = "churn-figure"


class Figures(Protocol):
    def __call__(self, text: str) -> None: ...


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Note what this test saw; it is printed in the run's summary."""

    def note(text: str) -> None:
        request.node.user_properties.append((FIGURE, text))

    return note


# a test that takes one of these fixtures talks to a real server: it is end-to-end
E2E_FIXTURES = frozenset({"sandbox", "client", "odd_server", "ca_file", "api"})
SANDBOX_SUITE = Path(__file__).parent / "sandbox"  # the sandbox's own tests: HTTP throughout


# make test-min runs the suite again on the oldest versions of the package's dependencies
# (constraints-min.txt), to keep pyproject's lower bounds true: the tests marked
# ``lower_bounds``, those that exercise how the package uses pandas, pyarrow, numpy, pandera,
# orjson, requests, urllib3, tqdm and phonenumbers. That is every unit test (reading, dtypes,
# validation, JSON, ids, the row book, displays: in process) and every end-to-end test but
# those of these folders, whose subjects are processes, servers and documents (the CLI's
# exit codes and signals, the ledger's SQLite, PostgreSQL and S3 servers, tasks' files, the
# notebooks' kernels and Chromium, the docs' examples and build): their tools (psycopg,
# s3fs, Jupyter, MkDocs) are the same versions in both environments, and what they reach
# of the dependencies the end-to-end tests of reading, delivery, tracking and the sandbox
# reach too.
NOT_AT_LOWER_BOUNDS = tuple(
    Path(__file__).parent / name for name in ("cli", "ledger", "tasks", "notebook", "docs")
)
# none of the incremental syncs' tests, unit ones included: they read databases through the
# sql extra's drivers (ADBC), which the lower-bound environment does not install
NEEDS_SQL_EXTRA = Path(__file__).parent / "sync"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())) or item.path.is_relative_to(
            SANDBOX_SUITE
        ):
            item.add_marker(pytest.mark.e2e)
        if item.path.is_relative_to(NEEDS_SQL_EXTRA):
            continue
        if item.get_closest_marker("e2e") is None or not any(
            item.path.is_relative_to(folder) for folder in NOT_AT_LOWER_BOUNDS
        ):
            item.add_marker(pytest.mark.lower_bounds)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seen = {
        report.location[2]: value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == FIGURE
    }
    if seen:
        terminalreporter.write_sep("-", "what the fault and interrupt tests saw")
        for name, text in sorted(seen.items()):
            terminalreporter.write_line(f"{name}: {text}")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which
    # tqdm 4.66 (make test-min) takes for a terminal's size, cutting the progress bars the
    # tests read from captured output: the suite's output has no terminal, wherever it runs
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/airflow, tests/spark and tests/dagster run only when named (``pytest
    tests/airflow``, as ``make pytest`` does): Airflow's configuration, logging and SIGTERM
    handler are process-wide, and so are a JVM and its SparkSession, and Dagster's logging
    and home, so each gets a process of its own."""
    if collection_path not in OWN_PROCESS:
        return None
    named = (Path(arg.split("::")[0]).resolve() for arg in config.args)
    return not any(path.is_relative_to(collection_path) for path in named)


@pytest.fixture(autouse=True)
def _instant_retries() -> Iterator[None]:
    # retry tests keep every attempt but skip the sleeping (stamina-style test mode)
    with cc.instant_retries():
        yield


@pytest.fixture
def now() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC").floor("s")


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox() as sb:
        yield sb


@pytest.fixture
def client(sandbox: cc.Sandbox) -> cc.Client:
    return cc.Client(sandbox.base_url, sandbox.api_key, read_timeout=5.0)


def make_events(now: pd.Timestamp, n: int = 10, users: int = 3) -> pd.DataFrame:
    """A valid events table of ``n`` rows, one minute apart, ending an hour before ``now``."""
    return pd.DataFrame(
        {
            "external_user_id": [f"user_{i % users}" for i in range(n)],
            "event_type": ["page_view" if i % 2 else "login" for i in range(n)],
            "occurred_at": [
                now - pd.Timedelta(hours=1) - pd.Timedelta(minutes=i) for i in range(n)
            ],
            "properties.plan": ["pro" if i % 3 else "free" for i in range(n)],
            "properties.seq": list(range(n)),
        }
    )


@pytest.fixture
def events(now: pd.Timestamp) -> pd.DataFrame:
    return make_events(now)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throw-away certificate authority for TLS tests."""
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    """The throw-away CA's certificate as a PEM file (what ``ca_bundle=`` takes)."""
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def odd_server() -> Iterator[Callable[..., str]]:
    """Start loopback servers that answer every POST with a fixed status, headers and body."""
    servers: list[ThreadingHTTPServer] = []

    def start(
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        peers: set[tuple[str, int]] | None = None,
    ) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if peers is not None:
                    peers.add(self.client_address)  # one address per client connection
                time.sleep(delay)
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(name="make_events")
def make_events_fixture() -> MakeEvents:
    return make_events
