"""Real Airflow for the provider's tests: a throw-away AIRFLOW_HOME with a SQLite metadata DB.

Airflow reads its configuration once, when ``airflow`` is first imported, and keeps it for
the life of the process; its task runner installs a SIGTERM handler and leaves it. So the
environment is set here, when this conftest is imported (before any test module imports
Airflow), and these tests run in a pytest process of their own (``pytest tests/airflow``;
``make pytest`` runs both suites).

``dag.test()`` runs a DAG only from Airflow's DAG folder: the test DAGs and the example DAG
are copied into a fresh one, and tests load them from there (:func:`load_dag`).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ledger.servers import PG_PASSWORD, PG_USER, PostgresServer

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples" / "airflow"
HOME = Path(tempfile.mkdtemp(prefix="churn-airflow-home-"))
DAGS = HOME / "dags"
DAGS.mkdir()
for source in [*(HERE / "dags").glob("*.py"), *EXAMPLES.glob("*.py")]:
    shutil.copy(source, DAGS / source.name)
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
    }
)
for name in (
    "CHURN_RESULTS_BASE",
    "AIRFLOW_CONN_CHURN_DEFAULT",
    "AIRFLOW_CONN_CHURN_LEDGER",
    "CHURN_API_KEY",
    "PGPASSWORD",
):
    os.environ.pop(name, None)

# Two canaries: a key the sandbox accepts and one it refuses. Neither may appear anywhere.
GOOD_KEY = "sk_test_CANARY_good_7f3a9c21e5"
BAD_KEY = "sk_test_CANARY_bad_0d4b81a6f2"
Query = Callable[..., list[tuple[Any, ...]]]


def pytest_configure(config: pytest.Config) -> None:
    # Starlette >= 1 warns once when dag.test() starts Airflow's in-process execution API
    # (its StarletteDeprecationWarning is a UserWarning; older Starlettes lack the class)
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Using `httpx` with `starlette.testclient` is deprecated:UserWarning",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mixed = [item.nodeid for item in items if not item.path.is_relative_to(HERE)]
    if mixed:
        raise pytest.UsageError(
            f"tests/airflow runs in a pytest process of its own, not with {mixed[0]} "
            "(make pytest runs both)"
        )


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> Iterator[Path]:
    from airflow.utils import db  # noqa: PLC0415 - after the environment above is set

    db.initdb()  # ~2 s in-process; `airflow db migrate` in a subprocess takes ~5 s
    yield HOME / "airflow.db"
    shutil.rmtree(HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _restore_sigterm() -> Iterator[None]:
    # dag.test() runs tasks in this process, and the task runner's SIGTERM handler (it calls
    # the task's on_kill() and returns) stays installed: without this, pytest would ignore
    # SIGTERM (a CI timeout) after the first DAG test
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def _query(sql: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{HOME}/airflow.db?mode=ro", uri=True) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def query() -> Query:
    """Read the metadata DB directly (read-only)."""
    return _query


@pytest.fixture
def airflow_home() -> Path:
    return HOME


def load_dag(module: str, dag_id: str) -> Any:
    """A DAG from the DAG folder's copy of ``module`` (imported once)."""
    from airflow.sdk import DAG  # noqa: PLC0415

    if module not in sys.modules:
        spec = importlib.util.spec_from_file_location(module, DAGS / f"{module}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[module] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[module])
    dags = {d.dag_id: d for d in vars(sys.modules[module]).values() if isinstance(d, DAG)}
    return dags[dag_id]


def run_dag(
    dag_id: str, conf: dict[str, Any], module: str = "churn_dags", **test: Any
) -> tuple[str, dict[str, tuple[str, int]], str]:
    """``dag.test()``: the run's state, each task's (state, try number), and the run id."""
    run = load_dag(module, dag_id).test(run_conf=conf, **test)
    tis = _query(
        "SELECT task_id, state, try_number FROM task_instance WHERE run_id = ?", run.run_id
    )
    return str(run.state), {str(t): (str(s), int(n)) for t, s, n in tis}, str(run.run_id)


def use_connection(monkeypatch: pytest.MonkeyPatch, base_url: str, key: str, **extra: Any) -> None:
    """The churn_default connection, as an environment variable (JSON form)."""
    conn = {"conn_type": "churn", "host": base_url, "password": key, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_DEFAULT", json.dumps(conn))


def use_ledger_connection(
    monkeypatch: pytest.MonkeyPatch, postgres: PostgresServer, schema: str, **extra: Any
) -> None:
    """The churn_ledger connection (type postgres) to the test server, in ``schema``."""
    conn = {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "port": postgres.port,
        "schema": "ledger",
        "login": PG_USER,
        "password": PG_PASSWORD,
        "extra": {"options": f"-csearch_path={schema}", **extra},
    }
    monkeypatch.setenv("AIRFLOW_CONN_CHURN_LEDGER", json.dumps(conn))


def xcom(dag_id: str, task_id: str, run_id: str, key: str = "return_value") -> dict[str, Any]:
    rows = _query(
        "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND run_id = ? AND key = ?",
        dag_id,
        task_id,
        run_id,
        key,
    )
    assert rows, f"no XCom {key!r} for {dag_id}.{task_id}"
    value: dict[str, Any] = json.loads(str(rows[0][0]))
    return value


def leaks(blob: bytes, secrets: list[str] = [GOOD_KEY, BAD_KEY]) -> list[str]:  # noqa: B006
    """Which secrets appear in ``blob``: as text, hex (either case) or base64."""
    found = []
    for secret in secrets:
        raw = secret.encode()
        forms = [raw, raw.hex().encode(), raw.hex().upper().encode(), base64.b64encode(raw)]
        found += [secret for form in forms if form in blob]
    return found
