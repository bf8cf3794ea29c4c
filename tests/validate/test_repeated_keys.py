"""A key named twice in one JSON object is refused on every path a JSON text comes in by
(CSV and NDJSON files, DataFrame columns of JSON text, identities' traits), by one check,
``repeated_key``, whose message names the row, the column and the key; nothing of such a row
is sent, and the other rows go as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._validate.checks import CHECKS


def events(now: pd.Timestamp, properties: list[Any]) -> pd.DataFrame:
    n = len(properties)
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": [(now - pd.Timedelta(hours=1)).isoformat()] * n,
            "properties": properties,
        }
    )


def only_failure(report: cc.ValidationReport) -> Any:
    (failure,) = report.failures.itertuples()
    return failure


def test_the_check_is_registered_with_a_rule_and_a_fix() -> None:
    info = CHECKS["repeated_key"]
    assert info.applies_to == "both" and "twice" in info.rule and "once" in info.fix


@pytest.mark.parametrize(
    ("text", "key", "where"),
    [
        ('{"plan":"a","plan":"b"}', "plan", ""),
        ('{"plan":"a","plan":"a"}', "plan", ""),  # the same value twice: still refused
        ('{"plan":"a","pl\\u0061n":"b"}', "plan", ""),  # one key once decoded
        ('{"cart":{"items":[{"sku":1,"sku":2}]}}', "sku", " (at properties.cart.items[0])"),
    ],
    ids=["two values", "same value", "escaped spelling", "nested"],
)
def test_a_csv_file_row_whose_properties_repeat_a_key_is_refused_by_name(
    now: pd.Timestamp, tmp_path: Path, text: str, key: str, where: str
) -> None:
    path = tmp_path / "events.csv"
    events(now, ['{"plan":"x"}', text, '{"plan":"y"}']).to_csv(path, index=False)
    report = cc.validate_events(path, now=now)
    assert (report.n_rows, report.n_valid) == (3, 2)
    failure = only_failure(report)
    # a CSV row is named by its line (the header is line 1)
    assert (failure.row, failure.column, failure.check) == (3, "properties", "repeated_key")
    assert failure.message.startswith(f"properties: the JSON text names the key {key!r} twice")
    assert where in failure.message and failure.message.endswith("keep the key once")


def test_a_csv_row_that_repeats_a_key_is_not_sent_and_the_others_are(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    # every text is plain, so the column takes the fast path (Arrow's JSON reader)
    path = tmp_path / "events.csv"
    texts = ['{"plan":"x"}', '{"plan":"a","plan":"b"}', '{"plan":"y"}']
    events(now, texts).to_csv(path, index=False)
    result = cc.send_events(path, sandbox.base_url, sandbox.api_key, now=now)
    assert list(result.rows["status"]) == ["sent", "invalid", "sent"]
    assert result.rows["error"].iloc[1].startswith("[repeated_key] properties:")
    stored = sandbox.events()
    assert sorted(stored["external_user_id"]) == ["u0", "u2"]
    assert [p["plan"] for p in stored.sort_values("external_user_id")["properties"]] == ["x", "y"]


@pytest.mark.parametrize("dtype", [object, "str", "string[pyarrow]"])
def test_a_dataframe_column_of_json_text_refuses_a_repeat(now: pd.Timestamp, dtype: Any) -> None:
    df = events(now, ['{"a":1}', '{"a":1, "b":{"c":2, "c":3}}'])
    df["properties"] = df["properties"].astype(dtype)
    report = cc.validate_events(df, now=now)
    failure = only_failure(report)
    assert (failure.row, failure.column, failure.check) == (1, "properties", "repeated_key")
    assert "names the key 'c' twice" in failure.message
    assert [w["external_user_id"] for w in cc.events_to_wire(df, now=now)] == ["u0"]


def test_a_context_text_that_repeats_a_key_is_refused_by_the_same_check(
    now: pd.Timestamp,
) -> None:
    df = events(now, [None, None])
    df["context"] = ['{"ip":"10.0.0.1"}', '{"ip":"10.0.0.1","ip":"10.0.0.2"}']
    failure = only_failure(cc.validate_events(df, now=now))
    assert (failure.row, failure.column, failure.check) == (1, "context", "repeated_key")


def test_an_identities_traits_text_that_repeats_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "traits": ['{"plan":"pro"}', '{"plan":"pro","plan":"free"}'],
        }
    ).to_csv(path, index=False)
    report = cc.validate_identities(path)
    failure = only_failure(report)
    assert (failure.row, failure.column, failure.check) == (3, "traits", "repeated_key")
    assert "names the key 'plan' twice" in failure.message


def ndjson(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def line(user: str, now: pd.Timestamp, extra: str = "") -> str:
    at = orjson.dumps((now - pd.Timedelta(hours=1)).isoformat()).decode()
    return f'{{"external_user_id":"{user}","event_type":"login","occurred_at":{at}{extra}}}'


def test_an_ndjson_line_naming_a_top_level_key_twice_is_refused_naming_that_column(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    # two event_type keys: which event it is would be a guess, so the row is refused
    path = ndjson(
        tmp_path / "e.ndjson", [line("u1", now), line("u2", now, ',"event_type":"logout"')]
    )
    report = cc.validate_events(path, now=now)
    assert (report.n_rows, report.n_valid) == (2, 1)
    failure = only_failure(report)
    # the row is the line's number, as for every NDJSON failure
    assert (failure.row, failure.column, failure.check) == (2, "event_type", "repeated_key")
    assert failure.message.startswith("the line names the key 'event_type' twice")


def test_an_ndjson_line_repeating_a_key_inside_properties_is_not_sent(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    path = ndjson(
        tmp_path / "e.ndjson",
        [
            line("u1", now, ',"properties":{"a":{"x":1,"x":1}}'),
            line("u2", now, ',"properties":{"t":"10:00"}'),
        ],
    )
    result = cc.send_events(path, sandbox.base_url, sandbox.api_key, now=now)
    assert list(result.rows["status"]) == ["invalid", "sent"]
    assert result.rows["error"].iloc[0] == (
        "[repeated_key] properties: the JSON text names the key 'x' twice in one object (at "
        "properties.a): which value is meant is a guess (RFC 8259 leaves it to each reader); "
        "keep the key once"
    )
    assert list(sandbox.events()["external_user_id"]) == ["u2"]


def test_a_channels_text_whose_item_repeats_a_key_is_refused_by_that_check_alone() -> None:
    # read last-one-wins, the item would be an sms channel with an email address: the row
    # fails repeated_key only, not the item checks of a guessed item
    df = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "channels": [
                '[{"channel":"email","address":"a@b.co"}]',
                '[{"channel":"email","channel":"sms","address":"a@b.co"}]',
            ],
        }
    )
    failure = only_failure(cc.validate_identities(df))
    assert (failure.row, failure.column, failure.check) == (1, "channels", "repeated_key")
    assert "names the key 'channel' twice in one object (at channels[0])" in failure.message


def test_a_csv_cell_read_as_json_by_dtypes_refuses_a_repeat(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "events.csv"
    df = events(now, [None, None]).drop(columns="properties")
    df["properties.cart"] = ['{"sku":1}', '{"sku":1,"sku":2}']
    df.to_csv(path, index=False)
    report = cc.validate_events(path, now=now, dtypes={"properties.cart": "json"})
    failure = only_failure(report)
    assert (failure.row, failure.column, failure.check) == (3, "properties.cart", "repeated_key")
    assert failure.message.startswith("properties.cart: the JSON text names the key 'sku' twice")
