"""Provider metadata for Airflow's providers manager: plain data, nothing imported.

Registered through the ``apache_airflow_provider`` entry point (pyproject.toml). Airflow
calls :func:`get_provider_info` during provider discovery (CLI, scheduler, API server,
workers): importing Airflow here would be a cycle, so this module imports nothing.

Airflow >= 3.2 builds the connection form from ``conn-fields`` and ``ui-field-behaviour``
below without importing the hook. Each ``conn-fields`` entry is stored as a top-level key of
the connection's ``extra`` JSON (the hook also reads the older ``extra__churn__<name>``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONN_TYPE", "DEFAULT_CONN_ID", "INTEGRATION", "PACKAGE_NAME", "get_provider_info"]

# must equal the distribution's canonical name, or discovery refuses the provider
PACKAGE_NAME = "churn-connector"
CONN_TYPE = "churn"
DEFAULT_CONN_ID = "churn_default"
INTEGRATION = "Churn ingestion API"
_HERE = "churn_connector.airflow"


def _field(label: str, kinds: list[str], description: str, **schema: Any) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": {"type": kinds, **schema}}


# the options people set per connection; any other ClientConfig / RetryPolicy field may be
# given in the extra JSON too (see hook.py)
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "max_concurrency": _field(
        "Concurrency (events)", ["integer", "null"], "Event batches in flight at once.", minimum=1
    ),
    "identify_concurrency": _field(
        "Concurrency (identify)", ["integer", "null"], "Identify calls in flight.", minimum=1
    ),
    "connect_timeout": _field(
        "Connect timeout (s)", ["number", "null"], "Per attempt.", exclusiveMinimum=0
    ),
    "read_timeout": _field(
        "Read timeout (s)", ["number", "null"], "Per socket read.", exclusiveMinimum=0
    ),
    "request_timeout": _field(
        "Request timeout (s)", ["number", "null"], "One whole attempt.", exclusiveMinimum=0
    ),
    "deadline": _field(
        "Deadline (s)",
        ["number", "null"],
        "For the whole run; empty: the package default (3600).",
        exclusiveMinimum=0,
    ),
    "max_attempts": _field(
        "Attempts per request", ["integer", "null"], "Including the first.", minimum=1
    ),
    "auth_header": _field(
        "Auth header",
        ["string", "null"],
        "bearer: 'Authorization: Bearer <key>'; x-api-key: 'X-API-Key: <key>'.",
        enum=["bearer", "x-api-key", None],
    ),
    "batch_size": _field(
        "Batch size",
        ["integer", "null"],
        "Events per request (at most 500).",
        minimum=1,
        maximum=500,
    ),
}


def get_provider_info() -> dict[str, Any]:
    """What ``airflow providers list`` shows, and the ``churn`` connection type's form."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Churn connector",
        "description": "Validate product events and user identities and deliver them to the "
        "churn ingestion API.",
        "integrations": [{"integration-name": INTEGRATION, "tags": ["service"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": [f"{_HERE}.hook"]}],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [f"{_HERE}.operators", f"{_HERE}.validate"],
            }
        ],
        # churn://<connection id>/<kind>: what a send delivered (assets.py)
        "asset-uris": [
            {
                "schemes": [CONN_TYPE],
                "handler": f"{_HERE}.assets.sanitize_uri",
                "factory": f"{_HERE}.assets.create_asset",
            }
        ],
        "connection-types": [
            {
                "connection-type": CONN_TYPE,
                "hook-class-name": f"{_HERE}.hook.ChurnHook",
                "hook-name": INTEGRATION,
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "port"],
                    "relabeling": {"host": "Base URL", "password": "API key"},
                    "placeholders": {"host": "https://api.example.com"},
                },
            }
        ],
    }
