"""Every day, deliver the day's product events and the users who changed to the churn API.

Install ``churn-connector[airflow]`` on the scheduler, the API server and the workers, and
define the ``churn_default`` connection (docs/guides/airflow.md): the base URL in *host*, the API
key in *password*. The key is never in this file, in a template or in an XCom.

* ``exports``: where the warehouse unloads, one folder per day: ``<exports>/<ds>/events.parquet``
  and ``<exports>/<ds>/users.parquet`` (``source`` takes whatever the package reads).
* ``churn_ledger``: an Airflow connection (type ``postgres``) to the PostgreSQL database
  that keeps the ledger, which both tasks share (each retry, each pod, each worker finds
  it). The server of Airflow's metadata DB is the common place, in a database of its own
  (``CREATE DATABASE churn_ledger``), never among Airflow's tables. The password stays in
  the connection: never in a template, a log or an XCom.

Retries are safe: a retried task re-sends only what is not in the ledger, and the API stores
each event once (message ids make every re-send harmless). Without the ledger, runs stay
correct and only send more.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from airflow.sdk import DAG, task

from churn_connector.airflow import IdentifyOperator, SendEventsOperator

# the ledger's PostgreSQL connection: shared by the tasks, their retries and their workers
LEDGER_CONN_ID = "churn_ledger"

with DAG(
    dag_id="churn_daily",
    schedule="@daily",
    start_date=datetime(2026, 11, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    params={"exports": "/data/exports"},
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
        ledger_conn_id=LEDGER_CONN_ID,
    )

    IdentifyOperator(
        task_id="identify",
        # a DataFrame from an upstream task: resolved when the task runs, never rendered
        source=changed_users("{{ params.exports }}/{{ ds }}/users.parquet"),
        ledger_conn_id=LEDGER_CONN_ID,
        send_options={"duplicates": "keep_last"},
    )
