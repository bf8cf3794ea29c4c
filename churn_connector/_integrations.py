"""Task-shaped wrappers for orchestrators (Airflow ``@task`` / ``PythonOperator``, cron jobs).

They send, optionally write the result frames, return a small JSON-serialisable summary
(safe for XCom: counts only, no values, no key) and raise a picklable package exception
when anything was not delivered, so the task fails and retries like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Unpack

from ._client import Client, IdentifyOptions, SendEventsOptions
from ._config import ClientConfig, Secret
from ._delivery.results import SendResult, write_frame
from ._types import DataSource


def _finish(
    result: SendResult, results_dir: str | Path | None, *, allow_invalid: bool
) -> dict[str, Any]:
    if results_dir is not None:
        folder = Path(results_dir)
        write_frame(result.chunks, folder / f"{result.kind}_chunks.csv")
        write_frame(result.rows, folder / f"{result.kind}_rows.parquet")
    summary = {
        "kind": result.kind,
        "rows": result.n_rows,
        "counts": dict(result.counts),
        "requests": len(result.chunks),
        "elapsed_s": round(result.elapsed_s, 3),
        "exit_code": result.exit_code,
    }
    result.raise_for_failures(allow_invalid=allow_invalid)
    return summary


def send_events_task(
    data: DataSource,
    *,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    config: ClientConfig | None = None,
    results_dir: str | Path | None = None,
    allow_invalid: bool = False,
    **options: Unpack[SendEventsOptions],
) -> dict[str, Any]:
    """Send events; return a summary dict; raise DeliveryError if rows were not delivered.

    ``allow_invalid=True`` lets invalid rows (reported, never sent) pass the task. Client
    settings (timeouts, retry, ...) come in ``config``; ``options`` are those of
    :meth:`Client.send_events`.
    """
    client = Client(base_url, api_key, config=config)
    result = client.send_events(data, **options)
    return _finish(result, results_dir, allow_invalid=allow_invalid)


def identify_task(
    data: DataSource,
    *,
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    config: ClientConfig | None = None,
    results_dir: str | Path | None = None,
    allow_invalid: bool = False,
    **options: Unpack[IdentifyOptions],
) -> dict[str, Any]:
    """Identify users; the same contract as :func:`send_events_task`."""
    client = Client(base_url, api_key, config=config)
    result = client.identify(data, **options)
    return _finish(result, results_dir, allow_invalid=allow_invalid)
