"""The sample exports: what a first call in a notebook types works, or says what to type."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector import samples


def test_sample_events_leads_up_to_now_by_default() -> None:
    before = pd.Timestamp.now(tz="UTC")
    events = samples.sample_events(n_events=50)
    newest = pd.to_datetime(
        events["occurred_at"], utc=True, format="ISO8601", errors="coerce"
    ).max()
    assert len(events) >= 50  # and a repeated row, one of its bad rows
    assert before - pd.Timedelta(days=21) < newest <= pd.Timestamp.now(tz="UTC")


def test_a_count_in_place_of_now_says_how_to_ask_for_it() -> None:
    with pytest.raises(TypeError, match=r"sample_events\(n_events=50\)"):
        samples.sample_events(50)  # type: ignore[arg-type]


def test_a_naive_now_is_refused_it_names_no_instant() -> None:
    with pytest.raises(TypeError, match="no time zone"):
        samples.sample_events(dt.datetime(2026, 11, 1, 12, 0))


def test_the_same_now_and_seed_give_the_same_export() -> None:
    now = pd.Timestamp("2026-11-20T12:00:00Z")
    pd.testing.assert_frame_equal(
        samples.sample_events(now, n_events=100), samples.sample_events(now, n_events=100)
    )


def na_value(column: pd.Series) -> object:
    """The missing value of ``column``'s dtype (numpy's float: NaN)."""
    return getattr(column.dtype, "na_value", float("nan"))


def test_the_samples_have_one_missing_value_the_one_the_results_frames_have() -> None:
    # pd.NA (shown <NA>), as in res.rows and report.failures: never None here, NaN there
    now = pd.Timestamp("2026-11-20T12:00:00Z")
    users, events = samples.sample_users(), samples.sample_events(now, n_events=500)
    failures = cc.validate_identities(users).failures
    assert na_value(failures["value"]) is pd.NA  # the frames' convention
    for frame in (users, events):
        for name, column in frame.items():
            if column.isna().any():
                assert na_value(column) is pd.NA, (name, column.dtype)
        shown = frame.to_string()
        assert "<NA>" in shown and "NaN" not in shown and "None" not in shown


@pytest.mark.parametrize("n_events", [0, 1, 2, 3, 4, 5])
def test_a_few_sample_events_are_a_few_rows_and_one_repeat(n_events: int) -> None:
    frame = samples.sample_events(n_events=n_events)
    assert len(frame) == n_events + (1 if n_events else 0)
    if n_events:
        assert frame.iloc[-1].equals(frame.iloc[min(5, n_events - 1)])  # exported twice
    assert cc.validate_events(frame).n_rows == len(frame)
