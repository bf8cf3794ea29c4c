"""Task-shaped wrappers for orchestrators (Airflow ``@task`` / ``PythonOperator``, cron jobs).

They send, optionally write the result frames, return a small JSON-serialisable summary
(safe for XCom: counts only, no values, no key) and raise a picklable package exception
when anything was not delivered, so the task fails and retries like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Unpack

from ._client import Client, IdentifyOptions, SendEventsOptions
from ._config import ClientConfig, Secret, as_secret
from ._delivery.results import SendResult, write_frame
from ._exceptions import _RunStopped
from ._types import DataSource


def _write(kind: str, chunks: Any, rows: Any, results_dir: str | Path | None) -> None:
    if results_dir is not None and chunks is not None and rows is not None:
        folder = Path(results_dir)
        write_frame(chunks, folder / f"{kind}_chunks.csv")
        write_frame(rows, folder / f"{kind}_rows.parquet")


def _run(kind: str, send: Callable[[], SendResult], results_dir: str | Path | None) -> SendResult:
    """Send; when the run stops part way (an interrupt, an unreachable API, a broken file or
    ledger), still write what it did before raising."""
    try:
        return send()
    except _RunStopped as exc:
        _write(kind, exc.chunks, exc.rows, results_dir)
        raise


def _finish(
    result: SendResult, results_dir: str | Path | None, *, allow_invalid: bool
) -> dict[str, Any]:
    _write(result.kind, result.chunks, result.rows, results_dir)
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
    client = Client(base_url, as_secret(api_key), config=config)
    result = _run("events", lambda: client.send_events(data, **options), results_dir)
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
    client = Client(base_url, as_secret(api_key), config=config)
    result = _run("identities", lambda: client.identify(data, **options), results_dir)
    return _finish(result, results_dir, allow_invalid=allow_invalid)
