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


def test_all_typed_formats_give_the_same_wire(
    export: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    export.to_parquet(tmp_path / "e.parquet")
    write_ndjson(export, tmp_path / "e.ndjson")
    expected = cc.events_to_wire(export, now=now)
    inputs = [
        pa.Table.from_pandas(export),
        tmp_path / "e.parquet",
        str(tmp_path / "e.ndjson"),
        iter([export.iloc[:3], export.iloc[3:]]),
    ]
    for data in inputs:
        assert cc.events_to_wire(data, now=now, slice_rows=2) == expected, data


def test_csv_gives_the_same_wire_as_the_same_text_in_a_frame(
    export: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    export.to_csv(tmp_path / "e.csv", index=False)
    counts = [None if pd.isna(v) else str(v) for v in export["properties.count"]]
    as_text = export.assign(**{"properties.count": pd.Series(counts, dtype=object)})
    from_csv = cc.events_to_wire(tmp_path / "e.csv", now=now, slice_rows=2)
    assert from_csv == cc.events_to_wire(as_text, now=now)


def test_csv_cells_stay_text_exactly_as_written(now: pd.Timestamp, tmp_path: Path) -> None:
    when = (now - pd.Timedelta(hours=1)).isoformat()
    (tmp_path / "e.csv").write_text(
        "external_user_id,event_type,occurred_at,properties.zip,properties.phone,"
        "properties.version,properties.label\n"
        f"000,login,{when},02139,+14155550100,1.10,NA\n"
        f"001,login,{when},,007,1e3,null\n"
    )
    wire = cc.events_to_wire(tmp_path / "e.csv", now=now)
    assert wire[0]["external_user_id"] == "000"
    assert wire[0]["properties"] == {
        "zip": "02139",
        "phone": "+14155550100",
        "version": "1.10",
        "label": "NA",
    }
    assert wire[1]["properties"] == {"phone": "007", "version": "1e3", "label": "null"}


def test_ndjson_integers_beyond_64_bits_are_refused_not_rounded(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    when = (now - pd.Timedelta(hours=1)).isoformat()
    record = {"external_user_id": "a", "event_type": "x", "occurred_at": when}
    line = orjson.dumps(record)[:-1] + b', "properties": {"id": 123456789012345678901234567890}}'
    (tmp_path / "e.ndjson").write_bytes(line + b"\n")
    report = cc.validate_events(tmp_path / "e.ndjson", now=now)
    assert "does not fit in 64 bits" in report.failures.iloc[0]["message"]


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
