"""Helpers of the table tests: events made in batches, and rows compared as the API stored
them against the rows a table holds (the oracle: the table read by its own library)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow as pa

import churn_connector as cc


def events(now: pd.Timestamp, start: int, stop: int, **columns: Any) -> pa.Table:
    """Rows ``start..stop-1``: user ``u<i>``, a minute apart, an hour before ``now``;
    ``columns``: more columns (a value, or a list of ``stop - start`` values)."""
    n = stop - start
    data: dict[str, Any] = {
        "external_user_id": [f"u{i}" for i in range(start, stop)],
        "event_type": ["login" if i % 2 else "page_view" for i in range(start, stop)],
        "occurred_at": pa.array(
            [now - pd.Timedelta(hours=1, minutes=i) for i in range(start, stop)],
            pa.timestamp("us", "UTC"),
        ),
        "properties.seq": pa.array(list(range(start, stop)), pa.int64()),
    }
    for name, value in columns.items():
        data[name] = value if isinstance(value, list) else [value] * n
    return pa.table(data)


def row(event: dict[str, Any]) -> tuple[str, str, str, str]:
    """An event as a comparable tuple (user, type, time, properties as sorted JSON)."""
    return (
        str(event["external_user_id"]),
        str(event["event_type"]),
        str(event["occurred_at"]),
        json.dumps(event["properties"], sort_keys=True),
    )


def stored(sandbox: cc.Sandbox) -> list[tuple[str, str, str, str]]:
    """What the API stored, sorted."""
    return sorted(
        row({str(k): v for k, v in e.items()}) for e in sandbox.events().to_dict("records")
    )


def expected(table: pa.Table, now: pd.Timestamp) -> list[tuple[str, str, str, str]]:
    """The wire events of ``table`` (the rows a table holds at some version), sorted."""
    return sorted(row(e) for e in cc.events_to_wire(table, now=now))
