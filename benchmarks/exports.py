"""Synthetic warehouse exports of events for the benchmarks, cached between runs.

Two shapes of the same rows, each as Parquet and as CSV (``KINDS``):

* the bench's own: ``external_user_id`` int64, ``event_type`` string, ``occurred_at``
  timestamp[ms, UTC], ``properties`` a small struct (plan, screen, session_s) that the
  package reads as a dict (``parquet``); in CSV (``csv``) cells are text: ``occurred_at``
  RFC 3339 with an offset (``Z`` or ``+02:00``), ``properties`` a JSON object;
* flat typed columns (``parquet-flat``, ``csv-flat``): ``external_user_id`` int64,
  ``event_type``, ``occurred_at`` timestamp[ms, UTC] (in CSV: RFC 3339 text ending in
  ``Z``), ``properties.plan`` string and ``properties.seats`` int64 (in CSV, read with
  ``FLAT_CSV_OPTIONS``).

Every row is valid and distinct (timestamps are unique), so each row is one delivered
event. Files are written in parts, so the benchmark never holds a large frame; they are
reused from the cache directory while their timestamps stay well inside the API's 30-day
window (files older than ``MAX_AGE`` are rebuilt).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

FORMAT = 1  # bump when the generated data changes
PART_ROWS = 100_000  # rows per written part (one Parquet row group)
WINDOW = dt.timedelta(days=20)  # occurred_at spans [created - 20 days, created - 1 minute]
MAX_AGE = dt.timedelta(days=7)  # then the oldest rows are 27 days old: still valid
EVENT_TYPES = ["login", "page_view", "feature_used", "invoice_paid", "support_ticket", "logout"]
PLANS = ["free", "starter", "pro", "enterprise"]

KINDS = ("parquet", "csv", "parquet-flat", "csv-flat")
# how the CLI reads the flat CSV: its cells are text unless typed
FLAT_CSV_OPTIONS = ("--dtype", "properties.seats=int64")

FLAT_SCHEMA = pa.schema(
    [
        ("external_user_id", pa.int64()),
        ("event_type", pa.string()),
        ("occurred_at", pa.timestamp("ms", tz="UTC")),
        ("properties.plan", pa.string()),
        ("properties.seats", pa.int64()),
    ]
)

SCHEMA = pa.schema(
    [
        ("external_user_id", pa.int64()),
        ("event_type", pa.string()),
        ("occurred_at", pa.timestamp("ms", tz="UTC")),
        (
            "properties",
            pa.struct([("plan", pa.string()), ("screen", pa.string()), ("session_s", pa.int64())]),
        ),
    ]
)


def part_columns(
    start: int, rows: int, total: int, created_ms: int, seed: int
) -> dict[str, np.ndarray]:
    """Column arrays for rows ``start .. start + rows`` of a ``total``-row export."""
    rng = np.random.default_rng([seed, start])
    window_ms = int(WINDOW.total_seconds() * 1000)
    spacing = max(window_ms // total, 1)
    first = created_ms - window_ms
    index = np.arange(start, start + rows, dtype=np.int64)
    # unique and increasing: an export ordered by time, and no two rows alike
    ms = first + index * spacing + rng.integers(0, max(spacing - 1, 1), rows)
    return {
        "external_user_id": rng.integers(1, 50_000, rows),
        "event_type": rng.choice(np.array(EVENT_TYPES, dtype=object), rows),
        "ms": ms,
        "plan": rng.choice(np.array(PLANS, dtype=object), rows),
        "screen": np.char.add("s", rng.integers(0, 40, rows).astype("U2")).astype(object),
        "session_s": rng.integers(1, 3600, rows),
    }


def parquet_part(cols: dict[str, np.ndarray]) -> pa.Table:
    properties = pa.StructArray.from_arrays(
        [
            pa.array(cols["plan"], pa.string()),
            pa.array(cols["screen"], pa.string()),
            pa.array(cols["session_s"], pa.int64()),
        ],
        names=["plan", "screen", "session_s"],
    )
    return pa.Table.from_arrays(
        [
            pa.array(cols["external_user_id"], pa.int64()),
            pa.array(cols["event_type"], pa.string()),
            pa.array(cols["ms"], pa.timestamp("ms", tz="UTC")),
            properties,
        ],
        schema=SCHEMA,
    )


def flat_part(cols: dict[str, np.ndarray]) -> pa.Table:
    return pa.Table.from_arrays(
        [
            pa.array(cols["external_user_id"], pa.int64()),
            pa.array(cols["event_type"], pa.string()),
            pa.array(cols["ms"], pa.timestamp("ms", tz="UTC")),
            pa.array(cols["plan"], pa.string()),
            pa.array(cols["session_s"] % 50 + 1, pa.int64()),  # seats
        ],
        schema=FLAT_SCHEMA,
    )


def flat_csv_part(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    ms = cols["ms"].astype("datetime64[ms]")
    return pd.DataFrame(
        {
            "external_user_id": cols["external_user_id"],
            "event_type": cols["event_type"],
            "occurred_at": np.datetime_as_string(ms, unit="ms", timezone="UTC"),
            "properties.plan": cols["plan"],
            "properties.seats": cols["session_s"] % 50 + 1,
        }
    )


def csv_part(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    ms = cols["ms"].astype("datetime64[ms]")
    utc = np.datetime_as_string(ms, unit="ms", timezone="UTC")  # ...123Z
    local = np.char.add(
        np.datetime_as_string(ms + np.timedelta64(2, "h"), unit="ms"), "+02:00"
    )  # the same instant, written with an offset: exports mix both
    texts = np.where(np.arange(len(ms)) % 3 == 0, local, utc)
    properties = [
        orjson.dumps({"plan": p, "screen": s, "session_s": n}).decode()
        for p, s, n in zip(
            cols["plan"].tolist(), cols["screen"].tolist(), cols["session_s"].tolist(), strict=True
        )
    ]
    return pd.DataFrame(
        {
            "external_user_id": cols["external_user_id"],
            "event_type": cols["event_type"],
            "occurred_at": texts,
            "properties": properties,
        }
    )


def write(path: Path, rows: int, kind: str, created_ms: int, seed: int = 0) -> None:
    """Write a ``rows``-row export of ``kind`` (one of ``KINDS``) part by part."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # left by an interrupted run
    writer: pq.ParquetWriter | None = None
    flat = kind.endswith("-flat")
    try:
        if kind.startswith("parquet"):
            writer = pq.ParquetWriter(tmp, FLAT_SCHEMA if flat else SCHEMA)
        for start in range(0, rows, PART_ROWS):
            cols = part_columns(start, min(PART_ROWS, rows - start), rows, created_ms, seed)
            if writer is not None:
                writer.write_table(flat_part(cols) if flat else parquet_part(cols))
            else:
                part = flat_csv_part(cols) if flat else csv_part(cols)
                part.to_csv(tmp, mode="a", header=start == 0, index=False)
    finally:
        if writer is not None:
            writer.close()
    tmp.replace(path)


def export(cache: Path, rows: int, kind: str) -> Path:
    """The cached export of ``rows`` rows of ``kind``, (re)built when missing or too old."""
    cache.mkdir(parents=True, exist_ok=True)
    suffix = "parquet" if kind.startswith("parquet") else "csv"
    pattern = f"events-v{FORMAT}-{kind}-{rows}-*.{suffix}"
    now = time.time()
    fresh = None
    for candidate in sorted(cache.glob(pattern), reverse=True):  # newest first
        created_ms = int(candidate.stem.rsplit("-", 1)[1])
        if now - created_ms / 1000 < MAX_AGE.total_seconds() and fresh is None:
            fresh = candidate
        elif candidate != fresh:
            candidate.unlink()  # stale: its oldest rows are about to age out
    if fresh is not None:
        return fresh
    created_ms = int(now * 1000) - 60_000
    path = cache / f"events-v{FORMAT}-{kind}-{rows}-{created_ms}.{suffix}"
    write(path, rows, kind, created_ms)
    return path
