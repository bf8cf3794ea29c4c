"""One file, two readers: an int64 column with nulls that pandas reads as float64 changes
numbers beyond 2**53 (and so the event's id). Such a float is refused by name
(``float_beyond_2_53``), so the same file sent by path and then through
``pd.read_parquet`` never stores one event twice or a changed number."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import churn_connector as cc

BIG = 2**53 + 11  # 9007199254741003: float64 rounds it to ...004


def export(path: Path, now: pd.Timestamp) -> Path:
    """Two events whose ``properties.n`` is an int64 column with a null."""
    when = [(now - pd.Timedelta(hours=1, minutes=i)).to_pydatetime() for i in range(2)]
    table = pa.table(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["invoice_paid", "invoice_paid"],
            "occurred_at": pa.array(when, pa.timestamp("us", "UTC")),
            "properties.n": pa.array([BIG, None], pa.int64()),
        }
    )
    pq.write_table(table, path)
    return path


def test_pandas_default_read_of_big_int_with_nulls_is_refused_by_name(
    tmp_path: Path, now: pd.Timestamp
) -> None:
    frame = pd.read_parquet(export(tmp_path / "e.parquet", now))
    assert frame["properties.n"].dtype == np.float64  # what pandas did to the column
    report = cc.validate_events(frame, now=now)
    assert report.failures[["row", "column", "check"]].to_dict("records") == [
        {"row": 0, "column": "properties.n", "check": "float_beyond_2_53"}
    ]
    assert 'dtype_backend="pyarrow"' in report.failures["message"][0]


def test_same_file_by_path_then_by_pandas_stores_each_event_once_and_exactly(
    tmp_path: Path, now: pd.Timestamp, sandbox: cc.Sandbox, client: cc.Client
) -> None:
    path = export(tmp_path / "e.parquet", now)
    first = client.send_events(str(path))
    assert first.counts["sent"] == 2
    again = client.send_events(pd.read_parquet(path))
    assert again.counts["invalid"] == 1  # the rounded number never leaves
    stored = sandbox.events()
    assert len(stored) == 2
    assert sorted(str(p.get("n")) for p in stored["properties"]) == sorted([str(BIG), "None"])


def test_pyarrow_backed_read_keeps_the_integer_and_the_id(
    tmp_path: Path, now: pd.Timestamp
) -> None:
    path = export(tmp_path / "e.parquet", now)
    by_path = cc.events_to_wire(str(path), now=now)
    by_pandas = cc.events_to_wire(pd.read_parquet(path, dtype_backend="pyarrow"), now=now)
    assert by_pandas == by_path
    assert by_path[0]["properties"]["n"] == BIG


def test_arrow_float_column_beyond_2_53_is_the_sources_own_and_sent(now: pd.Timestamp) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "event_type": ["measured"],
            "occurred_at": [now - pd.Timedelta(hours=1)],
            "properties.mass": pd.array([6.02e23], dtype="double[pyarrow]"),
        }
    )
    (event,) = cc.events_to_wire(frame, now=now)
    assert event["properties"]["mass"] == 6.02e23


def test_float_column_within_2_53_stays_valid(now: pd.Timestamp) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["measured", "measured"],
            "occurred_at": [now - pd.Timedelta(hours=1)] * 2,
            "properties.n": [float(2**53), -float(2**53)],
        }
    )
    assert cc.validate_events(frame, now=now).n_invalid == 0


def test_trait_float_beyond_2_53_is_refused() -> None:
    frame = pd.DataFrame({"external_user_id": ["u1", "u2"], "traits.n": [float(BIG), np.nan]})
    report = cc.validate_identities(frame)
    assert report.failures["check"].tolist() == ["float_beyond_2_53"]
