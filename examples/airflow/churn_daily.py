"""Every day, deliver the day's product events and the users who changed to the churn API.

Install ``churn-connector[airflow]`` on the scheduler, the API server and the workers, and
define the ``churn_default`` connection (docs/guides/airflow.md): the base URL in *host*, the API
key in *password*. The key is never in this file, in a template or in an XCom.

* ``exports``: where the warehouse unloads, one folder per day: ``<exports>/<ds>/events.parquet``
  and ``<exports>/<ds>/users.parquet`` (``source`` takes whatever the package reads).
* ``state``: where the ledgers live. It must outlive the worker (a persistent volume or a
  local disk of a long-lived worker), on a local file system (SQLite's write-ahead log does
  not work over NFS or SMB). On ephemeral workers that lose it, runs stay correct (message
  ids make every re-send harmless: the API de-duplicates) and only re-send more.

Retries are safe for the same reason: a retried task re-sends what is not in its ledger, and
the API stores each event once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from airflow.sdk import DAG, task

from churn_connector.airflow import IdentifyOperator, SendEventsOperator

# one ledger per task: two tasks running at once on two workers never share a SQLite file
LEDGER = "{{ params.state }}/{{ dag.dag_id }}/{{ task.task_id }}.sqlite"

with DAG(
    dag_id="churn_daily",
    schedule="@daily",
    start_date=datetime(2026, 11, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    params={"exports": "/data/exports", "state": "/var/lib/churn"},
    default_args={"retries": 3, "retry_delay": timedelta(minutes=5)},
    tags=["churn"],
) as dag:

    @task(show_return_value_in_logs=False)  # else Airflow logs the frame: emails, traits
    def changed_users(path: str) -> pd.DataFrame:
        """The users to identify (here a file; often a warehouse query)."""
        return pd.read_parquet(path)

    SendEventsOperator(
        task_id="send_events",
        source="{{ params.exports }}/{{ ds }}/events.parquet",  # rendered where it runs
        send_options={"ledger": LEDGER},
    )

    IdentifyOperator(
        task_id="identify",
        # a DataFrame from an upstream task: resolved when the task runs, never rendered
        source=changed_users("{{ params.exports }}/{{ ds }}/users.parquet"),
        send_options={"ledger": LEDGER, "duplicates": "keep_last"},
    )
