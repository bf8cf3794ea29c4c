"""A header that says how the file was misread names the option that reads it: one split by
``;``, a tab or ``|`` names ``--delimiter`` (``delimiter=``), a first line that is data
(timestamps with offsets, ids, JSON objects) says "the file seems to have no header" for
each of its cells and names ``--no-header --columns``; a real header is not second-guessed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc

COLUMNS = ["external_user_id", "event_type", "occurred_at"]


def validate_on_the_command_line(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "validate", "events", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("delimiter", "flag", "keyword"),
    [
        (";", "--delimiter ';'", "delimiter=';'"),
        ("\t", "--delimiter tab", "delimiter='\\t'"),
        ("|", "--delimiter '|'", "delimiter='|'"),
    ],
    ids=["semicolon", "tab", "pipe"],
)
def test_a_header_split_by_another_delimiter_names_the_delimiter_option(
    now: pd.Timestamp, tmp_path: Path, delimiter: str, flag: str, keyword: str
) -> None:
    at = (now - pd.Timedelta(hours=1)).isoformat()
    path = tmp_path / "export.csv"
    path.write_text(delimiter.join(COLUMNS) + "\n" + delimiter.join(["u1", "login", at]) + "\n")
    [unknown] = cc.validate_events(path, now=now).failures.query("check == 'column_in_schema'")[
        "message"
    ]
    assert f"which this read did not split on: pass {keyword}" in unknown
    assert "did you mean" not in unknown
    done = validate_on_the_command_line(path)
    assert done.returncode == 1
    assert f"which this read did not split on: pass {flag}" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "first_line",
    [
        "u1,login,2026-11-24 05:28:59.948 -0800",  # Snowflake TIMESTAMP_TZ
        "u1,login,2026-11-24 05:28:59.948+00",  # Redshift timestamptz
        "1001,login,yesterday",  # an integer id
        'u1,login,now,"{""plan"":""pro""}"',  # a JSON object
    ],
    ids=["snowflake", "redshift", "id", "json"],
)
def test_a_first_line_of_data_says_the_file_seems_to_have_no_header_for_each_cell(
    tmp_path: Path, first_line: str
) -> None:
    path = tmp_path / "unload.csv"
    path.write_text(first_line + "\nu2,login,2026-11-24 06:00:00+00\n")
    failures = cc.validate_events(path).failures
    unknown = failures[failures["check"] == "column_in_schema"]["message"].tolist()
    assert len(unknown) == first_line.count(",") + 1
    for message in unknown:
        assert "the file seems to have no header (its first line is data)" in message
        assert message.endswith(
            "pass header=False, columns=[...] (its " + f"{len(unknown)} columns, in order)"
        )
    done = validate_on_the_command_line(path)
    assert done.returncode == 1
    assert "the file seems to have no header" in done.stdout
    assert "pass --no-header --columns a,b,c" in done.stdout


def test_a_real_header_with_one_unknown_column_is_not_taken_for_data(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    at = (now - pd.Timedelta(hours=1)).isoformat()
    path = tmp_path / "export.csv"
    path.write_text(",".join([*COLUMNS, "plan"]) + f"\nu1,login,{at},pro\n")
    [message] = cc.validate_events(path, now=now).failures["message"]
    assert message.startswith("unknown column 'plan': drop it, or send it as 'properties.plan'")


def test_a_semicolon_inside_one_unknown_name_beside_known_ones_is_not_a_delimiter(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    at = (now - pd.Timedelta(hours=1)).isoformat()
    path = tmp_path / "export.csv"
    path.write_text(",".join([*COLUMNS, "a;b"]) + f"\nu1,login,{at},x\n")
    [message] = cc.validate_events(path, now=now).failures["message"]
    assert "delimiter" not in message
