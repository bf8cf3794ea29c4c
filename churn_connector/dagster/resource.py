"""ChurnResource: a Dagster resource that sends an asset's table, and the run as metadata.

The key is a field like any other, given as ``EnvVar("CHURN_API_KEY")``: Dagster then shows
the variable's name in its UI and config, never its value, and resolves it where the run
executes. A send returns a ``MaterializeResult`` whose metadata holds the counts per row
state, the requests, the elapsed time and the result files' paths (never data, never the
key); valid rows that were not delivered raise ``dagster.Failure`` with the same metadata.

A database is read by a query, ``cc.sql(query, connection)``, like any table. Incremental,
``cursor=``: with a ``ledger``, each materialization reads the rows past the sync's
watermark; without one, a partitioned asset passes its partition's time window
(``time_window=context.partition_time_window``), which bounds the cursor (``start <= cursor
< end``), so that each partition, and a backfill of many, reads exactly its own rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource, Failure, MaterializeResult, MetadataValue
from pydantic import Field

from .._client import Client
from .._core import ConfigurationError, Secret
from .._results import SendResult
from .._tasks import Recorded, record, undelivered

__all__ = ["ChurnResource", "summary_metadata"]


class ChurnResource(ConfigurableResource):  # type: ignore[type-arg]
    """The ingestion API for Dagster assets: ``ChurnResource(base_url=...,
    api_key=EnvVar("CHURN_API_KEY"))``; :meth:`send_events` / :meth:`identify` send a table
    and return a ``MaterializeResult`` with the run's counts as metadata."""

    base_url: str = Field(description="The API's base URL, e.g. https://api.example.com.")
    api_key: str = Field(
        description="The API key: give it as EnvVar('CHURN_API_KEY'), whose value Dagster "
        "never shows."
    )
    max_concurrency: int | None = Field(default=None, description="Event batches in flight.")
    identify_concurrency: int | None = Field(default=None, description="Identify calls.")
    max_requests_per_second: float | None = Field(default=None, description="Request budget.")
    deadline: float | None = Field(default=None, description="For a whole run, in seconds.")
    allow_insecure_http: bool = Field(
        default=False, description="Plain http to a host that is not loopback (tests only)."
    )

    def get_client(self) -> Client:
        """A new :class:`churn_connector.Client` for this resource's API."""
        options = {
            name: value
            for name in (
                "max_concurrency",
                "identify_concurrency",
                "max_requests_per_second",
                "deadline",
            )
            if (value := getattr(self, name)) is not None
        }
        if self.allow_insecure_http:
            options["allow_insecure_http"] = True
        return Client(self.base_url, Secret(self.api_key), **options)

    def send_events(
        self,
        data: Any,
        *,
        results_dir: str | Path | None = None,
        fail_on_invalid: bool = False,
        time_window: Any = None,
        **options: Any,
    ) -> MaterializeResult:  # type: ignore[type-arg]
        """Validate and send events (``options``: :meth:`Client.send_events`'s); the run as
        materialization metadata. ``results_dir``: where to write the result files;
        ``time_window``: a partition's ``TimeWindow``, bounding ``cursor`` (see the module)."""
        _bound_by_window(options, time_window)
        client = self.get_client()
        return _materialized(
            record("events", lambda: client.send_events(data, **options), results_dir),
            fail_on_invalid=fail_on_invalid,
        )

    def identify(
        self,
        data: Any,
        *,
        results_dir: str | Path | None = None,
        fail_on_invalid: bool = False,
        time_window: Any = None,
        **options: Any,
    ) -> MaterializeResult:  # type: ignore[type-arg]
        """Validate and identify users (``options``: :meth:`Client.identify`'s); as
        :meth:`send_events`."""
        _bound_by_window(options, time_window)
        client = self.get_client()
        send: Callable[[], SendResult] = lambda: client.identify(data, **options)  # noqa: E731
        return _materialized(
            record("identities", send, results_dir), fail_on_invalid=fail_on_invalid
        )


def _bound_by_window(options: dict[str, Any], window: Any) -> None:
    """A partition's time window as the cursor's ``since`` / ``until`` (see the module)."""
    if window is None:
        return
    if not options.get("cursor"):
        raise ConfigurationError(
            "time_window bounds a cursor column: name it (cursor=), the column that grows "
            "as rows arrive"
        )
    if options.get("since") is not None or options.get("until") is not None:
        raise ConfigurationError("time_window and since/until: give the range once")
    start, end = getattr(window, "start", None), getattr(window, "end", None)
    if start is None or end is None:
        raise ConfigurationError(
            f"time_window must be a partition's TimeWindow (start, end), not {window!r}"
        )
    options["since"], options["until"] = start, end


def summary_metadata(summary: dict[str, Any]) -> dict[str, Any]:
    """A run's summary (``churn_connector.send_events_task``'s) as Dagster metadata."""
    metadata: dict[str, Any] = {
        "churn/kind": summary["kind"],
        "churn/rows": MetadataValue.int(int(summary["rows"])),
        **{
            f"churn/{state}": MetadataValue.int(int(n))
            for state, n in sorted(summary["counts"].items())
        },
        "churn/requests": MetadataValue.int(int(summary["requests"])),
        "churn/elapsed_s": MetadataValue.float(float(summary["elapsed_s"])),
        "churn/dry_run": MetadataValue.bool(bool(summary["dry_run"])),
    }
    for name, path in sorted(summary.get("files", {}).items()):
        metadata[f"churn/{name}_file"] = MetadataValue.path(str(path))
    return metadata


def _materialized(recorded: Recorded, *, fail_on_invalid: bool) -> MaterializeResult:  # type: ignore[type-arg]
    summary = recorded.summary()
    metadata = summary_metadata(summary)
    if recorded.error is not None:  # the run stopped part way: what it did is in metadata
        raise Failure(
            description=f"churn {summary['kind']}: {recorded.error}",
            metadata=metadata,
            allow_retries=recorded.error.retryable,
        )
    failure = undelivered(summary, allow_invalid=not fail_on_invalid)
    if failure is not None:
        raise Failure(
            description=f"churn {failure}", metadata=metadata, allow_retries=failure.retryable
        )
    return MaterializeResult(metadata=metadata)
