"""What every orchestrator task does around a send, in one place.

:func:`record` runs a send, writes its result files (also when the run stopped part way) and
builds a small JSON-serialisable summary (counts, requests, elapsed, file paths: never data,
never the key). Two kinds of task are built on it: the plain wrappers below (Airflow
``@task`` / ``PythonOperator``, cron jobs), and the Airflow provider's operators
(``churn_connector.airflow``), which add a Connection, templates and per-run folders.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import pandas as pd
import pyarrow as pa

from ._client import Client, IdentifyOptions, SendEventsOptions, send_keywords
from ._core import (
    CLIENT_FIELDS,
    ClientConfig,
    ConfigurationError,
    DataSource,
    DeliveryError,
    ExitCode,
    Interrupted,
    Kind,
    RunStopped,
    Secret,
    as_secret,
)
from ._results import SendResult, write_frame

__all__ = [
    "PARTITION_RESULT_META",
    "Recorded",
    "combine",
    "describe",
    "identify_task",
    "record",
    "send_events_task",
    "send_partition",
    "undelivered",
]

_SUMMARY_STATES = ("sent", "skipped", "invalid", "rejected", "failed")
# the CLI's exit code for a run that stopped part way (transport, ledger, input); an
# interrupted one exits 128 + its signal


def write_results(
    kind: str,
    chunks: pd.DataFrame | None,
    rows: pd.DataFrame | None,
    results_dir: str | Path | None,
) -> dict[str, str]:
    """Write ``<kind>_chunks.csv`` and ``<kind>_rows.parquet`` into ``results_dir``;
    return their paths by name (nothing when there is no folder or nothing to write)."""
    if results_dir is None or chunks is None or rows is None:
        return {}
    folder = Path(results_dir)
    paths = {"chunks": folder / f"{kind}_chunks.csv", "rows": folder / f"{kind}_rows.parquet"}
    write_frame(chunks, paths["chunks"])
    write_frame(rows, paths["rows"])
    return {name: str(path) for name, path in paths.items()}


@dataclass
class Recorded:
    """One send as a task sees it: the result, or the error that stopped the run part way,
    and the result files written either way."""

    kind: str
    result: SendResult | None
    error: RunStopped | Interrupted | None
    files: dict[str, str]
    elapsed_s: float

    def summary(self) -> dict[str, Any]:
        """Counts, requests, elapsed time, file paths and notes: safe for XCom and logs."""
        if self.result is not None:
            result = self.result
            return {
                "kind": self.kind,
                "rows": int(result.n_rows),
                "counts": {k: int(v) for k, v in result.counts.items()},
                "requests": len(result.chunks),
                "elapsed_s": round(float(result.elapsed_s), 3),
                "exit_code": int(result.exit_code),
                "dry_run": bool(result.dry_run),
                "files": dict(self.files),
                "notes": [dict(note) for note in result.notes],  # counts and column names
            }
        assert self.error is not None
        error = self.error
        counts = {k: int(v) for k, v in error.counts.items()}
        code: int = ExitCode.STOPPED
        if isinstance(error, Interrupted):
            code = ExitCode.interrupted(error.signal or signal.SIGINT)
        return {
            "kind": self.kind,
            "rows": sum(counts.values()),
            "counts": counts,
            "requests": 0 if error.chunks is None else len(error.chunks),
            "elapsed_s": round(self.elapsed_s, 3),
            "exit_code": code,
            "dry_run": False,
            "files": dict(self.files),
            "error": f"{type(error).__name__}: {error}",
        }


def record(kind: str, send: Callable[[], SendResult], results_dir: str | Path | None) -> Recorded:
    """Send, and write the result files, also of a run that stopped part way (an interrupt,
    an unreachable API, a broken file or ledger): its error is kept, not raised."""
    started = time.monotonic()
    try:
        result = send()
    except (RunStopped, Interrupted) as exc:
        files = write_results(kind, exc.chunks, exc.rows, results_dir)
        return Recorded(kind, None, exc, files, time.monotonic() - started)
    files = write_results(kind, result.chunks, result.rows, results_dir)
    return Recorded(kind, result, None, files, time.monotonic() - started)


def combine(kind: str, summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One summary of sends that ran side by side (a Spark job's partitions): rows, counts
    and requests add up, ``elapsed_s`` is the longest, ``exit_code`` the highest."""
    total: dict[str, Any] = {
        "kind": kind,
        "rows": 0,
        "counts": {},
        "requests": 0,
        "elapsed_s": 0.0,
        "exit_code": 0,
        "dry_run": False,
    }
    for one in summaries:
        total["rows"] += one["rows"]
        for state, n in one["counts"].items():
            total["counts"][state] = total["counts"].get(state, 0) + n
        total["requests"] += one["requests"]
        total["elapsed_s"] = max(total["elapsed_s"], one["elapsed_s"])
        total["exit_code"] = max(total["exit_code"], one["exit_code"])
        total["dry_run"] = total["dry_run"] or one["dry_run"]
    return total


def describe(summary: Mapping[str, Any]) -> str:
    """A summary in one line, as ``SendResult.summary()`` words it."""
    c = summary["counts"]
    states = ", ".join(f"{state} {c.get(state, 0):,}" for state in _SUMMARY_STATES)
    expired = f", expired {c['expired']:,}" if c.get("expired") else ""
    expired += f", held {c['held']:,}" if c.get("held") else ""
    head = "dry run: " if summary.get("dry_run") else ""
    return (
        f"{head}{summary['kind']}: {_plural(summary['rows'], 'row')} -> {states}{expired}; "
        f"{_plural(summary['requests'], 'request')}"
    )


def undelivered(summary: Mapping[str, Any], *, allow_invalid: bool) -> DeliveryError | None:
    """The DeliveryError a summary calls for, as ``SendResult.raise_for_failures`` decides:
    valid rows rejected or failed; invalid, expired or held ones too unless
    ``allow_invalid``."""
    c = summary["counts"]
    bad = c.get("rejected", 0) + c.get("failed", 0)
    if not allow_invalid:
        bad += c.get("invalid", 0) + c.get("expired", 0) + c.get("held", 0)
    if not bad:
        return None
    return DeliveryError(f"rows not delivered: {describe(summary)}", counts=dict(c))


def _finish(recorded: Recorded, *, allow_invalid: bool) -> dict[str, Any]:
    if recorded.error is not None:
        raise recorded.error
    assert recorded.result is not None
    summary = recorded.summary()
    recorded.result.raise_for_failures(allow_invalid=allow_invalid)
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
    :meth:`Client.send_events`. In Airflow, prefer ``churn_connector.airflow``'s
    ``SendEventsOperator``: the key from a Connection, a results folder per run and try.
    """
    client = Client(base_url, as_secret(api_key), config=config)
    recorded = record("events", lambda: client.send_events(data, **options), results_dir)
    return _finish(recorded, allow_invalid=allow_invalid)


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
    """Identify users; the same contract as :func:`send_events_task` (in Airflow, prefer
    ``churn_connector.airflow``'s ``IdentifyOperator``)."""
    client = Client(base_url, as_secret(api_key), config=config)
    recorded = record("identities", lambda: client.identify(data, **options), results_dir)
    return _finish(recorded, allow_invalid=allow_invalid)


# the columns of send_partition's result and their dtypes (for Dask's meta=)
PARTITION_RESULT_META = {
    "status": "string",
    "message_id": "string",
    "chunk": "Int64",
    "error": "string",
}
"""The columns and dtypes of ``send_partition``'s result (Dask's ``meta=``)."""
# keywords of the Client (its config, grouped or not) that send_partition routes there; the
# sends' own (batch_size, max_concurrency: per call) stay with the send
_CLIENT_KEYWORDS = CLIENT_FIELDS | {"retry", "timeouts"}


def send_partition(
    frame: pd.DataFrame | pa.Table,
    *,
    kind: Kind = "events",
    base_url: str | None = None,
    api_key: str | Secret | None = None,
    config: ClientConfig | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Send one partition of a distributed frame (Dask, Ray Data, ...); return one result row
    per input row, with the input's index: ``status``, ``message_id``, ``chunk``, ``error``.

    A module-level function, so it pickles by reference: ``ddf.map_partitions(send_partition,
    base_url=url, meta=PARTITION_RESULT_META)`` or ``ds.map_batches(send_partition,
    batch_format="pandas", fn_kwargs={"base_url": url})`` (docs/guides/dask-ray.md).
    ``kind`` is ``"events"`` or ``"identities"`` (then every row of a user must be in the
    same partition). ``options`` are those of :meth:`Client.send_events` /
    :meth:`Client.identify` and :class:`ClientConfig`'s (``max_requests_per_second``: this
    worker's share of a budget, ``max_concurrency``, timeouts, ...). The key defaults to the
    workers' ``CHURN_API_KEY``, which keeps it out of the task graph. An empty partition
    returns an empty result without a client. Rows that were not delivered are in the
    result (its ``status``), not raised; a run that stops (the key refused, the API
    unreachable) raises, and a framework's retry of the partition is safe: message ids make
    every re-send a duplicate the API drops.
    """
    if kind not in ("events", "identities"):
        raise ConfigurationError(f"kind must be 'events' or 'identities', not {kind!r}")
    sends = {o.name for o in send_keywords(kind)} | {"options"}
    if unknown := sorted(options.keys() - sends - _CLIENT_KEYWORDS):
        raise ConfigurationError(
            f"send_partition: unknown option(s) {unknown} for kind={kind}; known: "
            f"{sorted(sends | _CLIENT_KEYWORDS)}"
        )
    index = frame.index if isinstance(frame, pd.DataFrame) else pd.RangeIndex(frame.num_rows)
    if len(index) == 0:
        return _partition_result(pd.DataFrame(columns=list(PARTITION_RESULT_META)), index)
    client_options = {k: options.pop(k) for k in _CLIENT_KEYWORDS & options.keys() - sends}
    client = Client(base_url, as_secret(api_key), config=config, **client_options)
    options.setdefault("progress", False)
    if kind == "events":
        result = client.send_events(frame, **options)
    else:
        result = client.identify(frame, **options)
    return _partition_result(result.rows, index)


def _partition_result(rows: pd.DataFrame, index: pd.Index) -> pd.DataFrame:
    values = {
        "status": rows["status"].astype(str).to_numpy(),
        "message_id": rows["message_id"].to_numpy(),
        "chunk": rows["chunk"].to_numpy(),
        "error": rows["error"].to_numpy(),
    }
    frame = pd.DataFrame(
        {
            name: pd.Series(column, dtype=PARTITION_RESULT_META[name])
            for name, column in values.items()
        }
    )
    return frame.set_axis(index, axis=0)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"
