"""The validation report: what it says of rows that fail several checks at once."""

from __future__ import annotations

import pandas as pd

import churn_connector as cc
from churn_connector import samples
from churn_connector._tasks import describe
from tests.conftest import make_events


def test_a_row_failing_a_null_and_a_type_check_is_reported_without_a_pandas_warning() -> None:
    # pandas 2.x (the oldest we allow) warned from pandera's concat of all-NA failure frames,
    # which -W error turned into a crash of the validation (found by the track property test)
    table = pd.DataFrame({"external_user_id": [0], "event_type": [None], "occurred_at": [0.0]})
    report = cc.validate_events(table)
    assert report.n_invalid == 1
    assert set(report.failures["check"]) == {"not_nullable", "occurred_at_type"}


def test_a_reports_summary_writes_its_counts_with_separators_and_in_the_singular_for_one(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(samples.sample_events(now, n_events=3000, n_users=300), now=now)
    head = report.summary().splitlines()[0]
    assert head == "events: 3,001 rows, 2,994 valid, 7 invalid, 1 exact duplicate (sent once)"
    assert repr(report) == f"<ValidationReport {head}>"
    one = cc.validate_events(make_events(now, n=1), now=now)
    assert one.summary().splitlines()[0] == "events: 1 row, 1 valid, 0 invalid"


def test_a_reports_failures_by_check_and_the_rest_are_counted_with_separators(
    now: pd.Timestamp,
) -> None:
    events = make_events(now, n=1500)
    events["event_type"] = "Bad Type"
    lines = cc.validate_events(events, now=now).summary().splitlines()
    assert lines[0] == "events: 1,500 rows, 0 valid, 1,500 invalid"
    assert lines[1] == "failures by check: event_type_pattern 1,500"
    assert lines[-1] == "  ... 1,495 more in .failures"


def test_a_tasks_one_line_summary_says_one_row_and_one_request_in_the_singular() -> None:
    one = {"kind": "events", "rows": 1, "counts": {"sent": 1}, "requests": 1}
    assert describe(one) == (
        "events: 1 row -> sent 1, skipped 0, invalid 0, rejected 0, failed 0; 1 request"
    )
    many = {"kind": "events", "rows": 1200, "counts": {"sent": 1200}, "requests": 3}
    assert describe(many).startswith("events: 1,200 rows -> sent 1,200,")
