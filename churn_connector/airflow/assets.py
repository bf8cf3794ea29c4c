"""The provider's asset URI scheme, ``churn://<connection id>/<kind>``: what a task delivered.

:class:`~churn_connector.airflow.SendEventsOperator` and
:class:`~churn_connector.airflow.IdentifyOperator` declare ``churn_asset(kind, conn_id)`` as
an outlet, so a DAG scheduled on it (``schedule=[churn_asset("events")]``) runs after events
were delivered through that connection. The asset event's ``extra`` carries the run's
counts (:func:`asset_extra`): never data, never the key.

The URI names the connection, not the API's host: a DAG file is parsed without its
connections (reading them there would hit the secrets backend on every parse), and the same
DAG then keeps its asset from staging to production. Airflow's providers manager registers
the scheme (``asset-uris`` in :mod:`churn_connector.airflow.provider`): :func:`sanitize_uri`
refuses a ``churn://`` URI that names no connection or no kind.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

from airflow.sdk import Asset

from .._core import KINDS
from .provider import CONN_TYPE, DEFAULT_CONN_ID

__all__ = ["SCHEME", "asset_extra", "churn_asset", "create_asset", "sanitize_uri"]

SCHEME = CONN_TYPE  # churn://
GROUP = "churn"


def churn_asset(kind: str = "events", conn_id: str = DEFAULT_CONN_ID) -> Asset:
    """The asset a send of ``kind`` through connection ``conn_id`` updates."""
    if kind not in KINDS:
        raise ValueError(f"churn_asset: kind must be one of {KINDS}, not {kind!r}")
    return Asset(uri=f"{SCHEME}://{conn_id}/{kind}", group=GROUP)


def create_asset(
    *, kind: str = "events", conn_id: str = DEFAULT_CONN_ID, extra: dict[str, Any] | None = None
) -> Asset:
    """The provider's asset factory (Airflow's providers manager calls it by keyword)."""
    asset = churn_asset(kind, conn_id)
    if extra:
        asset = Asset(uri=asset.uri, group=GROUP, extra=extra)
    return asset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's check of a ``churn://`` URI: a connection id and a kind, nothing else."""
    kind = uri.path.strip("/")
    if not uri.netloc:
        raise ValueError(f"a churn asset URI names a connection: churn://<conn_id>/{kind}")
    if kind not in KINDS:
        raise ValueError(
            f"a churn asset URI ends in one of {KINDS}: churn://{uri.netloc}/events, not {kind!r}"
        )
    if uri.query:
        raise ValueError("a churn asset URI has no query: churn://<conn_id>/<kind>")
    return uri._replace(path=f"/{kind}")


def asset_extra(summary: dict[str, Any]) -> dict[str, Any]:
    """A run's summary as an asset event's extra: counts, requests, dry run; nothing else."""
    return {
        "kind": summary["kind"],
        "rows": summary["rows"],
        "counts": dict(summary["counts"]),
        "requests": summary["requests"],
        "dry_run": summary["dry_run"],
    }
