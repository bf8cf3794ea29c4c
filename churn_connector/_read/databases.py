"""Databases reached by a query: a connection URL or object -> a DB-API connection, how
its driver writes a bound parameter and quotes a name, and its errors without a password.

Arrow-native drivers first, so rows arrive as Arrow batches without a per-row Python step:
``postgresql://`` through ADBC's PostgreSQL driver (libpq: the password from ``PGPASSWORD``
or ``~/.pgpass`` when the URL has none; the ``[sql]`` extra), a SQLite file
(``sqlite:///path``, or a path ending ``.sqlite``, ``.sqlite3``, ``.db``) through ADBC's
SQLite driver (the ``[sql]`` extra), a DuckDB file (``duckdb:///path``, ``.duckdb``,
``.ddb``) through DuckDB itself; files are opened read-only. Any other URL goes to
SQLAlchemy, when it is installed (rows become Arrow batches in Python: slower). Objects: an
open ADBC or DuckDB connection, a SQLAlchemy engine or connection, any DB-API connection,
or a function that opens one (an Airflow hook's ``get_conn``); an object given open is
left open.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .._core import ConfigurationError, InputError, Secret

__all__ = [
    "Database",
    "open_database",
    "password_of",
    "redacted",
    "without_url_password",
]

_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
_DUCKDB_SUFFIXES = (".duckdb", ".ddb")
_EXTRAS = {
    "adbc_driver_postgresql": 'pip install "churn-connector[sql]"',
    "adbc_driver_sqlite": 'pip install "churn-connector[sql]"',
    "duckdb": 'pip install "churn-connector[sql]"',
    "sqlalchemy": "pip install sqlalchemy (and the database's driver)",
}
_USER_PASSWORD = re.compile(r"(://[^/:@?#]*):[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def password_of(url: str) -> str | None:
    """The password a connection URL holds (user info or a ``password=`` parameter)."""
    try:
        parts = urlsplit(url)
        if parts.password:
            return unquote(parts.password)
    except ValueError:
        pass
    found = _QUERY_PASSWORD.search(url)
    return unquote(found.group(0).split("=", 1)[1]) if found and "=" in found.group(0) else None


def redacted(url: str) -> str:
    """``url`` as messages show it: its password replaced by ``***``."""
    return _QUERY_PASSWORD.sub(r"\1***", _USER_PASSWORD.sub(r"\1:***@", url))


def without_url_password(text: str) -> str:
    """A connection URL given on the command line: refused (ValueError) when it holds a
    password, which shell history and process lists would keep."""
    if password_of(text):
        raise ValueError(
            f"connection {redacted(text)}: a password is not taken from the command line "
            "(shell history and process lists keep it): give it through PGPASSWORD or "
            "~/.pgpass (libpq reads both), or use cc.sql(query, url) from Python"
        )
    return text


@dataclass
class Database:
    """An open DB-API connection and how to speak to it."""

    connection: Any
    style: str  # "dollar" ($1), "qmark", "numeric", "named", "format", "pyformat", "sqlalchemy"
    owned: bool  # opened here: closed when the query is read
    engine: str  # "adbc", "duckdb", "sqlalchemy", "dbapi"
    quote_char: str = '"'
    cursor: Any = None  # the cursor whose rows are being read

    def placeholder(self, n: int) -> str:
        """The ``n``-th (1-based) bound parameter as the driver writes it."""
        return {
            "dollar": f"${n}",
            "qmark": "?",
            "numeric": f":{n}",
            "named": f":p{n}",
            "sqlalchemy": f":p{n}",
            "format": "%s",
            "pyformat": f"%(p{n})s",
        }[self.style]

    def parameters(self, values: list[Any]) -> Any:
        """``values`` as the driver takes them (a sequence, or a mapping for named styles)."""
        if self.style in ("named", "pyformat", "sqlalchemy"):
            return {f"p{i}": v for i, v in enumerate(values, 1)}
        return values

    def quote(self, name: str) -> str:
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def close(self) -> None:
        if self.cursor is not None:
            with contextlib.suppress(Exception):  # a cursor cut short: the connection goes next
                self.cursor.close()
            self.cursor = None
        if self.owned:
            with contextlib.suppress(Exception):  # closing after reading: nothing more to do
                self.connection.close()


def _module(name: str, what: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigurationError(
            f"{what} is read through the {name.replace('_', '-')} package, which is not "
            f"installed: {_EXTRAS.get(name, 'pip install ' + name)}"
        ) from None


def kind_of(connection: Any) -> str:
    """What a connection given as text is: ``postgresql``, ``sqlite``, ``duckdb`` or
    ``sqlalchemy`` (another URL)."""
    text = os.fspath(connection)
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    if scheme == "sqlite":
        return "sqlite"
    if scheme == "duckdb":
        return "duckdb"
    if scheme is None:
        suffix = Path(text).suffix.lower()
        if suffix in _DUCKDB_SUFFIXES:
            return "duckdb"
        if suffix in _SQLITE_SUFFIXES:
            return "sqlite"
        raise ConfigurationError(
            f"connection {text!r}: not a URL (postgresql://, sqlite:///, duckdb:///, or a "
            f"SQLAlchemy URL) nor a database file ({', '.join(_SQLITE_SUFFIXES)}: SQLite; "
            f"{', '.join(_DUCKDB_SUFFIXES)}: DuckDB)"
        )
    return "sqlalchemy"


def _file_of(text: str) -> str:
    """The path of ``sqlite:///path`` / ``duckdb:///path`` (or a plain path)."""
    if "://" in text:
        rest = text.split("://", 1)[1]
        return unquote(rest[1:] if rest.startswith("/") else rest)  # SQLAlchemy: //// absolute
    return text


def open_database(connection: Any, secret: Secret | None = None) -> Database:
    """A connection to query (``secret``: the URL itself, when it was given as text)."""
    if isinstance(connection, str | os.PathLike):
        url = secret.reveal() if secret is not None else os.fspath(connection)
        return _by_url(url, os.fspath(connection))
    if callable(connection) and not hasattr(connection, "cursor"):
        return _by_object(connection(), owned=True)
    return _by_object(connection, owned=False)


def _by_url(url: str, shown: str) -> Database:
    kind = kind_of(shown)
    if kind == "postgresql":
        dbapi = _module("adbc_driver_postgresql.dbapi", "a postgresql:// connection")
        return Database(dbapi.connect(url), "dollar", owned=True, engine="adbc")
    if kind == "sqlite":
        path = _file_of(url)
        _exists(path, shown)
        dbapi = _module("adbc_driver_sqlite.dbapi", "a SQLite file")
        uri = f"file:{Path(path).absolute()}?mode=ro"
        return Database(dbapi.connect(uri), "qmark", owned=True, engine="adbc")
    if kind == "duckdb":
        path = _file_of(url)
        _exists(path, shown)
        duckdb = _module("duckdb", "a DuckDB file")
        return Database(duckdb.connect(path, read_only=True), "qmark", owned=True, engine="duckdb")
    sqlalchemy = _module("sqlalchemy", f"connection {redacted(shown)}")
    engine = sqlalchemy.create_engine(url)
    return _sqlalchemy(engine.connect(), owned=True, engine=engine)


def _exists(path: str, shown: str) -> None:
    if not Path(path).is_file():
        raise InputError(f"connection {shown}: no such database file {path}", path=path)


def _by_object(conn: Any, *, owned: bool) -> Database:
    module = type(conn).__module__.split(".")[0]
    if module == "duckdb":
        return Database(conn, "qmark", owned=owned, engine="duckdb")
    if module == "sqlalchemy":
        connect = getattr(conn, "connect", None)
        if type(conn).__name__ == "Engine" and connect is not None:
            return _sqlalchemy(connect(), owned=True, engine=None)
        return _sqlalchemy(conn, owned=owned, engine=None)
    if module.startswith("adbc_driver"):
        vendor = str(conn.adbc_get_info().get("vendor_name", "")).lower()
        style = "dollar" if "postgres" in vendor else "qmark"
        return Database(conn, style, owned=owned, engine="adbc")
    if not hasattr(conn, "cursor"):
        raise ConfigurationError(
            f"connection: a {type(conn).__name__} is not a database connection: pass a URL, "
            "an open ADBC, DuckDB, SQLAlchemy or DB-API connection, or a function opening one"
        )
    style = str(getattr(sys.modules.get(module), "paramstyle", "qmark"))
    return Database(conn, style, owned=owned, engine="dbapi")


def _sqlalchemy(conn: Any, *, owned: bool, engine: Any) -> Database:
    preparer = conn.dialect.identifier_preparer
    database = Database(conn, "sqlalchemy", owned=owned, engine="sqlalchemy")
    database.quote_char = preparer.initial_quote
    if engine is not None and owned:
        closing: Callable[[], None] = conn.close

        def close() -> None:
            closing()
            engine.dispose()

        database.connection = _Closing(conn, close)
    return database


class _Closing:
    """A SQLAlchemy connection whose close also disposes of the engine made for it."""

    def __init__(self, conn: Any, close: Callable[[], None]) -> None:
        self._conn = conn
        self.close = close

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)
