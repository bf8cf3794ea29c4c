"""Every input format yields the same wire events and the same row accounting."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc


@pytest.fixture
def export(now: pd.Timestamp) -> pd.DataFrame:
    n = 7
    return pd.DataFrame(
        {
            "external_user_id": [f"00{i}" for i in range(n)],  # leading zeros must survive CSV
            "event_type": ["login"] * n,
            "occurred_at": [(now - pd.Timedelta(minutes=i)).isoformat() for i in range(n)],
            "properties.count": pd.array([1, None, 3, 4, None, 6, 7], dtype="Int64"),
            "properties.label": ["NA", "x", "null", "y", "z", "w", "v"],
        }
    )


def write_ndjson(df: pd.DataFrame, path: Path) -> None:
    lines = []
    for rec in df.astype(object).to_dict("records"):
        lines.append(orjson.dumps({k: (None if pd.isna(v) else v) for k, v in rec.items()}))
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_all_formats_give_the_same_wire(
    export: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    export.to_parquet(tmp_path / "e.parquet")
    export.to_csv(tmp_path / "e.csv", index=False)
    write_ndjson(export, tmp_path / "e.ndjson")
    expected = cc.events_to_wire(export, now=now)
    inputs = [
        pa.Table.from_pandas(export),
        tmp_path / "e.parquet",
        str(tmp_path / "e.csv"),
        tmp_path / "e.ndjson",
        iter([export.iloc[:3], export.iloc[3:]]),
    ]
    for data in inputs:
        assert cc.events_to_wire(data, now=now, slice_rows=2) == expected, data


def test_csv_keeps_leading_zeros_and_literal_na_strings(
    export: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    export.to_csv(tmp_path / "e.csv", index=False)
    wire = cc.events_to_wire(tmp_path / "e.csv", now=now)
    assert wire[0]["external_user_id"] == "000"
    assert wire[0]["properties"] == {"count": 1, "label": "NA"}
    assert wire[1]["properties"] == {"label": "x"}


def test_file_rows_are_labelled_by_row_number(
    export: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    export.loc[4, "event_type"] = "BAD"
    export.to_parquet(tmp_path / "e.parquet")
    report = cc.validate_events(tmp_path / "e.parquet", now=now, slice_rows=3)
    assert list(report.failures["row"]) == [4]


def test_unsupported_inputs_raise_input_error(tmp_path: Path) -> None:
    (tmp_path / "e.xlsx").write_text("x")
    with pytest.raises(cc.InputError, match="unsupported file type"):
        cc.validate_events(tmp_path / "e.xlsx")
    with pytest.raises(cc.InputError, match="no such file"):
        cc.validate_events(tmp_path / "missing.csv")
    with pytest.raises(cc.InputError, match="unsupported input"):
        cc.validate_events(42)


def test_invalid_ndjson_line_is_reported_with_its_number(tmp_path: Path) -> None:
    (tmp_path / "e.ndjson").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(cc.InputError, match="line 2"):
        cc.validate_events(tmp_path / "e.ndjson")
