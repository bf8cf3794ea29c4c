"""Task-shaped wrappers for orchestrators (Airflow ``@task`` / ``PythonOperator``, cron jobs).

They send, optionally write the result frames, return a small JSON-serialisable summary
(safe for XCom: counts only, no values, no key) and raise a picklable package exception
when anything was not delivered, so the task fails and retries like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._client import Client
from ._results import SendResult


def _finish(
    result: SendResult, results_dir: str | Path | None, allow_invalid: bool
) -> dict[str, Any]:
    if results_dir is not None:
        from ._cli import write_frame

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
    data: Any,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    results_dir: str | Path | None = None,
    allow_invalid: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Send events; return a summary dict; raise DeliveryError if rows were not delivered.

    ``allow_invalid=True`` lets invalid rows (reported, never sent) pass the task.
    Client options (timeouts, concurrency, retry) and send options both go in ``options``.
    """
    return _task("send_events", data, base_url, api_key, results_dir, allow_invalid, options)


def identify_task(
    data: Any,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    results_dir: str | Path | None = None,
    allow_invalid: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Identify users; the same contract as :func:`send_events_task`."""
    return _task("identify", data, base_url, api_key, results_dir, allow_invalid, options)


def _task(
    operation: str,
    data: Any,
    base_url: str | None,
    api_key: str | None,
    results_dir: str | Path | None,
    allow_invalid: bool,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Split options between the Client and the call, run it, and finish the task."""
    from ._client import _CONFIG_FIELDS

    client_opts = {k: v for k, v in options.items() if k in _CONFIG_FIELDS}
    call_opts = {k: v for k, v in options.items() if k not in _CONFIG_FIELDS}
    client = Client(base_url, api_key, **client_opts)
    result: SendResult = getattr(client, operation)(data, **call_opts)
    return _finish(result, results_dir, allow_invalid)
