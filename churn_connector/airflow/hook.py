"""ChurnHook: an Airflow Connection of type ``churn`` → a configured :class:`Client`.

The connection (default id ``churn_default``):

* ``host``: the base URL with its scheme, e.g. ``https://api.example.com`` (a host without
  a scheme gets ``https://``; ``port`` and ``schema`` are appended when set);
* ``password``: the API key, so Airflow's secrets masker knows it (it never goes anywhere
  else: not in ``extra``, not in an operator argument);
* ``extra``: client options: ``max_concurrency``, ``identify_concurrency``,
  ``connect_timeout``, ``read_timeout``, ``request_timeout``, ``deadline`` (null: none),
  ``auth_header`` (``bearer`` | ``x-api-key``), ``batch_size``, ``max_request_bytes``,
  ``ca_bundle``, ``proxy``, ``trust_env``, ... (any :class:`ClientConfig` field) and the
  retry policy's ``max_attempts``, ``initial_delay``, ``max_delay``, ``multiplier``,
  ``max_retry_after``. Values may be strings (the URI form makes every extra one). An
  unknown key is an error that names it, never silently ignored.

Both spellings give the same client::

    AIRFLOW_CONN_CHURN_DEFAULT='{"conn_type": "churn", "host": "https://api.example.com",
                                 "password": "<key>", "extra": {"max_concurrency": 16}}'
    AIRFLOW_CONN_CHURN_DEFAULT='churn://:<key>@https%3A%2F%2Fapi.example.com?max_concurrency=16'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode, urlunsplit

from airflow.sdk import BaseHook

from .._client import Client
from .._core import (
    CLIENT_FIELDS,
    RETRY_FIELDS,
    TIMEOUT_FIELDS,
    ChurnConnectorError,
    ConfigurationError,
    Secret,
    client_options_from,
)
from .._ledger import Ledger
from .provider import CONN_TYPE, DEFAULT_CONN_ID, INTEGRATION

__all__ = ["ChurnHook", "base_url_from", "client_options_from_extra", "ledger_from_connection"]

_KEY_LIKE = {"api_key", "key", "token", "password", "secret"}


def client_options_from_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """A connection's extra JSON as :class:`Client` keyword options (strictly)."""
    values: dict[str, Any] = {}
    for raw_key, value in extra.items():
        key = raw_key.removeprefix(f"extra__{CONN_TYPE}__")
        if value is None or value == "":
            continue  # an empty form field: the package default applies
        if key in CLIENT_FIELDS | RETRY_FIELDS:
            values[key] = value
        elif key.lower() in _KEY_LIKE:
            raise ConfigurationError(
                f"the churn connection's extra holds {raw_key!r}: the API key belongs in the "
                "connection's password field, which Airflow masks"
            )
        else:
            known = sorted(CLIENT_FIELDS | RETRY_FIELDS)
            raise ConfigurationError(
                f"unknown key {raw_key!r} in the churn connection's extra; known: {known}"
            )
    return client_options_from(values, "connection extra")


def base_url_from(host: str | None, port: int | None, schema: str | None) -> str:
    """The base URL from a connection's host (with or without scheme), port and schema."""
    if not host:
        raise ConfigurationError(
            "the churn connection has no host: put the base URL there, e.g. https://api.example.com"
        )
    url = host.strip().rstrip("/")
    if "://" not in url:
        url = f"https://{url}"
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if port and ":" not in authority.rsplit("]", 1)[-1]:
        authority = f"{authority}:{port}"
    url = f"{scheme}://{authority}{slash}{path}"
    if schema:
        url = f"{url.rstrip('/')}/{schema.strip('/')}"
    return url


class ChurnHook(BaseHook):
    """Builds a :class:`churn_connector.Client` from an Airflow connection.

    ``client_options`` override the connection's extra for this hook, e.g.
    ``ChurnHook(max_concurrency=4)``, ``ChurnHook(retry=cc.RetryPolicy(max_attempts=3))`` or
    ``ChurnHook(timeouts=cc.Timeouts(read=10))`` (which replaces the extra's four timeouts);
    the base URL and the key come from the connection only.
    """

    conn_name_attr = "churn_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = INTEGRATION

    def __init__(self, churn_conn_id: str = DEFAULT_CONN_ID, **client_options: Any) -> None:
        super().__init__()
        self.churn_conn_id = churn_conn_id
        self.client_options = client_options

    def get_conn(self) -> Client:
        """A new Client for the connection (raises ConfigurationError naming the problem)."""
        conn = self.get_connection(self.churn_conn_id)
        if not conn.password:
            raise ConfigurationError(
                f"connection {self.churn_conn_id!r} has no password: put the API key there"
            )
        overrides = dict(self.client_options)
        # values given whole: a RetryPolicy, a Timeouts (which replaces the extra's four)
        whole: dict[str, Any] = {
            k: overrides.pop(k) for k in ("retry", "timeouts") if k in overrides
        }
        extra = dict(conn.extra_dejson)
        if "timeouts" in whole:
            extra = {
                k: v
                for k, v in extra.items()
                if k.removeprefix(f"extra__{CONN_TYPE}__") not in TIMEOUT_FIELDS
            }
        options = {**client_options_from_extra({**extra, **overrides}), **whole}
        base_url = base_url_from(conn.host, conn.port, conn.schema)
        try:
            # the key goes straight into a Secret: no local variable of ours holds it
            return Client(base_url, Secret(conn.password), **options)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None

    def test_connection(self) -> tuple[bool, str]:
        """Checks the configuration only: the API has no request without side effects."""
        try:
            client = self.get_conn()
        except ChurnConnectorError as exc:
            return False, str(exc)
        return True, f"the configuration is valid for {client.config.base_url} (nothing was sent)"


# libpq's connection parameters that a PostgreSQL connection's extra may carry for the
# ledger; the Postgres provider's own keys (cursor, iam, sqlalchemy_*, ...) are for its hook
_LIBPQ_KEYS = frozenset(
    {
        "application_name",
        "channel_binding",
        "connect_timeout",
        "gssencmode",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "krbsrvname",
        "load_balance_hosts",
        "options",
        "require_auth",
        "service",
        "ssl_max_protocol_version",
        "ssl_min_protocol_version",
        "sslcert",
        "sslcompression",
        "sslcrl",
        "sslkey",
        "sslmode",
        "sslnegotiation",
        "sslrootcert",
        "target_session_attrs",
        "tcp_user_timeout",
    }
)
_LEDGER_CONN_TYPES = ("postgres", "postgresql")


def ledger_from_connection(conn_id: str, *, read_only: bool = False) -> Ledger:
    """An open PostgreSQL ledger from an Airflow connection (type ``postgres``): ``host``,
    ``port``, ``schema`` (the database), ``login``; the password from the connection's
    password field, handed to the ledger as a secret (never in a URL, a log, a rendered
    field or an XCom); libpq's parameters (``sslmode``, ``options``, ...) from its extra."""
    conn = BaseHook.get_connection(conn_id)
    if conn.conn_type not in _LEDGER_CONN_TYPES:
        raise ConfigurationError(
            f"ledger_conn_id {conn_id!r} is a {conn.conn_type!r} connection: the ledger takes "
            "a PostgreSQL one (conn_type postgres)"
        )
    if not conn.host:
        raise ConfigurationError(f"ledger_conn_id {conn_id!r} has no host")
    user = f"{quote(conn.login, safe='')}@" if conn.login else ""
    port = f":{conn.port}" if conn.port else ""
    query = {k: str(v) for k, v in conn.extra_dejson.items() if k in _LIBPQ_KEYS}
    url = urlunsplit(
        ("postgresql", f"{user}{conn.host}{port}", f"/{quote(conn.schema or '', safe='')}",
         urlencode(query), "")
    )  # fmt: skip
    password = Secret(conn.password) if conn.password else None
    return Ledger(url, read_only=read_only, password=password)
