"""The operators' ``sql=`` / ``conn_id=`` input: a query read through an Airflow connection.

The connection is the user's own (``conn_id``), its password in Airflow's store: it reaches
the reader inside a :class:`churn_connector._core.Secret` (never in a log, a rendered field,
an XCom or a message). How the rows are read, by the connection's type:

* ``postgres``: ADBC's PostgreSQL driver (the ``[sql]`` extra), on a URL made from the
  connection's host, port, schema (the database), login and password, and libpq's
  parameters from its extra (``sslmode``, ``options``, ...): rows stream as Arrow batches;
* ``sqlite`` (the host holds the file's path, as Airflow's SQLite hook reads it) and
  ``duckdb`` (the host, or the extra's ``database``/``path``): the file through ADBC's SQLite
  driver or DuckDB, read-only;
* any other type: the connection's own hook (``conn.get_hook()``), which must be a
  ``DbApiHook``: its ``get_conn`` opens the DB-API connection the query runs on (rows become
  Arrow batches in Python: slower than the Arrow-native drivers).

The query may be narrowed by a sync's cursor like any ``cc.sql`` (``_read.query``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlunsplit

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException

from .._core import ConfigurationError
from .._read import Query
from .hook import _LIBPQ_KEYS

__all__ = [
    "ConnectionQuery",
    "bound_by_interval",
    "check_inputs",
    "query_lineage",
    "query_of_connection",
]

_POSTGRES = ("postgres", "postgresql")


@dataclass(frozen=True)
class ConnectionQuery:
    """A query ready to read, and where lineage says it reads from."""

    query: Query
    namespace: str  # OpenLineage's namespace of the database (postgres://host:port, ...)
    database: str | None  # the database the tables' names start with (PostgreSQL)
    dialect: str  # the SQL dialect lineage parses the query in
    default_schema: str | None


def query_of_connection(conn_id: str, sql: str) -> ConnectionQuery:
    """The query ``sql`` on the Airflow connection ``conn_id`` (see the module)."""
    conn = BaseHook.get_connection(conn_id)
    kind = (conn.conn_type or "").lower()
    if kind in _POSTGRES:
        return _postgres(conn_id, conn, sql)
    if kind in ("sqlite", "duckdb"):
        path = conn.host or conn.extra_dejson.get("database") or conn.extra_dejson.get("path")
        if not path:
            raise ConfigurationError(
                f"conn_id {conn_id!r}: a {kind} connection names its database file in its host"
            )
        path = os.path.abspath(str(path))
        return ConnectionQuery(
            Query(sql, f"{kind}:///{path}"), f"{kind}://{path}", None, kind, "main"
        )
    hook = conn.get_hook()  # type: ignore[no-untyped-call]  # Airflow's, unannotated
    from airflow.providers.common.sql.hooks.sql import DbApiHook  # noqa: PLC0415

    if not isinstance(hook, DbApiHook):
        raise ConfigurationError(
            f"conn_id {conn_id!r} is a {kind!r} connection whose hook "
            f"({type(hook).__name__}) is not a DbApiHook: sql= reads through a database's "
            "hook (any DbApiHook), or a postgres, sqlite or duckdb connection"
        )
    query = Query(sql, hook.get_conn, label=f"airflow connection {conn_id} ({kind})")
    info = None
    try:
        info = hook.get_openlineage_database_info(conn)
    except Exception:  # lineage only: a hook that cannot say names the connection
        info = None
    namespace = f"{kind}://{conn.host or conn_id}{f':{conn.port}' if conn.port else ''}"
    if info is not None and getattr(info, "scheme", None):
        namespace = f"{info.scheme}://{info.authority or ''}"
    return ConnectionQuery(query, namespace, conn.schema or None, kind, None)


def _postgres(conn_id: str, conn: Any, sql: str) -> ConnectionQuery:
    if not conn.host:
        raise ConfigurationError(f"conn_id {conn_id!r} has no host")
    login = quote(conn.login, safe="") if conn.login else ""
    password = f":{quote(conn.password, safe='')}" if conn.password else ""
    user = f"{login}{password}@" if login or password else ""
    port = f":{conn.port}" if conn.port else ""
    params = {k: str(v) for k, v in conn.extra_dejson.items() if k in _LIBPQ_KEYS}
    url = urlunsplit(
        ("postgresql", f"{user}{conn.host}{port}", f"/{quote(conn.schema or '', safe='')}",
         urlencode(params), "")
    )  # fmt: skip
    # the URL holds the password: Query keeps it in a Secret and shows it redacted
    return ConnectionQuery(
        Query(sql, url),
        f"postgres://{conn.host}:{conn.port or 5432}",
        conn.schema or None,
        "postgres",
        "public",
    )


def bound_by_interval(
    kind: str, options: dict[str, Any], context: Any, ledger_conn_id: str | None
) -> bool:
    """Without a ledger, a cursor is bounded by the DAG run's data interval (``since`` /
    ``until`` set in ``options``), unless ``since`` / ``until`` are given; whether it was.
    A run without a data interval fails the task, saying what bounds a cursor."""
    if not options.get("cursor") or options.get("incremental"):
        return False
    if options.get("ledger") is not None or ledger_conn_id is not None:
        return False
    if options.get("since") is not None or options.get("until") is not None:
        return False
    start = context.get("data_interval_start")
    end = context.get("data_interval_end")
    if start is None or end is None or not start < end:
        raise AirflowFailException(
            f"churn {kind}: cursor {options['cursor']!r} without a ledger is bounded by the "
            f"DAG run's data interval, and this run has none ({start} to {end}): give the "
            "DAG a schedule with data intervals, a ledger, or send_options since/until"
        )
    options["since"], options["until"] = start, end
    return True


def query_lineage(conn_id: str, sql: str) -> list[tuple[str, str]]:
    """The tables the query reads, named by OpenLineage's rules for the database."""
    from . import lineage  # noqa: PLC0415 - OpenLineage's provider: only lineage needs it

    try:
        found = query_of_connection(conn_id, sql)
    except Exception:  # lineage only: a connection gone names the connection id
        return [(f"airflow-connection://{conn_id}", "query")]
    return lineage.query_datasets(
        sql,
        namespace=found.namespace,
        database=found.database,
        dialect=found.dialect,
        default_schema=found.default_schema,
    )


def check_inputs(
    operator: str,
    source: Any,
    sql: str | None,
    conn_id: str | None,
    cursor: str | None,
    send_options: dict[str, Any] | None,
) -> None:
    """An operator's input is ``source`` or ``sql`` with its ``conn_id``; the cursor once
    (TypeError, as a DAG file's mistake is)."""
    if (source is None) == (sql is None):
        raise TypeError(
            f"{operator}: give one input, source= (a path, URI or upstream output) or sql= "
            "(a query, with conn_id=)"
        )
    if sql is not None and not conn_id:
        raise TypeError(f"{operator}: sql= runs on an Airflow connection: name it (conn_id=)")
    if conn_id is not None and sql is None:
        raise TypeError(f"{operator}: conn_id= is the connection of sql=: give it")
    if cursor is not None and (send_options or {}).get("cursor") is not None:
        raise TypeError(
            f"{operator}: give the cursor once, as cursor= or as send_options['cursor'], not both"
        )
