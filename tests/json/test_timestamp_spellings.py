"""Every unambiguous way a warehouse spells an instant is read as that instant; what is
ambiguous (no zone, a zone name, an epoch number without its unit) is refused, clearly."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import churn_connector as cc
from churn_connector._json.timestamps import TimestampProblem, normalize_timestamps


@pytest.fixture
def instant(now: pd.Timestamp) -> pd.Timestamp:
    return (now - pd.Timedelta(hours=1)).floor("s") + pd.Timedelta(microseconds=123_456)


def wire_time(instant: pd.Timestamp) -> str:
    return instant.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S.") + "123Z"


def one_event(when: object) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": ["u"],
            "event_type": ["x"],
            "occurred_at": pd.Series([when], dtype=object),
        }
    )


def spellings(t: pd.Timestamp) -> list[str]:
    """Spellings warehouses document (BigQuery, Snowflake, Redshift) and ISO 8601 variants."""
    utc = t.tz_convert("UTC")
    plus = t.tz_convert("Asia/Kolkata")
    minus = t.tz_convert("America/Los_Angeles")
    d, us = utc.strftime("%Y-%m-%d %H:%M:%S"), f"{utc.microsecond:06d}"
    p = plus.strftime("%Y-%m-%d %H:%M:%S")
    m = minus.strftime("%Y-%m-%d %H:%M:%S")
    m_off = minus.strftime("%z")  # -0800 or -0700
    return [
        f"{d}.{us} UTC",  # BigQuery TIMESTAMP in CSV
        f"{d}.{us[:3]} +0000",  # Snowflake TIMESTAMP_TZ / _LTZ default output
        f"{m}.{us[:3]} {m_off}",  # Snowflake TIMESTAMP_LTZ in a Los Angeles session
        f"{d}.{us}+00",  # Postgres / Redshift timestamptz text
        f"{p}.{us}+05:30",
        f"{d.replace(' ', 'T')}.{us}Z",
        f"{d.replace(' ', 't')}.{us}z",
        f"{d.replace(' ', 'T')}.{us}000Z",  # nine digits
        f"{d.replace(' ', 'T')},{us[:3]}+00:00",  # decimal comma
        f"{d}.{us} +00:00",
        f"{d}.{us[:4]} Z",
        f"{p.replace(' ', 'T')}.{us}+0530",
        f"{m.replace(' ', 'T')}.{us}{m_off[:3]}:{m_off[3:]}",
    ]


def test_every_documented_spelling_is_the_same_instant(
    instant: pd.Timestamp, now: pd.Timestamp
) -> None:
    texts = spellings(instant)
    df = pd.DataFrame(
        {
            "external_user_id": "u",
            "event_type": "x",
            "occurred_at": texts,
            "properties.i": range(len(texts)),
        }
    )
    wire = cc.events_to_wire(df, now=now)
    assert [w["occurred_at"] for w in wire] == [wire_time(instant)] * len(texts), texts


def test_spellings_written_by_real_tools_are_read(
    instant: pd.Timestamp, now: pd.Timestamp, tmp_path: Path
) -> None:
    table = pa.table(
        {
            "external_user_id": ["u"],
            "event_type": ["x"],
            "occurred_at": pa.array([instant], pa.timestamp("us", "UTC")),
        }
    )
    files = {}
    pacsv.write_csv(table, tmp_path / "pyarrow.csv")
    files["pyarrow"] = tmp_path / "pyarrow.csv"
    pl.from_arrow(table).write_csv(tmp_path / "polars.csv")  # type: ignore[union-attr]
    files["polars"] = tmp_path / "polars.csv"
    table.to_pandas().to_csv(tmp_path / "pandas.csv", index=False)
    files["pandas"] = tmp_path / "pandas.csv"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'Asia/Kolkata'")
    con.register("t", table)
    con.execute(f"COPY (SELECT * FROM t) TO '{tmp_path / 'duckdb.csv'}' (HEADER)")
    files["duckdb"] = tmp_path / "duckdb.csv"
    con.execute(f"COPY (SELECT * FROM t) TO '{tmp_path / 'duckdb.ndjson'}' (FORMAT json)")
    files["duckdb json"] = tmp_path / "duckdb.ndjson"
    for tool, path in files.items():
        written = path.read_text().splitlines()[-1]
        wire = cc.events_to_wire(path, now=now)
        assert [w["occurred_at"] for w in wire] == [wire_time(instant)], (tool, written)


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("2026-11-20 09:30:00", "occurred_at_naive"),
        ("2026-11-20", "occurred_at_naive"),
        ("2026-11-20 09:30:00 EST", "occurred_at_zone_name"),
        ("2026-11-20 09:30:00 America/New_York", "occurred_at_zone_name"),
        ("2026-11-20T09:30:00-08:00[America/Los_Angeles]", "occurred_at_zone_name"),
        ("2026-11-20 23:59:60Z", "occurred_at_format"),
        ("2026-02-29T00:00:00Z", "occurred_at_format"),
        ("2026-11-20T24:00:00Z", "occurred_at_format"),
        ("20/11/2026 09:30:00 UTC", "occurred_at_format"),
        ("infinity", "occurred_at_format"),
        (" 2026-11-20T09:30:00Z", "occurred_at_format"),
        ("1763631000", "occurred_at_type"),
    ],
)
def test_ambiguous_or_broken_spellings_are_refused_with_their_reason(
    text: str, check: str, now: pd.Timestamp
) -> None:
    report = cc.validate_events(one_event(text), now=now)
    assert list(report.failures["check"]) == [check]
    message = report.failures.iloc[0]["message"]
    assert repr(text) in message  # the value as written
    if check == "occurred_at_format":
        assert "2026-11-20T09:30:00.123+01:00" in message  # and one accepted spelling
    if check == "occurred_at_type":
        assert "epoch_unit" in message


def test_the_window_check_prints_the_value_as_written(now: pd.Timestamp) -> None:
    old = now - pd.Timedelta(days=40)
    typed = cc.validate_events(one_event(old), now=now).failures.iloc[0]["message"]
    assert old.isoformat() in typed and "Timestamp(" not in typed
    text = old.strftime("%Y-%m-%d %H:%M:%S+00")
    assert repr(text) in cc.validate_events(one_event(text), now=now).failures.iloc[0]["message"]


@pytest.mark.parametrize(
    ("values", "unit"),
    [
        (pa.array([0], pa.int64()), "s"),
        (pa.array([0], pa.int64()), "ms"),
        (pa.array([0.0], pa.float64()), "s"),
        (pa.array(["0"], pa.string()), "us"),
    ],
)
def test_epoch_numbers_need_their_unit(values: pa.Array, unit: str, now: pd.Timestamp) -> None:
    per = {"s": 1, "ms": 1_000, "us": 1_000_000}[unit]
    seconds = int((now - pd.Timedelta(hours=1)).timestamp())
    raw = values.to_pylist()[0]
    value = type(raw)(seconds * per) if not isinstance(raw, str) else str(seconds * per)
    table = pa.table(
        {
            "external_user_id": ["u"],
            "event_type": ["x"],
            "occurred_at": pa.array([value], values.type),
        }
    )
    refused = cc.validate_events(table, now=now)
    assert list(refused.failures["check"]) == ["occurred_at_type"]
    wire = cc.events_to_wire(table, now=now, epoch_unit=unit)  # type: ignore[arg-type]
    expected = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert wire[0]["occurred_at"] == expected


def test_epoch_conversion_is_exact() -> None:
    ints = normalize_timestamps(
        pd.Series([-1, 1795167000123456789], dtype="int64"), epoch_unit="ns"
    )
    assert ints.ms.tolist() == [-1, 1795167000123]  # floored before 1970 too
    floats = normalize_timestamps(pd.Series([1795167000.123456, -0.0005]), epoch_unit="s")
    assert floats.ms.tolist() == [1795167000123, -1]
    text = normalize_timestamps(
        pd.Series(["1795167000.1239999999", "-1"], dtype="str"), epoch_unit="s"
    )
    assert text.ms.tolist() == [1795167000123, -1000]
    ns_floats = normalize_timestamps(pd.Series([1.795167e18]), epoch_unit="ns")
    assert ns_floats.problem.tolist() == [TimestampProblem.BAD_TYPE]  # not exact at today's dates


def test_fractions_floor_to_the_millisecond_before_1970() -> None:
    norm = normalize_timestamps(
        pd.Series(["1969-12-31T23:59:59.9995Z", "1970-01-01T00:00:00.0009Z"])
    )
    assert norm.ms.tolist() == [-1, 0]


def test_text_inside_properties_stays_text(now: pd.Timestamp) -> None:
    df = one_event(now - pd.Timedelta(hours=1)).assign(
        **{"properties.when": ["2026-11-20 09:30:00+00"]}
    )
    wire = cc.events_to_wire(df, now=now)
    assert wire[0]["properties"] == {"when": "2026-11-20 09:30:00+00"}


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-20T09:30:00.123Z",
        "2024-02-29T23:59:59.999Z",
        "0001-01-01T00:00:00.000Z",
        "1969-12-31T23:59:59.999Z",
        "2026-02-29T09:30:00.123Z",  # not a leap year
        "2026-11-20T24:00:00.000Z",
        "2026-11-20T23:59:60.000Z",  # no leap second
        "0000-01-01T00:00:00.000Z",
        "2026-11-20t09:30:00.123z",
        "2026-11-20T09:30:00,123Z",
        "2026-11-20 09:30:00.123Z",
    ],
)
def test_a_column_spelled_as_the_wire_reads_as_the_general_parser_reads_it(text: str) -> None:
    # the shortcut for wire-spelled columns (Arrow's cast, proved by spelling it back)
    # must give every text the general parser's instant or problem
    alone = pd.Series(pd.arrays.ArrowExtensionArray(pa.array([text] * 3, pa.large_string())))
    mixed = pd.Series(  # a second spelling in the column: the general parser reads them all
        pd.arrays.ArrowExtensionArray(pa.array([text, "2026-11-20T10:30:00.123+01:00"]))
    )
    fast, general = normalize_timestamps(alone, None), normalize_timestamps(mixed, None)
    assert (fast.problem == general.problem[0]).all()
    if general.problem[0] == TimestampProblem.OK:
        assert (fast.ms == general.ms[0]).all()
