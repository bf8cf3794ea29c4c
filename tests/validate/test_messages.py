"""Messages a person can act on: no Python internals in messages or result files, the CLI
names its own flags, near-miss column names get "did you mean", opt-in styles for column
names and event types, JSON text that does not parse shows its start, a dry run needs no
API, and the demo prints each failure once. Deliveries go over real HTTP to the sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main


@pytest.fixture
def api_env(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


@pytest.fixture
def no_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHURN_BASE_URL", raising=False)
    monkeypatch.delenv("CHURN_API_KEY", raising=False)


def hour_ago(now: pd.Timestamp) -> str:
    return (now - pd.Timedelta(hours=1)).isoformat()


# -- no Python internals ------------------------------------------------------------------


def test_the_rows_file_names_the_superseding_row_as_a_number(
    api_env: cc.Sandbox, tmp_path: Path
) -> None:
    users = pa.table(
        {"external_user_id": ["u1", "u2", "u1"], "email": ["a@x.io", "b@x.io", "c@x.io"]}
    )
    pq.write_table(users, tmp_path / "users.parquet")  # rows labelled 0, 1, 2 (numpy ints)
    rows = tmp_path / "rows.csv"
    args = ["send", "identities", str(tmp_path / "users.parquet"), "--rows", str(rows)]
    assert main([*args, "--duplicates", "keep_last", "-q"]) == 0
    assert pd.read_csv(rows)["error"][0] == "superseded by row 2"
    stored = api_env.users().set_index("external_user_id")["channels"].to_dict()
    assert [item["address"] for item in stored["u1"]] == ["c@x.io"]


def test_summary_lines_name_row_and_column_and_table_failures_stand_alone(
    now: pd.Timestamp,
) -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login", "Log In"],
            "occurred_at": [hour_ago(now)] * 2,
            "note": ["x", "y"],
        }
    )
    lines = cc.validate_events(df, now=now).summary().splitlines()
    assert lines[2].startswith("  unknown column 'note': drop it, or send it as")
    assert lines[3].startswith("  row 1, event_type: event_type 'Log In' must be")
    assert not any("None" in line or "table," in line for line in lines)


def test_a_number_column_of_phones_is_refused_saying_why_phones_are_text(
    client: cc.Client, sandbox: cc.Sandbox
) -> None:
    users = pd.DataFrame(
        {"external_user_id": ["u1"], "phone": pd.array([14155550100], dtype="Int64")}
    )
    result = client.identify(users)
    assert result.counts["invalid"] == 1 and len(sandbox.users()) == 0
    assert result.rows["error"][0] == (
        "[phone_type] phone must be text in E.164 form, e.g. '+14155550123', got the number "
        "14155550100: a number cannot hold the leading + (or a leading zero), so a number "
        "column loses them; cast the column to text"
    )


def test_values_in_messages_are_written_as_in_the_data(now: pd.Timestamp) -> None:
    df = pd.DataFrame(
        {"external_user_id": [1.5], "event_type": ["login"], "occurred_at": [hour_ago(now)]}
    )
    message = cc.validate_events(df, now=now).failures["message"][0]
    assert message.startswith("external_user_id must be a string or an integer, got 1.5 (float)")


# -- the CLI speaks CLI -----------------------------------------------------------------------


def test_the_cli_names_options_by_their_flags_and_python_by_its_keywords(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    epoch = int((now - pd.Timedelta(hours=1)).timestamp())
    df = pd.DataFrame(
        {"external_user_id": ["u1"], "event_type": ["login"], "occurred_at": [epoch], "x": [1]}
    )
    df.to_parquet(tmp_path / "events.parquet")
    report = tmp_path / "failures.csv"
    assert main(["validate", "events", str(tmp_path / "events.parquet"), "--report", str(report)])
    cli = pd.read_csv(report).set_index("check")["message"]
    python = cc.validate_events(df, now=now).failures.set_index("check")["message"]
    assert "so pass --epoch-unit s, ms, us or ns to say" in cli["occurred_at_type"]
    assert "so pass epoch_unit='s', 'ms', 'us' or 'ns' to say" in python["occurred_at_type"]
    assert cli["column_in_schema"] == (
        "unknown column 'x': drop it, or send it as 'properties.x' "
        "(--rename x=properties.x), or pass --extra-columns ignore"
    )
    assert python["column_in_schema"] == (
        "unknown column 'x': drop it, or send it as 'properties.x' "
        "(rename={'x': 'properties.x'}), or pass extra_columns='ignore'"
    )


def test_plain_http_names_the_flag_the_cli_has_for_it(
    tmp_path: Path,
    events: pd.DataFrame,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", "test-key")
    events.to_parquet(tmp_path / "events.parquet")
    args = ["send", "events", str(tmp_path / "events.parquet"), "--base-url", "http://api.test"]
    assert main(args) == 3
    assert capsys.readouterr().err.strip().endswith("use https:// or pass --allow-insecure-http")
    assert main([*args, "--allow-insecure-http", "--dry-run", "-q"]) == 0


# -- names: did you mean, and the styles ----------------------------------------------------


def test_near_miss_columns_suggest_ours_and_the_suggestion_delivers(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    path = tmp_path / "crm.csv"  # a CRM export, as HubSpot names its columns
    path.write_text("Record ID,Email Address,Phone Number\n101,a@x.io,+14155550100\n")
    failures = cc.validate_identities(path).failures.set_index("column")["message"]
    assert failures["Record ID"] == (
        "unknown column 'Record ID': did you mean 'external_user_id'? "
        "Rename it: rename={'Record ID': 'external_user_id'}"
    )
    assert "did you mean 'email'?" in failures["Email Address"]
    assert "did you mean 'phone'?" in failures["Phone Number"]
    rename = {"Record ID": "external_user_id", "Email Address": "email", "Phone Number": "phone"}
    assert client.identify(path, rename=rename).counts["sent"] == 1
    channels = sandbox.users()["channels"][0]
    assert [c["address"] for c in channels] == ["a@x.io", "+14155550100"]


def test_did_you_mean_never_names_a_column_the_table_has(now: pd.Timestamp) -> None:
    df = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "user_id": ["u1"],
            "event_type": ["login"],
            "occurred_at": [hour_ago(now)],
        }
    )
    message = cc.validate_events(df, now=now).failures["message"][0]
    assert message.startswith("unknown column 'user_id': drop it")


def test_rename_style_snake_reads_a_crm_export_and_keeps_property_keys(
    api_env: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        f"External User ID,Event Type,OccurredAt,Properties.Plan\nu1,login,{hour_ago(now)},pro\n"
    )
    assert main(["send", "events", str(path), "--rename-style", "snake", "-q"]) == 0
    stored = api_env.events()
    assert stored["external_user_id"].tolist() == ["u1"]
    assert stored["properties"][0] == {"Plan": "pro"}  # the key is data: kept as written


def test_rename_style_lower_and_explicit_pairs_combine(now: pd.Timestamp) -> None:
    df = pd.DataFrame({"USER_ID": ["u1"], "EVENT_TYPE": ["login"], "OCCURRED_AT": [hour_ago(now)]})
    report = cc.validate_events(
        df, now=now, rename={"USER_ID": "external_user_id"}, rename_style="lower"
    )
    assert report.ok
    assert list(report.valid.columns) == ["external_user_id", "event_type", "occurred_at"]


def test_event_type_style_snake_rewrites_tracker_names_and_notes_each_mapping(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    names = ["Order Completed", "orderCompleted", "order-completed", "Café Visit", "signup"]
    df = pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(5)],
            "event_type": names,
            "occurred_at": [hour_ago(now)] * 5,
        }
    )
    result = client.send_events(df, now=now, event_type_style="snake")
    assert sorted(sandbox.events()["event_type"]) == ["order_completed"] * 3 + ["signup"]
    assert result.counts["invalid"] == 1  # 'café_visit' still does not match the pattern
    assert "event_type 'café_visit' must be lowercase" in result.failures["error"].iloc[0]
    [note] = result.notes
    assert note["count"] == 4
    assert note["message"] == (
        "event_type_style='snake' rewrote the event types of 4 rows: "
        "'Order Completed' -> 'order_completed' (1), 'orderCompleted' -> 'order_completed' "
        "(1), 'order-completed' -> 'order_completed' (1), 'Café Visit' -> 'café_visit' (1)"
    )
    assert f"note: {note['message']}" in result.summary()


def test_the_cli_summary_notes_event_type_rewrites_in_its_own_words(
    api_env: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.csv"
    path.write_text(f"external_user_id,event_type,occurred_at\nu1,Add To Cart,{hour_ago(now)}\n")
    assert main(["send", "events", str(path), "--event-type-style", "snake"]) == 0
    out = capsys.readouterr().out
    assert "note: --event-type-style snake rewrote the event types of 1 rows" in out
    assert api_env.events()["event_type"].tolist() == ["add_to_cart"]


# -- JSON text ------------------------------------------------------------------------------


def test_duckdbs_struct_text_is_named_with_the_export_that_fixes_it(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        "CREATE TABLE events AS SELECT 'u1' AS external_user_id, 'login' AS event_type, "
        f"TIMESTAMPTZ '{hour_ago(now)}' AS occurred_at, "
        "{'plan': 'pro', 'seats': 3} AS properties"
    )
    struct, as_json = tmp_path / "struct.csv", tmp_path / "json.csv"
    con.execute(f"COPY events TO '{struct}' (HEADER)")
    message = cc.validate_events(struct, now=now).failures["message"][0]
    assert message == (
        "properties: \"{'plan': pro, 'seats': 3}\" is DuckDB's text for a STRUCT (or a Python "
        "dict written as text), not JSON: export JSON instead, in DuckDB to_json(properties) "
        "(or properties::JSON), from Python json.dumps(value)"
    )
    # the fix it names
    con.execute(
        "COPY (SELECT * REPLACE (to_json(properties) AS properties) FROM events) "
        f"TO '{as_json}' (HEADER)"
    )
    assert client.send_events(as_json, now=now).counts["sent"] == 1
    assert sandbox.events()["properties"][0] == {"plan": "pro", "seats": 3}


def test_json_text_that_does_not_parse_shows_its_start_and_where(now: pd.Timestamp) -> None:
    long = '{"description": "' + "x" * 60 + '", "plan": pro}'
    df = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login"] * 2,
            "occurred_at": [hour_ago(now)] * 2,
            "properties": ['{"plan": "pro",}', long],
        }
    )
    messages = cc.validate_events(df, now=now).failures["message"].tolist()
    assert messages == [
        'properties: \'{"plan": "pro",}\' is not valid JSON at character 15: '
        "trailing comma is not allowed",
        'properties: \'{"description": "xxxxxxxxxxxxxxxxxxxxxx…\' is not valid JSON at '
        "character 89: unexpected character, expected a JSON value",
    ]


# -- a dry run needs no API -------------------------------------------------------------------


def test_send_dry_run_needs_no_base_url_and_no_key(
    no_api: None, events: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events.to_parquet(tmp_path / "events.parquet")
    rows = tmp_path / "rows.csv"
    args = ["send", "events", str(tmp_path / "events.parquet"), "--dry-run", "--rows", str(rows)]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("dry run: events: 10 rows -> would_send 10, sent 0,")
    assert set(pd.read_csv(rows)["status"]) == {"would_send"}  # built, never sent
    assert cc.send_events(events, dry_run=True).counts["sent"] == 0


def test_without_a_base_url_only_a_dry_run_without_a_ledger_goes(
    no_api: None, events: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(cc.ConfigurationError, match="no base_url given and CHURN_BASE_URL"):
        cc.send_events(events)
    with pytest.raises(cc.ConfigurationError, match="a dry run with a ledger needs the base"):
        cc.send_events(events, dry_run=True, ledger=tmp_path / "ledger.sqlite")
    events.to_parquet(tmp_path / "events.parquet")
    assert main(["send", "events", str(tmp_path / "events.parquet")]) == 3
    assert "no --base-url given and CHURN_BASE_URL is not set" in capsys.readouterr().err


# -- the demo -------------------------------------------------------------------------------


def test_the_demo_prints_each_failure_once_fits_the_terminal_and_says_what_next(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "demo", "--out", str(tmp_path)],
        env={**os.environ, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    shown = out.split("=== what to try next")[0]
    assert shown.count("'Add To Cart'") == 1 and shown.count("'pigeon'") == 1
    commands = [line for line in out.splitlines() if line.startswith("      ")]
    # a path longer than the terminal cannot be wrapped: it stands alone on its line
    wide = [
        line
        for line in out.splitlines()
        if len(line) > 80 and line not in commands and len(line.split()) > 1
    ]
    assert not wide
    next_steps = out.split("=== what to try next")[1]
    assert f"churn-connector validate events {tmp_path / 'events.parquet'}" in next_steps
    assert "notebooks/" in next_steps
    assert "np.int64" not in out and "None" not in out
