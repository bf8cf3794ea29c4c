"""validate_identities: each rule's rejected side (row, column, check) and accepted side,
duplicate users in every mode, and the same results whatever the slice size."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector import identities_schema, identities_to_wire, validate_identities
from churn_connector._core.types import Duplicates
from churn_connector._identities.stream import IdentityStream, duplicate_users
from churn_connector._options.identities import IdentityOptions
from churn_connector._read import ReadSpec
from churn_connector._slices import batches
from churn_connector._validate.pandera import schema_errors


def identity_stream(df: object, **options: Any) -> IdentityStream:
    return IdentityStream(df, IdentityOptions(**options))


def sent(stream: IdentityStream) -> list[tuple[int, str, bytes]]:
    """(position, user, body) of every row the stream would send, slice after slice."""
    return [
        item
        for batch in batches(stream)
        for item in zip(batch.positions, batch.keys, batch.bodies, strict=True)
    ]


def one_row(**overrides: object) -> pd.DataFrame:
    row: dict[str, object] = {"external_user_id": "u1"}
    row.update(overrides)
    # object columns keep each value's own type (no bool -> int or list broadcasting)
    return pd.DataFrame({k: pd.Series([v], dtype=object, index=["r0"]) for k, v in row.items()})


def checks_of(report: cc.ValidationReport) -> set[str]:
    return set(report.failures["check"])


def only_failure(report: cc.ValidationReport) -> pd.Series:
    assert len(report.failures) == 1, report.failures
    return report.failures.iloc[0]


def users(*ids: object, **columns: object) -> pd.DataFrame:
    return pd.DataFrame({"external_user_id": pd.Series(ids, dtype=object), **columns})


# -- accepted tables ------------------------------------------------------------------------
def test_full_valid_row_is_ok() -> None:
    df = one_row(
        traits={"plan": "pro"},
        preferred_channel="sms",
        email="ada@example.com",
        phone="+14155550100",
        push_token="tok-1",
        email_opted_in=False,
        sms_verified=True,
        channels=[{"channel": "push", "address": "tok-2", "opted_in": True, "verified": False}],
        **{"traits.seats": 3},
    )
    assert validate_identities(df).ok


def test_every_column_but_the_id_may_be_null() -> None:
    columns = ["traits", "preferred_channel", "email", "phone", "push_token", "channels"]
    flags = ["email_opted_in", "sms_opted_in", "push_opted_in", "email_verified"]
    df = one_row(**dict.fromkeys(columns + flags + ["traits.plan"]))
    assert validate_identities(df).ok


def test_failure_names_row_label_column_and_check() -> None:
    failure = only_failure(validate_identities(one_row(email="not-an-email")))
    assert (failure["row"], failure["position"], failure["column"], failure["check"]) == (
        "r0",
        0,
        "email",
        "email_pattern",
    )


# -- external_user_id -------------------------------------------------------------------------
def test_float_user_ids_are_rejected() -> None:
    df = pd.DataFrame({"external_user_id": [12345.0]})
    failure = only_failure(validate_identities(df))
    assert (failure["column"], failure["check"]) == ("external_user_id", "external_user_id_type")


def test_integer_user_ids_are_accepted() -> None:
    df = pd.DataFrame({"external_user_id": pd.array([7, 8], dtype="Int64")})
    assert validate_identities(df).ok


def test_missing_user_id_is_reported_as_not_nullable() -> None:
    failure = only_failure(validate_identities(one_row(external_user_id=None)))
    assert (failure["column"], failure["check"]) == ("external_user_id", "not_nullable")


def test_missing_user_id_column_invalidates_every_row() -> None:
    report = validate_identities(pd.DataFrame({"email": ["a@b.co", "c@d.co"]}))
    failure = only_failure(report)
    assert (failure["column"], failure["check"]) == ("external_user_id", "column_in_dataframe")
    assert report.n_invalid == 2


def test_blank_user_id_is_rejected() -> None:
    assert checks_of(validate_identities(one_row(external_user_id=" "))) == {
        "external_user_id_not_blank"
    }


# -- unknown columns -------------------------------------------------------------------------
def test_unknown_column_names_the_traits_prefix_fix() -> None:
    report = validate_identities(users("a", "b", plan=["pro", "free"]))
    failure = only_failure(report)
    assert (failure["column"], failure["check"]) == ("plan", "column_in_schema")
    assert "traits.plan" in failure["message"]
    assert report.n_invalid == 2


def test_unknown_columns_can_be_ignored_explicitly() -> None:
    assert validate_identities(users("a", plan=["pro"]), extra_columns="ignore").ok


def test_bad_options_raise_configuration_errors() -> None:
    with pytest.raises(cc.ConfigurationError, match="phone_region"):
        validate_identities(one_row(), phone_region="XX")
    with pytest.raises(cc.ConfigurationError, match="duplicates"):
        validate_identities(one_row(), duplicates="first")  # type: ignore[arg-type]


# -- traits ------------------------------------------------------------------------------------
def test_traits_value_json_cannot_carry_is_reported_with_its_path() -> None:
    failure = only_failure(validate_identities(one_row(traits={"a": {"b": float("nan")}})))
    assert failure["check"] == "traits_json"
    assert failure["message"].startswith("traits.a.b:")


def test_traits_array_is_rejected() -> None:
    assert checks_of(validate_identities(one_row(traits="[]"))) == {"traits_json"}


def test_infinite_flat_trait_is_rejected() -> None:
    failure = only_failure(validate_identities(one_row(**{"traits.score": float("inf")})))
    assert (failure["column"], failure["check"]) == ("traits.score", "trait_value_json")


def test_trait_in_object_and_flat_column_is_one_conflict_on_traits() -> None:
    df = one_row(traits={"plan": "a"}, email="a@b.co", **{"traits.plan": "b"})
    failure = only_failure(validate_identities(df))
    assert (failure["column"], failure["check"]) == ("traits", "traits_key_conflict")


# -- preferred_channel -------------------------------------------------------------------------
@pytest.mark.parametrize("good", ["email", "sms", "push", None])
def test_preferred_channel_accepts_the_three_channels_or_null(good: object) -> None:
    assert validate_identities(one_row(preferred_channel=good)).ok


@pytest.mark.parametrize("bad", ["Email", "phone", "", "email "])
def test_preferred_channel_rejects_other_strings(bad: str) -> None:
    failure = only_failure(validate_identities(one_row(preferred_channel=bad)))
    assert (failure["column"], failure["check"]) == ("preferred_channel", "preferred_channel_value")


def test_preferred_channel_must_be_a_string() -> None:
    failure = only_failure(validate_identities(one_row(preferred_channel=1)))
    assert failure["check"] == "preferred_channel_type"


# -- email / phone / push token ------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["ada", "ada@example", "a b@example.com", "ada@example.com\nx"])
def test_email_must_fully_match_the_pattern(bad: str) -> None:
    failure = only_failure(validate_identities(one_row(email=bad)))
    assert (failure["column"], failure["check"]) == ("email", "email_pattern")


def test_email_string_dtype_column_is_checked() -> None:
    df = users("a", "b", email=pd.array(["ok@example.com", "nope"], dtype="string"))
    assert list(validate_identities(df).failures["position"]) == [1]


def test_email_must_be_a_string() -> None:
    assert checks_of(validate_identities(one_row(email=5))) == {"email_type"}


@pytest.mark.parametrize("good", ["+14155550100", "+442079460958", "+12"])
def test_phone_accepts_e164(good: str) -> None:
    assert validate_identities(one_row(phone=good)).ok


@pytest.mark.parametrize(
    "bad", ["+0123", "+1234567890123456", "+1٤١٥٥٥٥٠١٠٠", "+44 (0)20 7946 0000", "+1  415"]
)
def test_phone_rejects_what_is_not_e164_and_does_not_point_to_phone_region(bad: str) -> None:
    failure = only_failure(validate_identities(one_row(phone=bad)))
    assert (failure["column"], failure["check"]) == ("phone", "phone_e164")
    assert "phone_region" not in failure["message"]  # a region would not make it valid


@pytest.mark.parametrize("bad", ["4155550100", "(415) 555-0100", "020 7946 0000"])
def test_a_national_number_without_a_region_points_to_phone_region(bad: str) -> None:
    failure = only_failure(validate_identities(one_row(phone=bad)))
    assert (failure["column"], failure["check"]) == ("phone", "phone_e164")
    assert "phone_region" in failure["message"]


def test_phone_must_be_a_string() -> None:
    failure = only_failure(validate_identities(one_row(phone=14155550100)))
    assert (failure["column"], failure["check"]) == ("phone", "phone_type")


def test_phone_region_accepts_valid_local_numbers() -> None:
    assert validate_identities(one_row(phone="(415) 555-0100"), phone_region="US").ok


@pytest.mark.parametrize(
    "bad", ["555-0100-999-999", "call me", "415-555-0100 ext 12", "1-800-FLOWERS"]
)
def test_phone_region_reports_unusable_numbers_naming_the_region(bad: str) -> None:
    failure = only_failure(validate_identities(one_row(phone=bad), phone_region="US"))
    assert failure["check"] == "phone_e164"
    assert "region US" in failure["message"]


@pytest.mark.parametrize("column", ["push_token", "pushToken"])
@pytest.mark.parametrize("bad", ["", "   "])
def test_push_token_must_not_be_blank(column: str, bad: str) -> None:
    failure = only_failure(validate_identities(one_row(**{column: bad})))
    assert (failure["column"], failure["check"]) == (column, "push_token_not_blank")


def test_push_token_must_be_a_string() -> None:
    assert checks_of(validate_identities(one_row(pushToken=123))) == {"push_token_type"}


def test_push_token_and_its_alias_together_invalidate_the_table() -> None:
    report = validate_identities(users("a", "b", push_token=["t1", None], pushToken=[None, "t2"]))
    failure = only_failure(report)
    assert (failure["row"], failure["column"], failure["check"]) == (
        pd.NA,  # the whole table: no row
        "pushToken",
        "push_token_alias_conflict",
    )
    assert report.n_invalid == 2


# -- opt-in and verified flags -------------------------------------------------------------------
@pytest.mark.parametrize(
    "values",
    [
        pd.Series([True, False]),
        pd.array([True, None], dtype="boolean"),
        pd.Series([np.bool_(True), None], dtype=object),
    ],
)
def test_flags_accept_real_booleans_and_nulls(values: object) -> None:
    # a null consent cell is fine where the row has no address (tests/validate/test_consent.py)
    df = users("a", "b", email=["a@b.co", None], email_opted_in=values)
    assert validate_identities(df).ok


@pytest.mark.parametrize("bad", [2, -1, "maybe", " yes", "no way", 0.5, Decimal("1"), b"1"])
@pytest.mark.parametrize("flag", ["email_opted_in", "sms_verified"])
def test_flags_reject_what_is_not_a_flag_spelling(flag: str, bad: object) -> None:
    df = one_row(email="a@b.co", phone="+14155550100", **{flag: bad})
    failure = only_failure(validate_identities(df))
    assert (failure["column"], failure["check"]) == (flag, f"{flag}_type")
    assert "yes/no" in failure["message"]  # the accepted spellings are listed


def test_integer_flag_column_other_than_0_1_is_rejected() -> None:
    df = users("a", email=["a@b.co"], push_opted_in=pd.Series([2]), push_token=["t"])
    assert checks_of(validate_identities(df)) == {"push_opted_in_type"}


def test_flag_without_its_address_column_is_reported_once() -> None:
    report = validate_identities(users("a", "b", sms_opted_in=[True, False]))
    failure = only_failure(report)
    assert (failure["column"], failure["check"]) == ("sms_opted_in", "sms_opted_in_without_address")
    assert "phone" in failure["message"]


# -- channels ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cell",
    [
        [{"channel": "email", "address": "a@b.co"}],
        ({"channel": "sms", "address": "+14155550100", "opted_in": False},),
        np.array([{"channel": "push", "address": "tok", "verified": True}], dtype=object),
        [],
        None,
    ],
)
def test_channels_accept_lists_of_valid_items_or_null(cell: object) -> None:
    assert validate_identities(one_row(channels=cell)).ok


@pytest.mark.parametrize(
    ("cell", "fragment"),
    [
        ({"channel": "email", "address": "a@b.co"}, "got dict"),
        ('{"channel": "email"}', "got dict"),
        ("[oops", "not valid JSON"),
        (["email"], "channels[0] must be an object"),
    ],
)
def test_channels_must_be_a_list_of_objects(cell: object, fragment: str) -> None:
    failure = only_failure(validate_identities(one_row(channels=cell)))
    assert (failure["column"], failure["check"]) == ("channels", "channels_type")
    assert fragment in failure["message"]


def test_channel_item_with_type_names_index_field_and_fix() -> None:
    cell = [
        {"channel": "email", "address": "a@b.co"},
        {"type": "sms", "address": "+14155550100"},
    ]
    failure = only_failure(validate_identities(one_row(channels=cell)))
    assert (failure["column"], failure["check"]) == ("channels", "channels_item")
    assert failure["message"].startswith("channels[1].type")
    assert "rename to channel" in failure["message"]


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ({"channel": "email", "address": "a@b.co", "label": "work"}, "channels[0].label"),
        ({"address": "a@b.co"}, "channels[0].channel: required"),
        ({"channel": "fax", "address": "1"}, "channels[0].channel"),
        ({"channel": "email"}, "channels[0].address: required"),
        ({"channel": "email", "address": 5}, "must be a string"),
        ({"channel": "email", "address": "nope"}, "not an email address"),
        ({"channel": "sms", "address": "(415) 555-0100"}, "not an E.164 number"),
        ({"channel": "push", "address": " "}, "not a token"),
        ({"channel": "push", "address": "t", "opted_in": "yes"}, "channels[0].opted_in"),
        ({"channel": "push", "address": "t", "verified": 1}, "channels[0].verified"),
    ],
)
def test_channel_item_rules_of_the_contract(item: dict[str, object], fragment: str) -> None:
    failure = only_failure(validate_identities(one_row(channels=[item])))
    assert failure["check"] == "channels_item"
    assert fragment in failure["message"]


def test_explicit_sms_address_is_not_normalised_by_phone_region() -> None:
    cell = [{"channel": "sms", "address": "(415) 555-0100"}]
    report = validate_identities(one_row(channels=cell), phone_region="US")
    assert checks_of(report) == {"channels_item"}


def test_same_channel_and_address_twice_in_a_row_is_invalid() -> None:
    cell = [{"channel": "email", "address": "a@b.co", "opted_in": False}]
    failure = only_failure(validate_identities(one_row(channels=cell, email="a@b.co")))
    assert (failure["row"], failure["column"], failure["check"]) == (
        "r0",
        "channels",
        "channels_duplicate_item",
    )


def test_normalised_phone_equal_to_an_explicit_sms_item_is_a_duplicate() -> None:
    df = one_row(channels=[{"channel": "sms", "address": "+14155550100"}], phone="415 555 0100")
    assert checks_of(validate_identities(df, phone_region="US")) == {"channels_duplicate_item"}


def test_same_address_on_different_channels_is_not_a_duplicate() -> None:
    df = one_row(channels=[{"channel": "push", "address": "a@b.co"}], email="a@b.co")
    assert validate_identities(df).ok


def test_arrow_list_of_structs_with_null_fields_is_accepted(tmp_path: Path) -> None:
    table = pa.table(
        {
            "external_user_id": ["a"],
            "channels": [[{"channel": "email", "address": "a@b.co", "opted_in": None}]],
        }
    )
    path = f"{tmp_path}/ids.parquet"
    pq.write_table(table, path)
    assert validate_identities(path).ok


# -- the schema on its own ---------------------------------------------------------------------
def test_exported_schema_reports_named_checks() -> None:
    with pytest.raises(schema_errors()) as info:
        identities_schema().validate(one_row(email="x", preferred_channel="fax"), lazy=True)
    assert set(info.value.failure_cases["check"]) == {"email_pattern", "preferred_channel_value"}


# -- duplicate users -----------------------------------------------------------------------------
def dup_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": np.array(["a", 7, "b", "7", "a", "c", "a"], dtype=object),
            "email": ["a1@x.co", None, "bad", None, "a2@x.co", None, "a3@x.co"],
        },
        index=[f"r{i}" for i in range(7)],
    )


def test_duplicate_users_maps_wire_ids_to_positions_of_repeated_users() -> None:
    assert duplicate_users(dup_table(), ReadSpec(rows=2)) == {"a": [0, 4, 6], "7": [1, 3]}


def test_duplicate_users_reads_parquet_id_column(tmp_path: Path) -> None:
    path = f"{tmp_path}/ids.parquet"
    pq.write_table(pa.table({"external_user_id": ["x", "y", "x"], "email": ["a@b.co"] * 3}), path)
    assert duplicate_users(path, ReadSpec(rows=1)) == {"x": [0, 2]}


def test_duplicate_users_leave_out_invalid_ids() -> None:
    assert duplicate_users(users(None, None, " ", " "), ReadSpec(rows=10)) == {}


def test_duplicates_error_invalidates_every_row_naming_the_others() -> None:
    report = validate_identities(dup_table())
    dups = report.failures[report.failures["check"] == "external_user_id_duplicate"]
    assert list(dups["row"]) == ["r0", "r1", "r3", "r4", "r6"]
    first = dups.iloc[0]["message"]
    assert "rows r4 and r6" in first and "keep_last" in first and "in_order" in first
    assert report.n_invalid == 6  # the five duplicates and r2 (bad email)


def test_duplicates_keep_last_skips_earlier_rows_with_a_note() -> None:
    stream = identity_stream(dup_table(), duplicates="keep_last", slice_rows=3)
    positions = [pos for pos, _, _ in sent(stream)]
    rows = stream.book.frame()
    assert positions == [3, 5, 6]
    assert list(rows["status"]) == [
        "skipped",
        "skipped",
        "invalid",
        "pending",
        "skipped",
        "pending",
        "pending",
    ]
    assert rows["error"].iloc[0] == "superseded by row r6"
    assert rows["error"].iloc[1] == "superseded by row r3"


def test_keep_last_sends_nothing_for_a_user_whose_last_row_is_invalid() -> None:
    df = users("a", "a", email=["ok@x.co", "bad"])
    stream = identity_stream(df, duplicates="keep_last")
    assert sent(stream) == []
    assert list(stream.book.frame()["status"]) == ["invalid", "invalid"]
    checks = {f["check"] for f in stream.failures.records}
    assert checks == {"external_user_id_last_row_invalid", "email_pattern"}


def test_duplicates_in_order_sends_every_row_in_row_order() -> None:
    bodies = identities_to_wire(dup_table(), duplicates="in_order")
    assert [b["external_user_id"] for b in bodies] == ["a", "7", "7", "a", "c", "a"]
    assert validate_identities(dup_table(), duplicates="in_order").n_invalid == 1


@pytest.mark.parametrize("mode", ["error", "keep_last", "in_order"])
def test_results_do_not_depend_on_the_slice_size(mode: Duplicates) -> None:
    # list[Any]: pandas-stubs type assign() columns as Sequence[Scalar], which excludes None
    preferred_channel: list[Any] = ["fax", None, None, "sms", None, 3, None]
    phone: list[Any] = [None, "+1", None, None, "x", None, None]
    df = dup_table().assign(preferred_channel=preferred_channel, phone=phone)
    whole = validate_identities(df, duplicates=mode)
    sliced = validate_identities(df, duplicates=mode, slice_rows=1)
    pd.testing.assert_frame_equal(whole.failures, sliced.failures)
    pd.testing.assert_frame_equal(whole.valid, sliced.valid)
    assert whole.n_invalid == sliced.n_invalid


def test_every_slice_checks_flattened_trait_columns() -> None:
    # the schema is reused across slices: a failure in one must not disable later checks
    df = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2", "u3"],
            "traits.seats": pd.Series([2**70, 2**70, 2**70], dtype=object),
        }
    )
    whole = validate_identities(df)
    sliced = validate_identities(df, slice_rows=1)
    assert whole.n_invalid == sliced.n_invalid == 3
    pd.testing.assert_frame_equal(whole.failures, sliced.failures)
    assert identities_to_wire(df, slice_rows=1) == []


@pytest.mark.parametrize("mode", ["error", "keep_last", "in_order"])
def test_stream_states_sends_and_notes_do_not_depend_on_the_slice_size(mode: Duplicates) -> None:
    df = dup_table()
    outcomes = []
    for rows in (len(df), 1):
        stream = identity_stream(df, duplicates=mode, slice_rows=rows)
        outcomes.append((sent(stream), stream.book.frame()))
    (whole_sent, whole_rows), (sliced_sent, sliced_rows) = outcomes
    assert whole_sent == sliced_sent
    pd.testing.assert_frame_equal(whole_rows, sliced_rows)


def test_one_shot_iterator_input_is_read_for_duplicates_and_rows() -> None:
    frames = (part for part in [dup_table().iloc[:4], dup_table().iloc[4:]])
    report = validate_identities(frames)
    assert report.n_rows == 7
    assert "external_user_id_duplicate" in checks_of(report)


def test_table_level_failure_is_reported_once_across_slices() -> None:
    report = validate_identities(users("a", "b", "c", plan=[1, 2, 3]), slice_rows=1)
    assert list(report.failures["check"]) == ["column_in_schema"]
    assert report.n_invalid == 3
