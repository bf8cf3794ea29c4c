"""``context_reserved_column`` names ``context.$message_id`` only when the table has that
column: a table without string column names (no columns at all, as an empty NDJSON part
read, or a frame with integer labels) is not told that a column it lacks is reserved."""

from __future__ import annotations

import pandas as pd
import pytest

import churn_connector as cc


@pytest.mark.parametrize(
    "frame",
    [pd.DataFrame(), pd.DataFrame(index=[0, 1]), pd.DataFrame({0: ["a"], 1: ["b"]})],
    ids=["no columns, no rows", "no columns, two rows", "integer column labels"],
)
def test_a_table_without_the_column_is_not_told_it_is_reserved(
    frame: pd.DataFrame, now: pd.Timestamp
) -> None:
    report = cc.validate_events(frame, now=now)
    assert "context_reserved_column" not in set(report.failures["check"])
    assert not report.failures["message"].str.contains("reserved").any()


def test_a_table_with_the_column_is_told_it_is_reserved_by_name(now: pd.Timestamp) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "event_type": ["login"],
            "occurred_at": [now - pd.Timedelta(hours=1)],
            "context.$message_id": ["m1"],
        }
    )
    failure = cc.validate_events(frame, now=now).failures.iloc[0]
    assert (failure["check"], failure["column"]) == (
        "context_reserved_column",
        "context.$message_id",
    )
    assert failure["message"] == (
        "column 'context.$message_id' is reserved: name it message_id instead"
    )
