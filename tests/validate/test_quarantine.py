"""A data-quality gate: invalid rows set aside with their reasons, fixed, validated again, sent."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector import samples


@pytest.fixture
def report(now: pd.Timestamp) -> cc.ValidationReport:
    return cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)


def test_the_invalid_rows_come_with_their_checks_and_reasons(
    report: cc.ValidationReport,
) -> None:
    bad = report.quarantine()
    assert list(bad.index) == list(report.invalid.index) == [11, 57, 123, 456, 789, 1011, 1213]
    assert list(bad.columns) == [*report.valid.columns, "failed_checks", "reasons"]
    assert bad.loc[11, "event_type"] == "Add To Cart"  # the row as it was read
    assert bad.loc[11, "failed_checks"] == "event_type_pattern"
    assert "must be lowercase snake_case" in str(bad.loc[11, "reasons"])
    assert bad.loc[123, "failed_checks"] == "occurred_at_naive"
    assert "naive_timezone" in str(bad.loc[123, "reasons"])  # the reason says how to fix it


def test_a_row_with_several_problems_lists_each(now: pd.Timestamp, events: pd.DataFrame) -> None:
    events.loc[3, ["event_type", "external_user_id"]] = ["Sign Up", " "]
    bad = cc.validate_events(events, now=now).quarantine()
    assert set(str(bad.loc[3, "failed_checks"]).split(", ")) == {
        "event_type_pattern",
        "external_user_id_not_blank",
    }
    assert str(bad.loc[3, "reasons"]).count(" | ") == 1


def test_a_failure_of_the_whole_table_is_a_reason_of_every_row(
    now: pd.Timestamp, events: pd.DataFrame
) -> None:
    events.loc[0, "event_type"] = "Bad"
    bad = cc.validate_events(events.drop(columns="occurred_at"), now=now).quarantine()
    assert len(bad) == len(events)
    assert bad["failed_checks"].str.startswith("column_in_dataframe").all()
    assert bad.loc[0, "failed_checks"] == "column_in_dataframe, event_type_pattern"
    assert bad["reasons"].str.contains("occurred_at").all()


def test_a_clean_table_quarantines_nothing(now: pd.Timestamp, events: pd.DataFrame) -> None:
    bad = cc.validate_events(events, now=now).quarantine()
    assert bad.empty
    assert list(bad.columns) == [*events.columns, "failed_checks", "reasons"]


@pytest.mark.parametrize("name", ["bad.csv", "bad.parquet", "nested/bad.csv.gz"])
def test_the_quarantine_file_keeps_row_labels_and_reasons(
    report: cc.ValidationReport, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    report.quarantine(path)
    back = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
    assert list(back.columns[:1]) == ["row"]
    assert back["row"].tolist() == [11, 57, 123, 456, 789, 1011, 1213]
    assert back["failed_checks"].tolist()[0] == "event_type_pattern"


def test_rows_of_mixed_types_still_go_to_parquet(now: pd.Timestamp, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["a", "b", "c"],
            "event_type": ["login", "login", "login"],
            "occurred_at": [now - pd.Timedelta(minutes=1)] * 3,
            # a dict, a list and text in one column: that is why they are bad
            "properties": [{"x": float("nan")}, [1, 2], None],
        }
    )
    report = cc.validate_events(frame, now=now)
    report.quarantine(tmp_path / "bad.parquet")
    back = pd.read_parquet(tmp_path / "bad.parquet")
    assert back["row"].tolist() == [0, 1]
    # as people read them, not as Python writes them ({'x': nan})
    assert back["properties"].tolist() == ['{"x": NaN}', "[1, 2]"]


def test_the_quarantine_file_must_be_csv_or_parquet(
    report: cc.ValidationReport, tmp_path: Path
) -> None:
    with pytest.raises(cc.ConfigurationError, match=r"\.csv or \.parquet"):
        report.quarantine(tmp_path / "bad.xlsx")
    assert not (tmp_path / "bad.xlsx").exists()


def test_rows_read_from_a_csv_keep_their_line_numbers(
    now: pd.Timestamp, events: pd.DataFrame, tmp_path: Path
) -> None:
    events.loc[4, "event_type"] = "Page View"
    source = tmp_path / "export.csv"
    events.to_csv(source, index=False)
    report = cc.validate_events(source, now=now, dtypes={"properties.seq": "int64"})
    assert report.quarantine().index.tolist() == [6]  # the header is line 1


def test_fixed_rows_join_the_valid_ones_and_are_sent(
    report: cc.ValidationReport, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    fixed = report.invalid.copy()
    fixed["event_type"] = fixed["event_type"].str.strip().str.lower().str.replace(" ", "_")
    again = cc.validate_events(fixed, now=now)
    assert again.valid.index.tolist() == [11, 57]
    to_send = pd.concat([report.valid, again.valid]).sort_index()
    result = cc.Client(sandbox.base_url, sandbox.api_key).send_events(to_send, now=now)
    assert result.ok
    assert result.counts["sent"] == report.n_valid - report.duplicates + 2
    assert sandbox.stats()["stored"] == result.counts["sent"]
