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
        # OpenLineage's provider emits every task's events to a file (its plugin loads only
        # when a transport is set when Airflow starts); in a thread, not a forked child
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(HOME / "openlineage.jsonl"), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
    }
)
OPENLINEAGE_FILE = HOME / "openlineage.jsonl"
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


def unpause(dag_id: str) -> None:
    """Write the DAG folder's DAGs to the metadata DB (as dag.test() does) and unpause
    ``dag_id``: Airflow queues asset-triggered runs only for unpaused DAGs."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager  # noqa: PLC0415
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db  # noqa: PLC0415
    from airflow.models.dag import DagModel  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from sqlalchemy import update  # noqa: PLC0415

    manager = DagBundlesManager()  # type: ignore[no-untyped-call]  # Airflow's, unannotated
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    with create_session() as session:
        session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=False))


def create_asset_triggered_runs() -> None:
    """What the scheduler's loop does for DAGs scheduled on assets: create their runs."""
    from airflow.jobs.job import Job  # noqa: PLC0415
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415
    from airflow.utils.sqlalchemy import prohibit_commit  # noqa: PLC0415

    runner = SchedulerJobRunner(job=Job(), num_runs=1)  # type: ignore[no-untyped-call]
    with create_session() as session, prohibit_commit(session) as guard:  # type: ignore[no-untyped-call]
        runner._create_dagruns_for_dags(guard, session)


def openlineage_events() -> list[dict[str, Any]]:
    """The OpenLineage events emitted so far (the file transport's lines)."""
    if not OPENLINEAGE_FILE.exists():
        return []
    return [json.loads(line) for line in OPENLINEAGE_FILE.read_text().splitlines() if line]


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
