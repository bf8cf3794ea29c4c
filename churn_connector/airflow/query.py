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

from .._core import ConfigurationError
from .._read import Query
from .hook import _LIBPQ_KEYS

__all__ = ["ConnectionQuery", "query_of_connection"]

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
