"""Consent is never assumed: a blank consent cell is not consent, defaults are said aloud.

A blank ``<channel>_opted_in`` cell beside an address makes the row invalid unless the caller
chose ``blank_consent``; an address without a consent column, and a ``channels`` item without
``opted_in``, follow the contract's default and the report's notes count them;
``require_consent=True`` refuses both. Delivery is checked against the sandbox over HTTP: what
it holds after a first and a second sync.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._core.types import BlankConsent, Note

POLICIES: tuple[BlankConsent, ...] = get_args(BlankConsent)
BLANK_FIX = "blank_consent='omit_channel'"


def users(**columns: Any) -> pd.DataFrame:
    """An identities table; object columns keep each cell as given (None stays None)."""
    n = len(next(iter(columns.values())))
    ids = pd.Series([f"u{i}" for i in range(n)], dtype=object)
    data = {
        k: v
        if isinstance(v, pd.Series | pd.api.extensions.ExtensionArray)
        else pd.Series(v, dtype=object)
        for k, v in columns.items()
    }
    return pd.DataFrame({"external_user_id": ids, **data})


def items_of(body: dict[str, Any], channel: str) -> list[dict[str, Any]]:
    return [item for item in body.get("channels", []) if item["channel"] == channel]


def note_of(notes: list[Note], kind: str, column: str) -> Note:
    (found,) = [n for n in notes if n["kind"] == kind and n["column"] == column]
    return found


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- blank cells: invalid by default ------------------------------------------------------------
@pytest.mark.parametrize(
    "consent",
    [
        pd.Series([True, None], dtype=object),
        pd.Series([1.0, np.nan]),
        pd.array([True, None], dtype="boolean"),
        pd.Series([True, pd.NA], dtype=object),
        pd.Series(["yes", ""], dtype=object),
        pd.Series(["yes", " \t "], dtype=object),
        pd.Series(["yes", None], dtype="string"),
        pd.Series(["yes", "  "], dtype="string[pyarrow]"),
    ],
    ids=["None", "NaN", "boolean NA", "pd.NA", "empty text", "white space", "string", "arrow"],
)
def test_a_blank_consent_cell_beside_an_address_makes_the_row_invalid(consent: Any) -> None:
    df = users(email=["a@b.co", "b@b.co"], email_opted_in=consent)
    report = cc.validate_identities(df)
    (failure,) = report.failures.to_dict("records")
    assert (failure["row"], failure["column"], failure["check"]) == (
        1,
        "email_opted_in",
        "email_opted_in_blank",
    )
    assert "email_opted_in is blank" in failure["message"] and BLANK_FIX in failure["message"]
    assert [b["external_user_id"] for b in cc.identities_to_wire(df)] == ["u0"]


def test_a_blank_consent_cell_without_the_address_is_fine() -> None:
    df = users(phone=["+14155550100", None], sms_opted_in=[False, None])
    assert cc.validate_identities(df).ok
    assert cc.identities_to_wire(df)[1] == {"external_user_id": "u1"}


def test_each_channel_has_its_own_blank_check() -> None:
    df = users(
        email=["a@b.co"],
        email_opted_in=[True],
        phone=["+14155550100"],
        sms_opted_in=[None],
        pushToken=["tok"],
        push_opted_in=[""],
    )
    failures = cc.validate_identities(df).failures
    assert sorted(zip(failures["column"], failures["check"], strict=True)) == [
        ("push_opted_in", "push_opted_in_blank"),
        ("sms_opted_in", "sms_opted_in_blank"),
    ]


def test_a_bad_address_with_a_blank_cell_reports_both() -> None:
    df = users(email=["not an email"], email_opted_in=[None])
    checks = set(cc.validate_identities(df).failures["check"])
    assert checks == {"email_pattern", "email_opted_in_blank"}


# -- the caller's policies ---------------------------------------------------------------------
def test_omit_channel_leaves_only_that_channel_out_and_says_how_many() -> None:
    df = users(
        email=["a@b.co", "b@b.co", "c@b.co"],
        email_opted_in=[None, False, ""],
        phone=["+14155550100", "+14155550101", None],
        sms_opted_in=[True, True, None],
    )
    report = cc.validate_identities(df, blank_consent="omit_channel")
    assert report.ok
    bodies = cc.identities_to_wire(df, blank_consent="omit_channel")
    assert [items_of(b, "email") for b in bodies] == [
        [],
        [{"channel": "email", "address": "b@b.co", "opted_in": False}],
        [],
    ]
    assert bodies[0]["channels"] == [
        {"channel": "sms", "address": "+14155550100", "opted_in": True}
    ]
    note = note_of(report.notes, "blank_consent_omitted", "email_opted_in")
    assert note["count"] == 2
    assert note["message"].startswith("2 email channels are left out of the request")


def test_opted_in_sends_blanks_opted_in_because_the_caller_said_so() -> None:
    df = users(email=["a@b.co", "b@b.co"], email_opted_in=[None, False])
    report = cc.validate_identities(df, blank_consent="opted_in")
    bodies = cc.identities_to_wire(df, blank_consent="opted_in")
    assert [items_of(b, "email")[0]["opted_in"] for b in bodies] == [True, False]
    note = note_of(report.notes, "blank_consent_opted_in", "email_opted_in")
    assert note["count"] == 1 and "blank_consent='opted_in'" in note["message"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"blank_consent": "omit"}, "blank_consent must be one of 'error', 'omit_channel'"),
        ({"blank_consent": None}, "blank_consent must be one of"),
        ({"require_consent": "yes"}, "require_consent must be True or False"),
    ],
)
def test_bad_consent_options_are_refused_naming_the_choices(
    options: dict[str, Any], message: str, sandbox: cc.Sandbox
) -> None:
    df = users(email=["a@b.co"], email_opted_in=[True])
    calls: list[Callable[[], object]] = [
        lambda: cc.validate_identities(df, **options),
        lambda: cc.identities_to_wire(df, **options),
        lambda: cc.identify(df, sandbox.base_url, sandbox.api_key, **options),
        lambda: cc.identities_schema(**options),
    ]
    for call in calls:
        with pytest.raises(cc.ConfigurationError, match=message):
            call()
    assert sandbox.identify_log().empty


# -- CSV, pandas and Arrow inputs with blank cells ---------------------------------------------
CSV_BLANKS = (
    "external_user_id,email,email_opted_in,phone,sms_opted_in\n"
    "1,a@example.com,true,+14155550100,no\n"
    "2,b@example.com,,+14155550101,yes\n"  # an empty cell
    '3,c@example.com,"",,\n'  # a quoted empty cell; no phone, so its blank is fine
    '4,d@example.com,"   ",+14155550103,0\n'  # white space only
    "5,,false,+14155550104,\n"  # an opt-out without an address; a blank sms cell
)


def test_csv_blank_cells_are_not_consent(tmp_path: Path) -> None:
    path = write(tmp_path / "users.csv", CSV_BLANKS)
    report = cc.validate_identities(path)
    failing = sorted(zip(report.failures["row"], report.failures["check"], strict=True))
    assert failing == [  # rows are labelled by their line in the file
        (3, "email_opted_in_blank"),
        (4, "email_opted_in_blank"),
        (5, "email_opted_in_blank"),
        (6, "sms_opted_in_blank"),
    ]
    (body,) = cc.identities_to_wire(path)
    assert body["channels"] == [
        {"channel": "email", "address": "a@example.com", "opted_in": True},
        {"channel": "sms", "address": "+14155550100", "opted_in": False},
    ]


def test_csv_blank_cells_follow_the_chosen_policy(tmp_path: Path) -> None:
    path = write(tmp_path / "users.csv", CSV_BLANKS)
    omitted = cc.identities_to_wire(path, blank_consent="omit_channel")
    assert [[i["channel"] for i in b.get("channels", [])] for b in omitted] == [
        ["email", "sms"],
        ["sms"],
        [],
        ["sms"],
        [],
    ]
    opted = cc.identities_to_wire(path, blank_consent="opted_in")
    assert [[(i["channel"], i["opted_in"]) for i in b.get("channels", [])] for b in opted] == [
        [("email", True), ("sms", False)],
        [("email", True), ("sms", True)],
        [("email", True)],
        [("email", True), ("sms", False)],
        [("sms", True)],
    ]
    notes = cc.validate_identities(path, blank_consent="opted_in").notes
    assert note_of(notes, "blank_consent_opted_in", "email_opted_in")["count"] == 3
    assert note_of(notes, "blank_consent_opted_in", "sms_opted_in")["count"] == 1
    assert note_of(notes, "opt_out_without_address", "email_opted_in")["count"] == 1


def test_arrow_nulls_are_blank_in_tables_and_parquet_files(tmp_path: Path) -> None:
    table = pa.table(
        {
            "external_user_id": ["a", "b", "c"],
            "email": ["a@b.co", "b@b.co", None],
            "email_opted_in": pa.array([False, None, None], pa.bool_()),
        }
    )
    pq.write_table(table, tmp_path / "users.parquet")
    for source in (table, tmp_path / "users.parquet"):
        report = cc.validate_identities(source)
        assert list(report.failures["check"]) == ["email_opted_in_blank"]
        assert list(report.failures["position"]) == [1]
        bodies = cc.identities_to_wire(source, blank_consent="omit_channel")
        assert bodies == [
            {
                "external_user_id": "a",
                "channels": [{"channel": "email", "address": "a@b.co", "opted_in": False}],
            },
            {"external_user_id": "b"},
            {"external_user_id": "c"},
        ]


# -- no consent column: the contract's default, said aloud --------------------------------------
def test_an_address_without_a_consent_column_is_opted_in_and_counted() -> None:
    df = users(
        email=["a@b.co", "b@b.co", None, "bad", "e@b.co"],
        phone=["+14155550100", None, None, None, "+14155550104"],
        sms_opted_in=[False, None, None, None, True],
    )
    report = cc.validate_identities(df)
    assert report.n_invalid == 1  # "bad": not counted, never sent
    bodies = cc.identities_to_wire(df)
    sent_email = [i for b in bodies for i in items_of(b, "email")]
    assert all(i["opted_in"] is True for i in sent_email)
    note = note_of(report.notes, "opted_in_by_default", "email_opted_in")
    assert note["count"] == len(sent_email) == 3
    assert note["message"].startswith(
        "3 email channels are opted in by default: the table has no email_opted_in column"
    )
    assert [n["column"] for n in report.notes] == ["email_opted_in"]  # sms has its column
    assert note["message"] in report.summary()
    assert json.loads(json.dumps(report.notes)) == report.notes  # ready for a JSON report


def test_rows_skipped_as_older_duplicates_are_not_counted() -> None:
    df = pd.DataFrame({"external_user_id": ["a", "a", "b"], "email": ["a@b.co", "a2@b.co", None]})
    report = cc.validate_identities(df, duplicates="keep_last")
    assert note_of(report.notes, "opted_in_by_default", "email_opted_in")["count"] == 1


@pytest.mark.parametrize("slice_rows", [1, 2, 1000])
def test_notes_count_the_same_whatever_the_slice_size(slice_rows: int) -> None:
    df = users(
        email=["a@b.co", "b@b.co", "c@b.co", None],
        push_token=["t1", None, "t3", "t4"],
        push_opted_in=[None, False, True, ""],
        channels=[[{"channel": "sms", "address": "+14155550100"}], None, None, None],
    )
    report = cc.validate_identities(df, slice_rows=slice_rows, blank_consent="omit_channel")
    assert [(n["kind"], n["column"], n["count"]) for n in report.notes] == [
        ("opted_in_by_default", "email_opted_in", 3),
        ("blank_consent_omitted", "push_opted_in", 2),
        ("opt_out_without_address", "push_opted_in", 1),
        ("opted_in_by_default", "channels", 1),
    ]


def test_a_table_that_says_everything_has_no_notes() -> None:
    df = users(email=["a@b.co"], email_opted_in=["t"])
    report = cc.validate_identities(df)
    assert report.notes == [] and "note:" not in report.summary()


# -- explicit channels items --------------------------------------------------------------------
def test_channels_items_without_opted_in_go_as_given_and_are_counted() -> None:
    cell = [
        {"channel": "email", "address": "a@b.co"},
        {"channel": "sms", "address": "+14155550100"},
        {"channel": "push", "address": "t", "opted_in": False},
    ]
    df = users(channels=[cell, None])
    report = cc.validate_identities(df)
    assert report.ok
    assert cc.identities_to_wire(df)[0]["channels"] == cell
    note = note_of(report.notes, "opted_in_by_default", "channels")
    assert note["count"] == 2 and note["message"].startswith("2 channels items have no opted_in")


# -- require_consent ----------------------------------------------------------------------------
def test_require_consent_refuses_an_address_without_its_consent_column() -> None:
    df = users(
        email=["a@b.co", None],
        phone=["+14155550100", "+14155550101"],
        sms_opted_in=[True, False],
    )
    report = cc.validate_identities(df, require_consent=True)
    (failure,) = report.failures.to_dict("records")
    assert (failure["row"], failure["column"], failure["check"]) == (
        0,
        "email_opted_in",
        "email_opted_in_required",
    )
    assert "no email_opted_in column" in failure["message"]
    assert "require_consent" in failure["message"]
    assert [b["external_user_id"] for b in cc.identities_to_wire(df, require_consent=True)] == [
        "u1"
    ]


def test_require_consent_refuses_channels_items_without_opted_in() -> None:
    items = [
        {"channel": "email", "address": "a@b.co", "opted_in": True},
        {"channel": "sms", "address": "+14155550100"},
    ]
    df = users(channels=[items, items[:1]])
    report = cc.validate_identities(df, require_consent=True)
    (failure,) = report.failures.to_dict("records")
    assert (failure["row"], failure["column"], failure["check"]) == (
        0,
        "channels",
        "channels_opted_in_required",
    )
    assert failure["message"].startswith("channels[1] (sms) has no opted_in")


def test_require_consent_leaves_blank_cells_to_the_blank_policy() -> None:
    df = users(email=["a@b.co", "b@b.co"], email_opted_in=[True, None])
    strict = cc.validate_identities(df, require_consent=True)
    assert list(strict.failures["check"]) == ["email_opted_in_blank"]
    chosen = cc.validate_identities(df, require_consent=True, blank_consent="omit_channel")
    assert chosen.ok


# -- one property over every policy -------------------------------------------------------------
cells = st.sampled_from([True, False, "yes", "n", None, "", "  ", np.nan])
rows = st.lists(st.tuples(st.sampled_from(["a@b.co", None]), cells), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(rows, st.sampled_from(POLICIES))
def test_opted_in_is_the_cell_or_the_callers_choice_never_a_guess(
    table: list[tuple[str | None, Any]], policy: BlankConsent
) -> None:
    emails = [e for e, _ in table]
    consent = [c for _, c in table]
    df = users(email=emails, email_opted_in=consent)
    bodies = {b["external_user_id"]: b for b in cc.identities_to_wire(df, blank_consent=policy)}
    words = {True: True, "yes": True, False: False, "n": False}
    for i, (email, cell) in enumerate(table):
        blank = cell not in words
        body = bodies.get(f"u{i}")
        if email is not None and blank and policy == "error":
            assert body is None  # invalid: never sent
            continue
        assert body is not None
        items = items_of(body, "email")
        if email is None or (blank and policy == "omit_channel"):
            assert items == []
        else:
            assert items[0]["opted_in"] is (True if blank else words[cell])


# -- where people read it: the send result, the notebook, the command line, a task's summary --
def test_identify_result_carries_the_notes(client: cc.Client, sandbox: cc.Sandbox) -> None:
    df = users(email=["a@b.co", "b@b.co"])
    result = client.identify(df)
    assert result.ok and len(sandbox.users()) == 2
    note = note_of(result.notes, "opted_in_by_default", "email_opted_in")
    assert note["count"] == 2
    assert f"note: {note['message']}" in result.summary().splitlines()
    assert "\n" not in repr(result)
    dry = cc.identify(df, sandbox.base_url, sandbox.api_key, dry_run=True)
    assert dry.notes == result.notes


def test_notebook_reprs_show_the_notes(client: cc.Client) -> None:
    df = users(email=["a@b.co"])
    report = cc.validate_identities(df)
    result = client.identify(df)
    for shown in (report._repr_html_(), result._repr_html_()):
        assert "Notes" in shown and "opted in by default" in shown


def test_cli_summary_shows_the_note_and_takes_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_column = write(tmp_path / "plain.csv", "external_user_id,email\n1,a@b.co\n2,b@b.co\n")
    assert main(["validate", "identities", str(no_column)]) == 0
    out = capsys.readouterr().out
    assert (
        "note: 2 email channels are opted in by default: the table has no email_opted_in column"
        in out
    )
    assert main(["validate", "identities", str(no_column), "--require-consent"]) == 1
    assert "email_opted_in_required" in capsys.readouterr().out
    blanks = write(tmp_path / "blanks.csv", CSV_BLANKS)
    assert main(["validate", "identities", str(blanks)]) == 1
    assert main(["validate", "identities", str(blanks), "--blank-consent", "omit_channel"]) == 0
    assert "left out of the request" in capsys.readouterr().out


def test_cli_refuses_consent_options_for_events_and_unknown_policies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "e.csv", "external_user_id,event_type,occurred_at\n")
    assert main(["validate", "events", str(path), "--require-consent"]) == 3
    assert "apply to identities only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["validate", "identities", str(path), "--blank-consent", "yes"])
    assert usage.value.code == 3 and "omit_channel" in capsys.readouterr().err


def test_cli_send_prints_the_note(
    sandbox: cc.Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = write(tmp_path / "u.csv", "external_user_id,phone\n1,+14155550100\n")
    assert main(["send", "identities", str(path)]) == 0
    assert "note: 1 sms channel is opted in by default" in capsys.readouterr().out


def test_the_key_never_reaches_the_notes_or_where_they_are_shown() -> None:
    canary = "canary-key-7f3a9c"  # a test key, looked for in every output
    with cc.Sandbox(api_keys=[canary]) as sandbox:
        result = cc.identify(users(email=["a@b.co"]), sandbox.base_url, canary)
    assert result.ok and result.notes
    shown = [json.dumps(result.notes), result.summary(), repr(result), result._repr_html_()]
    assert not any(canary in text for text in shown)


def test_task_summary_carries_the_notes(sandbox: cc.Sandbox) -> None:
    summary = cc.identify_task(
        users(email=["a@b.co"]), base_url=sandbox.base_url, api_key=sandbox.api_key
    )
    (note,) = json.loads(json.dumps(summary))["notes"]
    assert (note["kind"], note["column"], note["count"]) == (
        "opted_in_by_default",
        "email_opted_in",
        1,
    )


# -- two syncs against the sandbox, over HTTP ---------------------------------------------------
FIRST_SYNC = (
    "external_user_id,email,email_opted_in\nu1,u1@example.com,false\nu2,u2@example.com,true\n"
)
SECOND_SYNC = (  # u1's consent cell is blank this time
    "external_user_id,email,email_opted_in,traits.plan\n"
    "u1,u1@example.com,,pro\n"
    "u2,u2@example.com,true,pro\n"
)


def stored_email(sandbox: cc.Sandbox, user: str) -> dict[str, Any]:
    found = sandbox.users().set_index("external_user_id").loc[user]
    (item,) = [i for i in found["channels"] if i["channel"] == "email"]
    return dict(item)


def first_sync(client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path) -> Path:
    assert client.identify(write(tmp_path / "first.csv", FIRST_SYNC)).ok
    assert stored_email(sandbox, "u1") == {
        "channel": "email",
        "address": "u1@example.com",
        "opted_in": False,
    }
    return write(tmp_path / "second.csv", SECOND_SYNC)


def test_second_sync_with_a_blank_cell_is_refused_and_the_opt_out_stays(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    second = first_sync(client, sandbox, tmp_path)
    result = client.identify(second)
    assert (result.counts["sent"], result.counts["invalid"]) == (1, 1)
    error = str(result.rows.loc[2, "error"])  # u1, on line 2 of the file
    assert "[email_opted_in_blank]" in error and BLANK_FIX in error
    assert stored_email(sandbox, "u1")["opted_in"] is False
    assert list(sandbox.identify_log()["external_user_id"]).count("u1") == 1  # never re-sent


def test_second_sync_omitting_the_channel_keeps_the_stored_opt_out(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    second = first_sync(client, sandbox, tmp_path)
    result = client.identify(second, blank_consent="omit_channel")
    assert result.ok and result.counts["sent"] == 2
    body = sandbox.identify_log().iloc[-2:].set_index("external_user_id").loc["u1", "body"]
    assert body == {"external_user_id": "u1", "traits": {"plan": "pro"}}
    assert stored_email(sandbox, "u1")["opted_in"] is False
    assert sandbox.users().set_index("external_user_id").loc["u1", "traits"] == {"plan": "pro"}
    note = note_of(result.notes, "blank_consent_omitted", "email_opted_in")
    assert note["count"] == 1


def test_second_sync_with_opted_in_resubscribes_because_the_caller_asked(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    second = first_sync(client, sandbox, tmp_path)
    result = client.identify(second, blank_consent="opted_in")
    assert result.ok
    assert stored_email(sandbox, "u1")["opted_in"] is True
    assert note_of(result.notes, "blank_consent_opted_in", "email_opted_in")["count"] == 1


def test_an_explicit_opt_out_in_the_second_sync_is_stored(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    first_sync(client, sandbox, tmp_path)
    unsubscribe = write(
        tmp_path / "third.csv", "external_user_id,email,email_opted_in\nu2,u2@example.com,no\n"
    )
    assert client.identify(unsubscribe).ok
    assert stored_email(sandbox, "u2")["opted_in"] is False
