"""Line endings as exporters write them: ``\\n``, ``\\r\\n``, and the lone ``\\r`` of Excel for
Mac's "CSV (Macintosh)", for the header as for the rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._read.compression import open_stream
from churn_connector._read.csv import _header
from churn_connector._read.csv_bytes import decoded_lines
from churn_connector._read.text import TextFormat


@pytest.fixture
def when(now: pd.Timestamp) -> str:
    return (now - pd.Timedelta(hours=1)).isoformat()


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_ending_reads_the_same_rows_on_the_same_lines(
    now: pd.Timestamp, when: str, tmp_path: Path, end: str
) -> None:
    lines = [
        "external_user_id,event_type,occurred_at,properties.seats",
        f"a,login,{when},1",
        f"b,login,{when},x",
        f"c,login,{when},3",
    ]
    path = tmp_path / "export.csv"
    path.write_bytes(end.join(lines).encode() + end.encode())
    report = cc.validate_events(path, now=now, dtypes={"properties.seats": "int64"})
    assert list(report.valid.index) == [2, 4]
    assert list(report.failures["row"]) == [3]


def test_a_header_longer_than_a_read_is_read_whole(tmp_path: Path) -> None:
    long = "x" * 70_000
    path = tmp_path / "wide.csv"
    path.write_bytes(f"a,{long},b\r1,2,3\r".encode())
    assert _header(path, "wide.csv", ",", TextFormat(), "utf-8") == (["a", long, "b"], 1)


def test_a_crlf_split_by_a_read_ends_one_line(tmp_path: Path) -> None:
    first = "a," + "y" * ((1 << 16) - 3)  # the \r is the read's last byte, its \n the next's
    path = tmp_path / "edge.csv"
    path.write_bytes(f"{first}\r\n1,2\r\n".encode())
    with open_stream(path) as raw:
        assert list(decoded_lines(raw, "utf-8")) == [f"{first}\r\n", "1,2\r\n"]
