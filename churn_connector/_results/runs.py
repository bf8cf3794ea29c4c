"""What a run leaves for later runs: the rows file's header, and receipts.

**The rows file's header.** The per-row frame (``SendResult.rows``, ``RunStopped.rows``)
carries, in ``frame.attrs["churn_connector"]``, what ``resend`` needs to trust it: the
input's fingerprint (``_read.fingerprint``), the kind, whether the run completed, the run's
id and the package version. A Parquet rows file keeps it in the file's key-value metadata
(key ``churn_connector``); a CSV rows file, which has no place for it, in a file beside it,
``<name>.csv.run.json``. Its rows are in input order: the rows file's row *k* is the input's
row *k*, so a re-send selects rows by position and checks their labels.

**Receipts.** One JSON line per run (``--receipts FILE`` or a folder, where it goes to
``receipts.jsonl``): the run's id, start and end, the input's fingerprint, rows per state,
requests, retries, the exit code and the package version. Never data, never the key.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..__version__ import __version__
from .._core import (
    ConfigurationError,
    ExitCode,
    InputError,
    Interrupted,
    RunStopped,
)

HEADER = "churn_connector"  # the frame's attrs key, and the Parquet metadata key
ROWS_FORMAT = "churn-connector rows"
ROWS_VERSION = 1
RECEIPT_VERSION = 1
SIDECAR = ".run.json"


def rows_header(
    kind: str,
    run_id: str,
    fingerprint: Mapping[str, Any],
    *,
    complete: bool,
    dry_run: bool,
) -> dict[str, Any]:
    """The header a rows file carries (see the module)."""
    return {
        "format": ROWS_FORMAT,
        "version": ROWS_VERSION,
        "kind": kind,
        "run_id": run_id,
        "complete": complete,
        "dry_run": dry_run,
        "input": dict(fingerprint),
        "package_version": __version__,
    }


def header_of(frame: pd.DataFrame) -> dict[str, Any] | None:
    """The rows header a frame carries, if any."""
    found = frame.attrs.get(HEADER)
    return dict(found) if isinstance(found, Mapping) else None


def sidecar(path: Path) -> Path:
    """Where a CSV rows file's header goes."""
    return path.with_name(path.name + SIDECAR)


def header_bytes(header: Mapping[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True).encode()


def stored_header(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The rows header of the file at ``path``, read without its rows; None when it is no
    rows file (any other file, or one that cannot be read)."""
    target = Path(path)
    suffix = target.suffix.lower()
    try:
        if not target.is_file():
            return None
        if suffix == ".parquet":
            raw = (pq.read_schema(target).metadata or {}).get(HEADER.encode())
            found = json.loads(raw) if raw else None
        elif suffix == ".csv" and sidecar(target).is_file():
            found = json.loads(sidecar(target).read_text(encoding="utf-8"))
        else:
            return None
    except (OSError, ValueError, pa.ArrowException):
        return None
    return found if isinstance(found, dict) and found.get("format") == ROWS_FORMAT else None


def read_rows_file(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """A rows file (``--rows``) and its header (None: it has none)."""
    target = Path(path)
    if not target.is_file():
        raise InputError(f"no such rows file: {target}", path=str(target))
    suffix = target.suffix.lower()
    header: dict[str, Any] | None = None
    try:
        if suffix == ".parquet":
            table = pq.read_table(target)
            meta = table.schema.metadata or {}
            raw = meta.get(HEADER.encode())
            header = json.loads(raw) if raw else None
            frame = table.to_pandas()
        elif suffix == ".csv":
            frame = pd.read_csv(
                target, dtype=dict.fromkeys(("status", "message_id", "error"), "string")
            )
            beside = sidecar(target)
            header = json.loads(beside.read_text(encoding="utf-8")) if beside.is_file() else None
        else:
            raise ConfigurationError(f"{target}: a rows file is .csv or .parquet")
    except (OSError, ValueError) as exc:
        raise InputError(f"{target} is not a readable rows file: {exc}", path=str(target)) from None
    return frame, header


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    """An instant as RFC 3339 UTC with milliseconds (``2026-11-26T09:30:00.123Z``)."""
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def receipt(
    *,
    command: str,
    kind: str,
    header: Mapping[str, Any] | None,
    counts: Mapping[str, int],
    requests: int,
    retries: int,
    exit_code: int,
    started_at: dt.datetime,
    finished_at: dt.datetime,
) -> dict[str, Any]:
    """One run's receipt (see the module): counts and ids, never data, never the key."""
    head = header or {}
    return {
        "receipt_version": RECEIPT_VERSION,
        "run_id": head.get("run_id"),
        "command": command,
        "kind": kind,
        "started_at": iso(started_at),
        "finished_at": iso(finished_at),
        "elapsed_s": round((finished_at - started_at).total_seconds(), 3),
        "input": head.get("input"),
        "complete": head.get("complete"),
        "dry_run": bool(head.get("dry_run", False)),
        "rows": int(sum(counts.values())),
        "counts": {k: int(v) for k, v in counts.items()},
        "requests": int(requests),
        "retries": int(retries),
        "exit_code": int(exit_code),
        "package_version": __version__,
    }


def stopped_receipt(
    command: str, kind: str, error: RunStopped | Interrupted, started_at: dt.datetime
) -> dict[str, Any]:
    """The receipt of a run that stopped part way (its exit code: 3, or 128 + the signal)."""
    chunks = error.chunks if error.chunks is not None else pd.DataFrame({"attempts": []})
    attempts = chunks["attempts"].astype("int64")
    code: int = ExitCode.STOPPED
    if isinstance(error, Interrupted):
        code = ExitCode.interrupted(error.signal or signal.SIGINT)
    return receipt(
        command=command,
        kind=kind,
        header=None if error.rows is None else header_of(error.rows),
        counts=error.counts or {},
        requests=len(chunks),
        retries=int((attempts - 1).clip(lower=0).sum()),
        exit_code=code,
        started_at=started_at,
        finished_at=now_utc(),
    )


def receipt_line(made: Mapping[str, Any]) -> str:
    """A receipt as the one line ``--receipts`` appends."""
    return json.dumps(made, separators=(",", ":"))
