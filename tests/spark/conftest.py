"""Real Spark for the data source's tests: one local SparkSession for the whole process.

``local[2,4]``: two task slots, and four attempts per task (plain ``local[2]`` never retries
a task, which the retry test needs). Spark's Python workers are started by the JVM and
inherit the environment it started with, so what they need is set here, when this conftest
is imported, before the session exists: this venv's Python (``PYSPARK_PYTHON``), the repo on
``PYTHONPATH`` (the workers import ``tests.spark.flaky``, and Spark's data source lookup
finds ``pyspark_churn`` there, as it finds it in site-packages after a normal install; an
editable install's import hook is invisible to that lookup), the executors' key
(``CHURN_API_KEY``), and loopback addresses only. These tests run in a pytest process of
their own (``pytest tests/spark``; ``make pytest`` runs every suite).
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ledger.servers import PG_PASSWORD

HERE = Path(__file__).parent
REPO = HERE.parents[1]
os.environ.update(
    {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
)
# two canary keys the sandbox accepts: one the executors read from their environment, one
# passed as the option api_token. Neither may show in a plan, a log or the event log.
ENV_KEY = "sk_test_envcanary_" + secrets.token_hex(8)
TOKEN_KEY = "sk_test_tokencanary_" + secrets.token_hex(8)
# a third, only for Spark Connect, where option values travel in the logged plan: the
# session redacts strings like it (spark.redaction.string.regex), as docs/guides/spark.md advises
CONNECT_KEY = "sk_test_connectcanary_" + secrets.token_hex(8)
os.environ["CHURN_API_KEY"] = ENV_KEY
# where the flaky streaming sink (tests/spark/flaky.py) remembers the failure it injected
os.environ["CHURN_TEST_FLAKY_DIR"] = tempfile.mkdtemp(prefix="churn-flaky-")
os.environ.pop("CHURN_BASE_URL", None)
# the executors' password for the test PostgreSQL ledger (the ledger option's URL holds none)
os.environ["PGPASSWORD"] = PG_PASSWORD

with warnings.catch_warnings():
    # PySpark checks its optional dependencies once per process, with a check that warns
    # about pandas 3; under pytest's filterwarnings=error the check fails, which disables
    # the Spark Connect client for the whole process (a classic session's start runs it too)
    warnings.filterwarnings("ignore", "PySpark does not yet fully support", FutureWarning)
    import pyspark
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

import churn_connector as cc  # noqa: E402

# a fixed instant: every evaluation of a test DataFrame gives the same rows, so the same ids
BASE_EPOCH = int(time.time()) - 3600
TIMINGS: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    if pyspark.__version__.startswith("4.0."):
        # PySpark 4.0's collect() leaves its socket to the JVM for the garbage collector
        # (4.3 closes it); under filterwarnings=error that ResourceWarning fails a test
        config.addinivalue_line("filterwarnings", "ignore:unclosed <socket.socket:ResourceWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mixed = [item.nodeid for item in items if not item.path.is_relative_to(HERE)]
    if mixed:
        raise pytest.UsageError(
            f"tests/spark runs in a pytest process of its own, not with {mixed[0]} "
            "(make pytest runs both)"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


CONNECT_PORT = _free_port()


@pytest.fixture(scope="session")
def eventlog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("eventlog")


@pytest.fixture(scope="session")
def spark(eventlog_dir: Path) -> Iterator[SparkSession]:
    started = time.perf_counter()
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("churn-connector-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(eventlog_dir))
        .config("spark.eventLog.compress", "false")  # readable, for the key's test
        .config("spark.redaction.string.regex", "sk_test_connectcanary_[0-9a-f]+")
        # a Spark Connect server in this JVM, for the Connect test
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", str(CONNECT_PORT))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    TIMINGS["session start"] = time.perf_counter() - started
    yield session
    session.stop()


@pytest.fixture
def connect(spark: SparkSession) -> Iterator[ConnectSession]:
    """A Spark Connect client of the server in this process's JVM."""
    remote = ConnectSession.builder.remote(f"sc://127.0.0.1:{CONNECT_PORT}").getOrCreate()
    yield remote
    remote.stop()


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[ENV_KEY, TOKEN_KEY, CONNECT_KEY]) as sb:
        yield sb


def events_df(
    spark: SparkSession, n: int = 3000, partitions: int = 3, users: int = 50, invalid: int = 0
) -> DataFrame:
    """Events as a Spark user keeps them: a ``properties`` map beside flat
    ``properties.<key>`` columns (a nullable bigint among them); the first ``invalid`` rows
    have a bad event_type. Spark SQL only, so it builds on classic and Connect sessions."""
    return spark.range(0, n, 1, partitions).selectExpr(
        f"concat('user_', CAST(id % {users} AS STRING)) AS external_user_id",
        f"CASE WHEN id < {invalid} THEN 'Bad Type' "
        "WHEN id % 2 = 0 THEN 'page_view' ELSE 'login' END AS event_type",
        f"timestamp_seconds({BASE_EPOCH} - id) AS occurred_at",
        "map('src', 'spark') AS properties",
        "CASE WHEN id % 3 = 0 THEN 'free' ELSE 'pro' END AS `properties.plan`",
        "id AS `properties.seq`",
        "CASE WHEN id % 5 = 0 THEN NULL ELSE id * 10 END AS `properties.maybe`",
    )


def identities_df(spark: SparkSession, users: int = 200, per_user: int = 3) -> DataFrame:
    """``per_user`` rows per user, spread over ``per_user`` partitions (user u's rows are
    ids u, u + users, ...): ``traits.seq`` says each row's place in the input."""
    return spark.range(0, users * per_user, 1, per_user).selectExpr(
        f"concat('u', CAST(id % {users} AS STRING)) AS external_user_id",
        "id AS `traits.seq`",
        "CASE WHEN id % 2 = 0 THEN 'free' ELSE 'pro' END AS `traits.plan`",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items())
        terminalreporter.write_line(f"spark: {spent}")
