"""Warehouse exports delivered over real HTTP to the sandbox: a file that breaks part way
leaves every delivered row accounted for, and a re-run after the fix stores nothing twice;
CRM exports and decimals arrive as the user meant them."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main

ROWS, GROUP = 2_400, 600


pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def export(now: pd.Timestamp) -> pa.Table:
    return pa.table(
        {
            "external_user_id": [f"u{i % 50}" for i in range(ROWS)],
            "event_type": ["order_placed"] * ROWS,
            "occurred_at": pa.array(
                [now - pd.Timedelta(seconds=i + 60) for i in range(ROWS)],
                pa.timestamp("ms", "UTC"),
            ),
            "properties.amount": pa.array([float(i) for i in range(ROWS)]),
        }
    )


def write_parquet(table: pa.Table, path: Path, *, corrupt_group: int | None = None) -> Path:
    pq.write_table(table, path, row_group_size=GROUP, compression="none", write_page_checksum=True)
    if corrupt_group is not None:
        # the middle of the group's bytes: from its first column chunk to the next group's
        meta = pq.ParquetFile(path).metadata
        start = meta.row_group(corrupt_group).column(0).data_page_offset
        end = meta.row_group(corrupt_group + 1).column(0).data_page_offset
        middle = (start + end) // 2
        with path.open("r+b") as fh:
            fh.seek(middle)
            fh.write(b"\xff" * 64)
    return path


def test_a_parquet_file_breaking_mid_send_is_accounted_for_and_a_rerun_stores_nothing_twice(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    table = export(now)
    path = write_parquet(table, tmp_path / "export.parquet", corrupt_group=2)
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(cc.InputError) as info:
        client.send_events(path, now=now, ledger=ledger, slice_rows=GROUP, batch_size=200)
    error = info.value
    assert "export.parquet breaks at row 1200 (row group 2 of 4)" in str(error)
    assert error.rows is not None and error.chunks is not None
    counts = error.counts
    assert sum(counts.values()) == len(error.rows) <= 1200  # unread rows never entered the book
    # the requests in flight when reading broke were let land: every row read is accounted
    # for as delivered, exactly what the API stored
    assert counts["sent"] == len(error.rows) == sandbox.stats()["stored"] > 0
    assert set(error.rows["status"]) == {"sent"}
    # the fixed file: the ledger skips what was delivered, the rest goes, nothing twice
    write_parquet(table, path)
    again = client.send_events(path, now=now, ledger=ledger, slice_rows=GROUP, batch_size=200)
    assert again.counts["skipped"] == counts["sent"]
    assert again.counts["sent"] == ROWS - counts["sent"]
    assert sandbox.stats()["stored"] == ROWS


def test_cli_send_of_a_file_breaking_part_way_exits_3_and_writes_its_results(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = write_parquet(export(now), tmp_path / "export.parquet", corrupt_group=2)
    rows, chunks = tmp_path / "rows.csv", tmp_path / "chunks.csv"
    code = main(
        [
            "send",
            "events",
            str(path),
            "--base-url",
            sandbox.base_url,
            "--slice-rows",
            "600",
            "--rows",
            str(rows),
            "--results",
            str(chunks),
            "-q",
        ]
    )
    assert code == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "export.parquet breaks at row 1200" in err
    written = pd.read_csv(rows)
    assert 0 < (written["status"] == "sent").sum() == sandbox.stats()["stored"]
    assert len(written) <= 1200
    assert len(pd.read_csv(chunks)) > 0


def test_a_csv_breaking_far_in_stops_with_the_line_and_the_delivered_rows(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    when = (now - pd.Timedelta(hours=1)).isoformat()
    lines = [f"u{i},login,{when},{i}".encode() for i in range(30_000)]
    lines[27_000] = b"u27000,login," + when.encode() + b",caf\xe9"  # latin-1 in a UTF-8 file
    head = b"external_user_id,event_type,occurred_at,properties.i\n"
    path = tmp_path / "big.csv"
    path.write_bytes(head + b"\n".join(lines) + b"\n")
    with pytest.raises(cc.InputError) as info:
        client.send_events(path, now=now, slice_rows=2_000)
    assert "big.csv line 27002 is not valid utf-8" in str(info.value)
    assert info.value.line == 27_002
    counts = info.value.counts
    assert 0 < counts["sent"] <= sandbox.stats()["stored"] <= counts["sent"] + counts["failed"]
    assert sum(counts.values()) < 30_000


def test_identities_from_a_crm_csv_arrive_as_meant(
    client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    path = tmp_path / "crm.csv"
    path.write_text(
        "external_user_id,email,email_opted_in,phone,sms_verified,channels\n"
        '1, Ana@Example.com ,Yes,+1 (415) 555-0100,t,"[{""channel"": ""push"", ""address"": ""tok""}]"\n'
        "2,bo@example.com,N,+44 20 7946 0000,0,\n"
        "3,cy@example.com,maybe,+44 (0)20 7946 0000,1,\n"
    )
    result = client.identify(path)
    assert result.counts["sent"] == 2 and result.counts["invalid"] == 1
    failures = str(result.rows.loc[4, "error"])
    assert "email_opted_in_type" in failures and "phone_e164" in failures
    users: dict[str, list[dict[str, Any]]] = dict(
        zip(sandbox.users()["external_user_id"], sandbox.users()["channels"], strict=True)
    )
    ana = {item["channel"]: item for item in users["1"]}
    assert ana["email"]["address"] == "Ana@Example.com" and ana["email"]["opted_in"] is True
    assert ana["sms"]["address"] == "+14155550100" and ana["sms"]["verified"] is True
    assert ana["push"]["address"] == "tok"
    bo = {item["channel"]: item for item in users["2"]}
    assert bo["email"]["opted_in"] is False and bo["sms"]["address"] == "+442079460000"


def test_decimals_are_refused_by_default_and_converted_on_request(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    con = duckdb.connect()
    when = (now - pd.Timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S+00")
    relation = con.sql(
        f"SELECT 'u' || i AS external_user_id, 'order_placed' AS event_type, "
        f"TIMESTAMPTZ '{when}' AS occurred_at, "
        'CAST(19.90 AS DECIMAL(10, 2)) AS "properties.amount", '
        'CAST(0.0000001 AS DECIMAL(18, 7)) AS "properties.rate" FROM range(3) t(i)'
    )
    refused = cc.validate_events(relation, now=now)
    assert set(refused.failures["check"]) == {"property_value_json"}
    assert "decimals='float'" in refused.failures.iloc[0]["message"]
    as_text = cc.events_to_wire(relation, now=now, decimals="str")
    assert as_text[0]["properties"] == {"amount": "19.90", "rate": "0.0000001"}
    as_float = client.send_events(relation, now=now, decimals="float")
    assert as_float.counts["sent"] == 3
    assert sandbox.events()["properties"].iloc[0] == {"amount": 19.9, "rate": 1e-07}
    inexact = pd.DataFrame(
        {
            "external_user_id": ["u"],
            "event_type": ["x"],
            "occurred_at": [now - pd.Timedelta(hours=1)],
            "properties": [{"big": Decimal("12345678901234567890.5")}],
        }
    )
    message = cc.validate_events(inexact, now=now, decimals="float").failures.iloc[0]["message"]
    assert "decimals='str'" in message
