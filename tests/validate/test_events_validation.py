"""validate_events: every rule has a rejected side naming row, column and check, and an accepted side."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc
from churn_connector._validate.pandera import schema_errors


def one_row(now: pd.Timestamp, **overrides: object) -> pd.DataFrame:
    row: dict[str, object] = {
        "external_user_id": "u1",
        "event_type": "login",
        "occurred_at": (now - pd.Timedelta(hours=1)).isoformat(),
    }
    row.update(overrides)
    return pd.DataFrame({k: [v] for k, v in row.items()}, index=["r0"])


def checks_of(report: cc.ValidationReport) -> set[str]:
    return set(report.failures["check"])


def test_valid_table_is_ok_and_keeps_every_row(events: pd.DataFrame, now: pd.Timestamp) -> None:
    report = cc.validate_events(events, now=now)
    assert report.ok
    assert report.valid.index.equals(events.index)


def test_failure_names_row_label_column_and_check(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, event_type="Login"), now=now)
    failure = report.failures.iloc[0]
    assert (failure["row"], failure["column"], failure["check"]) == (
        "r0",
        "event_type",
        "event_type_pattern",
    )
    assert "snake_case" in failure["message"]


@pytest.mark.parametrize("bad", ["login\n", "Login", "log in", "login_", "_login", "a__b", ""])
def test_event_type_must_fully_match_the_pattern(now: pd.Timestamp, bad: str) -> None:
    report = cc.validate_events(one_row(now, event_type=bad), now=now)
    assert "event_type_pattern" in checks_of(report)


@pytest.mark.parametrize("good", ["login", "page_view", "a1_b2_c3", "404"])
def test_event_type_accepts_snake_case(now: pd.Timestamp, good: str) -> None:
    assert cc.validate_events(one_row(now, event_type=good), now=now).ok


def test_event_type_must_be_a_string(now: pd.Timestamp) -> None:
    df = one_row(now, event_type=5).astype({"event_type": object})
    assert "event_type_type" in checks_of(cc.validate_events(df, now=now))


def test_float_user_ids_are_rejected(now: pd.Timestamp) -> None:
    df = one_row(now, external_user_id=12345.0)
    report = cc.validate_events(df, now=now)
    assert checks_of(report) == {"external_user_id_type"}
    assert "Int64" in report.failures.iloc[0]["message"]


def test_integer_and_nullable_integer_ids_are_accepted(now: pd.Timestamp) -> None:
    df = one_row(now, external_user_id=7)
    assert cc.validate_events(df, now=now).ok
    assert cc.validate_events(df.astype({"external_user_id": "Int64"}), now=now).ok


def test_bool_user_id_is_rejected(now: pd.Timestamp) -> None:
    df = one_row(now, external_user_id=True)
    assert "external_user_id_type" in checks_of(cc.validate_events(df, now=now))


def test_blank_user_id_is_rejected(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, external_user_id="  "), now=now)
    assert checks_of(report) == {"external_user_id_not_blank"}


def test_missing_required_value_is_reported_as_not_nullable(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, external_user_id=None), now=now)
    assert checks_of(report) == {"not_nullable"}
    assert report.failures.iloc[0]["column"] == "external_user_id"


def test_missing_required_column_invalidates_every_row(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    report = cc.validate_events(events.drop(columns="event_type"), now=now)
    assert report.n_invalid == len(events)
    assert report.failures.iloc[0]["column"] == "event_type"
    assert report.failures.iloc[0]["check"] == "column_in_dataframe"


def test_unknown_column_is_named_with_its_fix(events: pd.DataFrame, now: pd.Timestamp) -> None:
    report = cc.validate_events(events.assign(plan="pro"), now=now)
    assert report.n_invalid == len(events)
    failure = report.failures.iloc[0]
    assert failure["column"] == "plan"
    assert "properties.plan" in failure["message"]


def test_unknown_columns_can_be_ignored_explicitly(events: pd.DataFrame, now: pd.Timestamp) -> None:
    assert cc.validate_events(events.assign(plan="pro"), now=now, extra_columns="ignore").ok


def test_naive_datetimes_are_invalid_without_a_zone(now: pd.Timestamp) -> None:
    naive = (now - pd.Timedelta(hours=1)).tz_localize(None)
    df = pd.DataFrame({"external_user_id": ["u"], "event_type": ["x"], "occurred_at": [naive]})
    report = cc.validate_events(df, now=now)
    assert checks_of(report) == {"occurred_at_naive"}
    assert "naive_timezone" in report.failures.iloc[0]["message"]


def test_naive_datetimes_are_valid_with_an_explicit_zone(now: pd.Timestamp) -> None:
    naive = (now - pd.Timedelta(hours=1)).tz_convert("Europe/Paris").tz_localize(None)
    df = pd.DataFrame({"external_user_id": ["u"], "event_type": ["x"], "occurred_at": [naive]})
    assert cc.validate_events(df, now=now, naive_timezone="Europe/Paris").ok


def test_naive_strings_are_invalid_without_a_zone(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, occurred_at="2026-11-20 10:00:00"), now=now)
    assert checks_of(report) == {"occurred_at_naive"}


def test_nonexistent_local_time_is_reported(now: pd.Timestamp) -> None:
    # 02:30 did not exist in Paris on 2026-03-29 (clocks jumped from 02:00 to 03:00)
    df = one_row(now, occurred_at="2026-03-29T02:30:00")
    report = cc.validate_events(
        df, now=pd.Timestamp("2026-04-01", tz="UTC"), naive_timezone="Europe/Paris"
    )
    assert checks_of(report) == {"occurred_at_local_time"}


@pytest.mark.parametrize("bad", ["yesterday", "2026-02-30T10:00:00Z", "2026-11-20T10:00:00+1"])
def test_unparseable_timestamps_are_reported(now: pd.Timestamp, bad: str) -> None:
    report = cc.validate_events(one_row(now, occurred_at=bad), now=now)
    assert checks_of(report) == {"occurred_at_format"}


def test_epoch_numbers_are_rejected_as_ambiguous(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, occurred_at=1_700_000_000), now=now)
    assert checks_of(report) == {"occurred_at_type"}


def test_time_window_edges_are_inclusive(now: pd.Timestamp) -> None:
    edges = [now - pd.Timedelta(days=30), now + pd.Timedelta(minutes=5)]
    df = pd.DataFrame(
        {"external_user_id": ["a", "b"], "event_type": ["x", "x"], "occurred_at": edges}
    )
    assert cc.validate_events(df, now=now).ok


def test_one_millisecond_outside_the_window_is_rejected(now: pd.Timestamp) -> None:
    ms = pd.Timedelta(milliseconds=1)
    outside = [now - pd.Timedelta(days=30) - ms, now + pd.Timedelta(minutes=5) + ms]
    df = pd.DataFrame(
        {"external_user_id": ["a", "b"], "event_type": ["x", "x"], "occurred_at": outside}
    )
    report = cc.validate_events(df, now=now)
    assert list(report.failures["check"]) == ["occurred_at_window"] * 2


def test_window_defaults_to_the_current_time() -> None:
    old = pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=31)
    df = pd.DataFrame({"external_user_id": ["a"], "event_type": ["x"], "occurred_at": [old]})
    assert checks_of(cc.validate_events(df)) == {"occurred_at_window"}


def test_properties_array_is_rejected(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, properties="[]"), now=now)
    assert checks_of(report) == {"properties_json"}


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": {"b": float("nan")}}, "properties.a.b"),
        ({"a": [1, float("inf")]}, "properties.a[1]"),
        ({"a": b"raw"}, "properties.a"),
        ({"a": {1, 2}}, "properties.a"),
        ({1: "x"}, "properties"),
        ({"a": decimal.Decimal("1.5")}, "properties.a"),
        ({"a": object()}, "properties.a"),
        ({"a": 2**70}, "properties.a"),
    ],
)
def test_values_json_cannot_carry_make_the_row_invalid_with_their_path(
    now: pd.Timestamp, value: dict[object, object], path: str
) -> None:
    report = cc.validate_events(one_row(now, properties=value), now=now)
    assert checks_of(report) == {"properties_json"}
    assert report.failures.iloc[0]["message"].startswith(path + ":")


def test_nan_literal_in_a_json_string_is_rejected(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, properties='{"a": NaN}'), now=now)
    assert checks_of(report) == {"properties_json"}


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"a": 12345678901234567890123}', "properties.a"),
        ('{"a": {"b": [18446744073709551616]}}', "properties.a.b[0]"),
        ('{"a": 1, "b": -9223372036854775809}', "properties.b"),
    ],
)
def test_json_text_integer_beyond_64_bits_is_refused_not_rounded(
    now: pd.Timestamp, text: str, path: str
) -> None:
    report = cc.validate_events(one_row(now, properties=text), now=now)
    assert checks_of(report) == {"properties_json"}
    assert report.failures.iloc[0]["message"].startswith(path + ": integer")


def test_infinite_flattened_property_is_rejected(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, **{"properties.x": float("inf")}), now=now)
    assert checks_of(report) == {"property_value_json"}


def test_null_flattened_properties_are_valid(now: pd.Timestamp) -> None:
    df = one_row(now, **{"properties.x": np.nan, "properties.y": None})
    assert cc.validate_events(df, now=now).ok


def test_key_in_both_properties_and_a_flat_column_is_one_conflict(now: pd.Timestamp) -> None:
    df = one_row(now, properties={"plan": "a"}, **{"properties.plan": "b", "properties.x": 1})
    failures = cc.validate_events(df, now=now).failures
    assert list(failures["check"]) == ["properties_key_conflict"]
    assert list(failures["column"]) == ["properties"]


def test_message_id_must_not_be_blank(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, message_id=""), now=now)
    assert checks_of(report) == {"message_id_not_blank"}


def test_message_id_inside_context_is_refused(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, context={"$message_id": "x"}), now=now)
    assert "context_reserved_key" in checks_of(report)


def test_reused_message_id_with_other_content_is_invalid(now: pd.Timestamp) -> None:
    df = pd.concat([one_row(now, message_id="m1"), one_row(now, message_id="m1", event_type="y")])
    report = cc.validate_events(df.reset_index(drop=True), now=now)
    assert list(report.failures["check"]) == ["message_id_conflict"]
    assert report.failures.iloc[0]["row"] == 1


def test_exact_duplicate_rows_are_valid_and_counted(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    report = cc.validate_events(pd.concat([events, events.iloc[:3]]), now=now)
    assert report.ok
    assert report.duplicates == 3
    assert "3 exact duplicates" in report.summary()


def test_duplicate_index_labels_do_not_hide_failures(now: pd.Timestamp) -> None:
    df = pd.concat([one_row(now), one_row(now, event_type="BAD")])  # both labelled "r0"
    report = cc.validate_events(df, now=now)
    assert report.n_invalid == 1
    assert list(report.failures["position"]) == [1]


def test_streamed_validation_equals_whole_frame_validation(now: pd.Timestamp) -> None:
    df = pd.concat([one_row(now, event_type=t) for t in ["ok", "BAD", "ok", "x\n", "ok"]])
    df = df.reset_index(drop=True).assign(plan="p")
    whole = cc.validate_events(df, now=now)
    sliced = cc.validate_events(df, now=now, slice_rows=2)
    pd.testing.assert_frame_equal(whole.failures, sliced.failures)
    assert whole.duplicates == sliced.duplicates


def test_every_slice_checks_flattened_columns(now: pd.Timestamp) -> None:
    # a schema is reused across slices; a failure in one slice must not disable the
    # properties.<key> / context.<key> checks of the next ones
    df = pd.concat([one_row(now)] * 4, ignore_index=True)
    df["properties.n"] = pd.Series([2**70, "ok", 2**70, 2**70], dtype=object)
    df["context.ip"] = pd.Series([{1}, {2}, "ok", {3}], dtype=object)
    whole = cc.validate_events(df, now=now)
    sliced = cc.validate_events(df, now=now, slice_rows=1)
    assert whole.n_invalid == sliced.n_invalid == 4
    pd.testing.assert_frame_equal(whole.failures, sliced.failures)
    assert cc.events_to_wire(df, now=now, slice_rows=1) == []


def test_validation_cannot_be_disabled_by_pandera_environment() -> None:
    code = (
        "import pandas as pd, churn_connector as cc\n"
        "now = pd.Timestamp.now(tz='UTC')\n"
        "df = pd.DataFrame({'external_user_id': ['u'], 'event_type': ['BAD'], 'occurred_at': [now]})\n"
        "print(sorted(set(cc.validate_events(df, now=now).failures['check'])))\n"
    )
    env = {
        **os.environ,
        "PANDERA_VALIDATION_ENABLED": "False",
        "PANDERA_VALIDATION_DEPTH": "SCHEMA_ONLY",
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "['event_type_pattern']"


def test_datetime_objects_in_any_zone_are_accepted(now: pd.Timestamp) -> None:
    when = (
        (now - pd.Timedelta(hours=2)).to_pydatetime().astimezone(dt.timezone(dt.timedelta(hours=9)))
    )
    df = one_row(now, occurred_at=when).astype({"occurred_at": object})
    assert cc.validate_events(df, now=now).ok


def test_report_raise_for_failures_raises_package_error(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, event_type="BAD"), now=now)
    with pytest.raises(cc.DataValidationError, match="1 invalid"):
        report.raise_for_failures()


def test_report_html_lists_failures(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, event_type="BAD"), now=now)
    assert "event_type_pattern" in report._repr_html_()


def test_exported_schema_validates_raw_frames(now: pd.Timestamp) -> None:
    schema = cc.events_schema(now=now)
    with pytest.raises(schema_errors()) as info:
        schema.validate(one_row(now, event_type="BAD"), lazy=True)
    assert set(info.value.failure_cases["check"]) == {"event_type_pattern"}


def test_a_lone_surrogate_invalidates_only_its_own_row(now: pd.Timestamp) -> None:
    df = pd.concat([one_row(now), one_row(now)], ignore_index=True)
    df["properties.note"] = pd.Series(["fine", "bad \ud83d"], dtype=object)
    report = cc.validate_events(df, now=now)
    assert report.n_invalid == 1
    assert list(report.failures["position"]) == [1]
    assert "surrogate" in report.failures.iloc[0]["message"]


@pytest.mark.parametrize("years", [585, -585])
def test_far_away_timestamps_do_not_wrap_into_the_window(now: pd.Timestamp, years: int) -> None:
    # built at ms resolution from the start: pandas 2.x Timedeltas are ns-only and overflow here
    shift = np.timedelta64(round(365.25 * 24 * years), "h")
    start = np.array([now.tz_convert(None).to_datetime64()], dtype="datetime64[ms]")
    far = pd.Series(start + shift).dt.tz_localize("UTC")
    df = pd.DataFrame({"external_user_id": ["a"], "event_type": ["x"], "occurred_at": far})
    assert checks_of(cc.validate_events(df, now=now)) == {"occurred_at_window"}


def test_message_id_inside_a_context_json_string_is_refused(now: pd.Timestamp) -> None:
    report = cc.validate_events(one_row(now, context='{"$message_id": "x"}'), now=now)
    assert "context_reserved_key" in checks_of(report)


def test_an_unknown_zone_name_is_a_configuration_error(now: pd.Timestamp) -> None:
    with pytest.raises(cc.ConfigurationError, match="'Mars/Base' is not a known IANA zone"):
        cc.validate_events(one_row(now), now=now, naive_timezone="Mars/Base")


def test_arrow_and_categorical_timestamps_are_accepted(now: pd.Timestamp) -> None:
    when = pd.Series([now - pd.Timedelta(hours=1)])
    arrow = when.astype(pd.ArrowDtype(pa.timestamp("ms", tz="UTC")))
    categorical = when.map(lambda t: t.isoformat()).astype("category")
    for column in (arrow, categorical):
        df = pd.DataFrame({"external_user_id": ["a"], "event_type": ["x"], "occurred_at": column})
        assert cc.validate_events(df, now=now).ok


def test_a_repeated_column_name_is_reported_not_crashed_on(now: pd.Timestamp) -> None:
    df = pd.concat([one_row(now), one_row(now)[["event_type"]]], axis=1)
    report = cc.validate_events(df, now=now)
    assert list(report.failures["check"]) == ["column_unique"]
    assert report.n_invalid == 1


def test_an_unknown_column_named_like_an_encoding_error_is_just_unknown(now: pd.Timestamp) -> None:
    df = one_row(now).assign(**{"surrogates not allowed": 1})
    assert checks_of(cc.validate_events(df, now=now)) == {"column_in_schema"}


def test_a_column_name_with_a_lone_surrogate_is_reported(now: pd.Timestamp) -> None:
    df = one_row(now).assign(extra=1)
    df.columns = pd.Index([*df.columns[:-1], "properties.x\ud800"], dtype=object)
    report = cc.validate_events(df, now=now)
    assert list(report.failures["check"]) == ["column_name"]
    assert report.n_invalid == 1


def test_one_exact_duplicate_is_counted_in_the_singular(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    report = cc.validate_events(pd.concat([events, events.iloc[:1]]), now=now)
    assert ", 1 exact duplicate (sent once)" in report.summary()
