"""The validation report: what it says of rows that fail several checks at once."""

from __future__ import annotations

import pandas as pd

import churn_connector as cc


def test_a_row_failing_a_null_and_a_type_check_is_reported_without_a_pandas_warning() -> None:
    # pandas 2.x (the oldest we allow) warned from pandera's concat of all-NA failure frames,
    # which -W error turned into a crash of the validation (found by the track property test)
    table = pd.DataFrame({"external_user_id": [0], "event_type": [None], "occurred_at": [0.0]})
    report = cc.validate_events(table)
    assert report.n_invalid == 1
    assert set(report.failures["check"]) == {"not_nullable", "occurred_at_type"}
