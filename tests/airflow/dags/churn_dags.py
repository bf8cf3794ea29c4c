"""DAGs for the provider's tests. Inputs come as params (run conf), the API as the
churn_default connection (AIRFLOW_CONN_CHURN_DEFAULT), both set by each test."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pendulum
from airflow.sdk import DAG, task
from airflow.timetables.interval import CronDataIntervalTimetable

from churn_connector import TrackingPlan
from churn_connector.airflow import (
    IdentifyOperator,
    SendEventsOperator,
    ValidateOperator,
    churn_asset,
)

PARAMS = {"events": "", "users": "", "ledger": ""}

with DAG("churn_send", schedule=None, params=PARAMS, default_args={"retries": 0}) as send_dag:

    @task(show_return_value_in_logs=False)  # else the frame's repr (emails) is logged
    def load_users(path: str) -> pd.DataFrame:
        return pd.read_parquet(path)  # a DataFrame passed on through XCom

    SendEventsOperator(
        task_id="send_events", source="{{ params.events }}", send_options={"batch_size": 4}
    )
    IdentifyOperator(task_id="identify", source=load_users("{{ params.users }}"))


def retried_send(ledger: str | None) -> SendEventsOperator:
    return SendEventsOperator(
        task_id="send_events",
        source="{{ params.events }}",
        send_options={"batch_size": 2, "ledger": ledger},
        client_options={"max_concurrency": 1},
        retries=1,
        retry_delay=timedelta(seconds=1),  # dag.test() waits it out, polling each second
    )


with DAG("churn_retry", schedule=None, params=PARAMS) as retry_dag:
    retried_send(None)

with DAG("churn_retry_ledger", schedule=None, params=PARAMS) as retry_ledger_dag:
    retried_send("{{ params.ledger }}")

with DAG("churn_kill", schedule=None, params=PARAMS) as kill_dag:
    SendEventsOperator(
        task_id="send_events",
        source="{{ params.events }}",
        send_options={"batch_size": 1},
        client_options={"max_concurrency": 1},
    )

with DAG("churn_timeout", schedule=None, params=PARAMS) as timeout_dag:
    SendEventsOperator(
        task_id="send_events",
        source="{{ params.events }}",
        send_options={"batch_size": 1},
        client_options={"max_concurrency": 1},
        execution_timeout=timedelta(seconds=2),
    )

with DAG("churn_strictness", schedule=None, params=PARAMS) as strictness_dag:
    SendEventsOperator(task_id="lenient", source="{{ params.events }}")
    SendEventsOperator(
        task_id="strict", source="{{ params.events }}", fail_on_invalid=True, retries=2
    )
    SendEventsOperator(
        task_id="typo", source="{{ params.events }}", send_options={"namepsace": "x"}, retries=2
    )

with DAG("churn_ledger_url", schedule=None, params=PARAMS) as ledger_url_dag:
    # a ledger URL without its password (PGPASSWORD on the worker gives it)
    SendEventsOperator(
        task_id="send_events",
        source="{{ params.events }}",
        send_options={"batch_size": 4, "ledger": "{{ params.ledger }}"},
        retries=2,
    )

with DAG("churn_ledger_password", schedule=None, params=PARAMS) as ledger_password_dag:
    # the mistake refused: a template that puts the connection's password into the URL
    SendEventsOperator(
        task_id="send_events",
        source="{{ params.events }}",
        send_options={
            "ledger": "postgresql://{{ conn.churn_ledger.login }}:"
            "{{ conn.churn_ledger.password }}@{{ conn.churn_ledger.host }}:"
            "{{ conn.churn_ledger.port }}/ledger"
        },
        retries=2,
    )

with DAG(
    "churn_gate", schedule=None, params={**PARAMS, "max_invalid": ""}, default_args={"retries": 0}
) as gate_dag:
    gate = ValidateOperator(
        task_id="validate_events",
        source="{{ params.events }}",
        max_invalid="{{ params.max_invalid }}",
        warn_on=["occurred_at_naive"],
        retries=2,  # a gate that fails must not be retried: the data has to change
    )
    gate >> SendEventsOperator(task_id="send_events", source="{{ params.events }}")

# runs when events were delivered through churn_default (the send DAGs' outlet asset)
with DAG("churn_on_events", schedule=[churn_asset("events")]) as on_events_dag:

    @task
    def after_delivery() -> None:
        pass

    after_delivery()

# a tracking plan twice: the gate reads it from a file (templated path, read on the worker),
# the send is given it in the DAG code (kept with the DAG as its mapping)
PAID = {
    "events": {
        "invoice_paid": {
            "type": "object",
            "required": ["amount"],
            "properties": {"amount": {"type": "number", "minimum": 0}},
        }
    }
}
with DAG(
    "churn_plan",
    schedule=None,
    params={**PARAMS, "plan": "", "max_invalid": "", "max_lag": ""},
    default_args={"retries": 0},
) as plan_dag:
    plan_gate = ValidateOperator(
        task_id="validate_events",
        source="{{ params.events }}",
        plan="{{ params.plan }}",
        max_invalid="{{ params.max_invalid }}",
        max_lag="{{ params.max_lag }}",
        retries=2,
    )
    plan_gate >> SendEventsOperator(
        task_id="send_events", source="{{ params.events }}", plan=TrackingPlan.from_dict(PAID)
    )

# a query on the churn_source connection (set by the test), its cursor bounded by the run's
# data interval (no ledger): hourly intervals, each run reads exactly its own hour's rows
with DAG(
    "churn_sql_interval",
    schedule=CronDataIntervalTimetable("@hourly", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"table": "events"},
    default_args={"retries": 0},
) as sql_interval_dag:
    SendEventsOperator(
        task_id="send_events",
        sql="SELECT uid AS external_user_id, 'login' AS event_type, ts AS occurred_at, "
        "loaded_at FROM {{ params.table }}",
        conn_id="churn_source",
        cursor="loaded_at",
    )
    IdentifyOperator(
        task_id="identify",
        sql="SELECT uid AS external_user_id, loaded_at FROM {{ params.table }}",
        conn_id="churn_source",
        cursor="loaded_at",
    )

# the same with a ledger: each run reads the rows past the sync's watermark
with DAG(
    "churn_sql_ledger",
    schedule=None,
    params={"ledger": ""},
    default_args={"retries": 0},
) as sql_ledger_dag:
    SendEventsOperator(
        task_id="send_events",
        sql="SELECT id, uid AS external_user_id, 'login' AS event_type, ts AS occurred_at "
        "FROM events",
        conn_id="churn_source",
        cursor="id",
        send_options={"ledger": "{{ params.ledger }}"},
    )

# a cursor, no ledger and no data interval (no schedule): nothing bounds the read
with DAG(
    "churn_sql_no_interval", schedule=None, default_args={"retries": 1}
) as sql_no_interval_dag:
    SendEventsOperator(
        task_id="send_events",
        sql="SELECT id, uid AS external_user_id, 'login' AS event_type, ts AS occurred_at "
        "FROM events",
        conn_id="churn_source",
        cursor="id",
    )
