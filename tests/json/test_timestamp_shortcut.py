"""The shortcut for timestamp columns spelled like the wire, ending in ``Z`` or in a
``±HH:MM`` offset (in any mix): every column it reads is read exactly as the general parser
reads it, and a column holding any other text goes to the general parser whole."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._json.timestamp_text import MAX_MS, MIN_MS, parse_text
from churn_connector._json.timestamps import TimestampProblem, _wire_spelled, normalize_timestamps

OK, BAD_FORMAT = TimestampProblem.OK, TimestampProblem.BAD_FORMAT
_EPOCH = dt.datetime(1970, 1, 1)
_STRING = pa.string()


def column(texts: list[str], typ: pa.DataType = _STRING) -> pa.Array:
    # a slice, so the shortcut must honour the array's offset into its buffers
    return pa.array(["ahead", *texts], typ).slice(1)


def series(texts: list[str]) -> pd.Series:
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.array(texts, pa.string())))


def read_as_the_general_parser(arr: pa.Array) -> bool:
    """Whether the shortcut read ``arr``; when it did, it must agree with the general
    parser on every value: an instant with a zone, the same instant."""
    fast = _wire_spelled(arr)
    if fast is None:
        return False
    general = parse_text(arr)
    assert general.ok.all() and general.has_zone.all()
    assert fast.tolist() == general.ms.tolist()
    return True


def spelled(local_ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmm`` of a wall-clock time, by datetime (not the package)."""
    t = _EPOCH + dt.timedelta(milliseconds=local_ms)
    return f"{t.year:04d}-{t:%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}"


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
@pytest.mark.parametrize(
    "text",
    [
        "2026-11-20T11:30:00.123+02:00",
        "2026-11-20T04:00:00.123-05:30",
        "2026-11-20T09:30:00.123Z",
        "2026-11-20T09:30:00.123+00:00",
        "2026-11-20T09:30:00.123-00:00",  # UTC to the general parser too
        "2026-11-20T09:30:00.123+23:59",  # the largest offset it reads
        "2026-11-20T09:30:00.123-23:59",
        "2024-02-29T23:59:59.999+01:00",  # a leap day
        "2000-02-29T00:00:00.000-01:00",
        "1969-12-31T23:59:59.999+00:01",
        "0001-01-01T00:00:00.000+01:00",  # before year 1 in UTC: the general parser's instant
        "9999-12-31T23:59:59.999-01:00",  # after year 9999 in UTC: likewise
    ],
)
def test_a_column_of_offset_spellings_is_read_by_the_shortcut_as_the_general_parser_reads_it(
    text: str, typ: pa.DataType
) -> None:
    assert read_as_the_general_parser(column([text] * 3, typ))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2026-02-29T09:30:00.123+01:00", BAD_FORMAT),  # not a leap year
        ("2026-04-31T09:30:00.123+01:00", BAD_FORMAT),
        ("2026-13-01T09:30:00.123+01:00", BAD_FORMAT),
        ("0000-01-01T09:30:00.123+01:00", BAD_FORMAT),
        ("2026-11-20T24:00:00.000+01:00", BAD_FORMAT),
        ("2026-11-20T23:59:60.000+01:00", BAD_FORMAT),
        ("2026-11-20T09:30:00.123+24:00", BAD_FORMAT),  # offsets beyond the general range
        ("2026-11-20T09:30:00.123-24:00", BAD_FORMAT),
        ("2026-11-20T09:30:00.123+23:60", BAD_FORMAT),
        ("2026-11-20T09:30:00.123+05:99", BAD_FORMAT),
        ("2026-11-20T09:30:00.123+0a:00", BAD_FORMAT),
        ("2026-11-20T09:30:00.123*02:00", BAD_FORMAT),
        ("2026-11-20T09:30:00.123+02-00", BAD_FORMAT),
        ("2026-11-20T11:30:00.123+02:00 ", BAD_FORMAT),
        ("2026-11-20t11:30:00.123+02:00", OK),  # lower case: the general parser reads them
        ("2026-11-20T09:30:00.123z", OK),
        ("2026-11-20T11:30:00+02:00", OK),  # other shapes stay on the general path
        ("2026-11-20 11:30:00.123+02:00", OK),
        ("2026-11-20T11:30:00,123+02:00", OK),
        ("2026-11-20T11:30:00.123+0200", OK),
        ("2026-11-20T11:30:00.123+02", OK),
        ("2026-11-20T11:30:00.123456+02:00", OK),
        ("2026-11-20T11:30:00.123+02:00:00", OK),
    ],
)
def test_a_column_with_any_other_spelling_goes_to_the_general_parser_whole(
    text: str, problem: TimestampProblem
) -> None:
    texts = ["2026-11-20T09:30:00.123Z", "2026-11-20T11:30:00.123+02:00", text]
    assert _wire_spelled(column(texts)) is None
    assert _wire_spelled(column([text] * 2)) is None
    norm = normalize_timestamps(series(texts))
    assert norm.problem.tolist() == [OK, OK, problem]
    general = parse_text(pa.array([text]))
    assert norm.ms.tolist() == [1_795_167_000_123] * 2 + [general.ms[0] if general.ok[0] else 0]


def test_a_column_mixing_z_and_offsets_is_read_by_the_shortcut() -> None:
    texts = [
        "2026-11-20T09:30:00.123Z",
        "2026-11-20T11:30:00.124+02:00",
        "2026-11-20T09:30:00.125Z",
        "2026-11-19T23:30:00.126-10:00",
    ]
    assert read_as_the_general_parser(column(texts * 50))
    norm = normalize_timestamps(series(texts))
    assert norm.ms.tolist() == [1_795_167_000_123 + i for i in range(4)]
    assert norm.problem.tolist() == [OK] * 4


def test_one_odd_value_in_an_offset_column_is_refused_with_the_general_parsers_message(
    now: pd.Timestamp,
) -> None:
    instants = [now - pd.Timedelta(minutes=m) for m in range(1, 7)]
    texts = [  # the bench's CSV: every other instant written in local time at +01:00
        (t + pd.Timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.123+01:00")
        if i % 2
        else t.strftime("%Y-%m-%dT%H:%M:%S.123Z")
        for i, t in enumerate(instants)
    ]
    texts[3] = texts[3][:-6] + "+24:00"
    frame = pd.DataFrame({"external_user_id": "u", "event_type": "x", "occurred_at": texts})
    alone = frame.iloc[[3]].reset_index(drop=True)
    report = cc.validate_events(frame, now=now)
    refused = report.failures
    assert refused["row"].tolist() == [3]
    assert refused["check"].tolist() == ["occurred_at_format"]
    assert (
        refused["message"].tolist()
        == cc.validate_events(alone, now=now).failures["message"].tolist()
    )
    wire = cc.events_to_wire(frame.drop(index=3), now=now)
    assert [w["occurred_at"] for w in wire] == [
        t.strftime("%Y-%m-%dT%H:%M:%S.123Z") for i, t in enumerate(instants) if i != 3
    ]


zones = st.one_of(
    st.just(0),
    st.tuples(st.sampled_from([1, -1]), st.integers(0, 23), st.integers(0, 59)),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(MIN_MS, MAX_MS), zones), min_size=1, max_size=12),
    st.sampled_from([pa.string(), pa.large_string()]),
)
def test_every_valid_text_of_the_accepted_shape_is_read_by_the_shortcut(
    values: list[tuple[int, int | tuple[int, int, int]]], typ: pa.DataType
) -> None:
    texts, expected = [], []
    for local_ms, zone in values:
        if zone == 0:
            texts.append(spelled(local_ms) + "Z")
            expected.append(local_ms)
        else:
            assert isinstance(zone, tuple)
            sign, hours, minutes = zone
            texts.append(f"{spelled(local_ms)}{'+' if sign > 0 else '-'}{hours:02d}:{minutes:02d}")
            expected.append(local_ms - sign * (hours * 60 + minutes) * 60_000)
    arr = column(texts, typ)
    assert read_as_the_general_parser(arr)
    fast = _wire_spelled(arr)
    assert fast is not None and fast.tolist() == expected


def _field(low: int, high: int, width: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(lambda v: f"{v:0{width}d}")


# the accepted shape, field by field, with values beyond every range and letters in both cases
shaped = st.tuples(
    _field(0, 9999, 4),
    _field(0, 19, 2),
    _field(0, 39, 2),
    st.sampled_from("Tt"),
    _field(0, 29, 2),
    _field(0, 69, 2),
    _field(0, 69, 2),
    _field(0, 999, 3),
    st.one_of(
        st.sampled_from(["Z", "z"]),
        st.tuples(st.sampled_from("+-"), _field(0, 29, 2), _field(0, 69, 2)).map(
            lambda z: f"{z[0]}{z[1]}:{z[2]}"
        ),
    ),
).map(lambda f: f"{f[0]}-{f[1]}-{f[2]}{f[3]}{f[4]}:{f[5]}:{f[6]}.{f[7]}{f[8]}")


@settings(max_examples=300, deadline=None)
@given(st.lists(shaped, min_size=1, max_size=6))
def test_the_shortcut_reads_a_shaped_column_only_as_the_general_parser_does(
    texts: list[str],
) -> None:
    arr = column(texts)
    taken = read_as_the_general_parser(arr)
    general = parse_text(arr)
    upper = all("t" not in t and not t.endswith("z") for t in texts)
    # and it declines nothing the general parser reads, in the upper-case spellings
    assert taken == (bool(general.ok.all()) and upper)
    norm = normalize_timestamps(series(texts))
    assert (norm.problem == np.where(general.ok, OK, BAD_FORMAT)).all()
    assert norm.ms[general.ok].tolist() == general.ms[general.ok].tolist()
