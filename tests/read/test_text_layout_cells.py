r"""Cells written in a layout the read was not told: a quote escaped with a backslash (``\"``)
in a file read without ``escape=``, and ``\N`` cells in a file read without ``null=``. Their
rows were stored as something else (``say \hi\""``, the text ``\N`` as a user id); they are
refused, each with the option that reads the file as written."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._read.csv_bytes import Lines

HEADER = "external_user_id,event_type,occurred_at,properties.title\n"


@pytest.fixture
def when(now: pd.Timestamp) -> str:
    return (now - pd.Timedelta(hours=1)).isoformat()


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


def validate_on_the_command_line(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "validate", "events", str(path), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- \" in a file read without escape= -----------------------------------------------------


def test_a_backslash_escaped_quote_refuses_its_row_and_the_rest_is_stored(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f'u1,login,{when},"He said \\"hi\\""\nu2,login,{when},plain\n'
    result = client.send_events(write(tmp_path / "spark.csv", text), now=now)
    assert list(result.rows["status"]) == ["invalid", "sent"]
    error = result.rows["error"].iloc[0]
    assert error.startswith('[quote_escaped] line 2: a quoted cell holds \\" ')
    assert "pass escape='\\\\' if the file escapes quotes so" in error
    assert list(sandbox.events()["properties"]) == [{"title": "plain"}]


def test_with_escape_the_same_file_is_stored_as_written(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f'u1,login,{when},"He said \\"hi\\""\n'
    result = client.send_events(write(tmp_path / "spark.csv", text), now=now, escape="\\")
    assert result.ok
    assert list(sandbox.events()["properties"]) == [{"title": 'He said "hi"'}]


def test_a_line_split_by_an_escaped_quote_names_escape_on_the_command_line(
    when: str, tmp_path: Path
) -> None:
    text = HEADER.replace("title", "json") + f'u1,login,{when},"{{\\"a\\":1,\\"b\\":2}}"\n'
    done = validate_on_the_command_line(write(tmp_path / "spark.csv", text))
    assert done.returncode == 1
    assert "row 2: line 2 has 5 cells but the header has 4" in done.stdout
    assert 'the line holds \\" (a quote escaped with a backslash)' in done.stdout
    assert "pass --escape '\\'" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("cell", "read"),
    [
        ('"say ""hi"""', 'say "hi"'),  # RFC 4180: a quote written twice
        ('"C:\\dir\\"', "C:\\dir\\"),  # a backslash before the closing quote
        ('"a\\"""', 'a\\"'),  # a backslash, then a quote written twice
    ],
)
def test_cells_a_backslash_does_not_cut_are_read_as_before(
    now: pd.Timestamp, when: str, tmp_path: Path, cell: str, read: str
) -> None:
    report = cc.validate_events(write(tmp_path / "rfc.csv", HEADER + f"u1,login,{when},{cell}\n"))
    assert report.ok, report.failures
    assert report.valid["properties.title"].tolist() == [read]


def test_an_unquoted_cell_with_a_backslash_quote_is_refused_too(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    # RFC 4180 has no quote in an unquoted cell: a writer that wrote 12\" escaped it, and
    # read without escape= the backslash would be sent
    path = write(tmp_path / "inches.csv", HEADER + f'u1,login,{when},12\\" screen\n')
    report = cc.validate_events(path, now=now)
    assert list(report.failures["check"]) == ["quote_escaped"]
    assert cc.validate_events(path, now=now, escape="\\").valid["properties.title"].tolist() == [
        '12" screen'
    ]


def test_a_backslash_quote_split_across_two_reads_is_still_found() -> None:
    class Trickle(io.RawIOBase):
        """Two bytes a read: every pair of bytes may straddle a chunk."""

        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            chunk, self.data = self.data[:2], self.data[2:]
            return chunk

    data = b'h\n"a"\n"b \\"c\\""\nx\n"d \\"e"\n'
    lines = Lines(Trickle(data), None, quote='"', delimiter=",")
    read = b""
    while chunk := lines.read(3):
        read += chunk
    assert read == data
    assert lines.escaped_quotes == [3, 5]


# --- \N in a file read without null= -------------------------------------------------------


def test_backslash_n_cells_refuse_their_rows_naming_column_and_null(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f"\\N,login,{when},pro\nu2,login,{when},\\N\nu3,login,{when},team\n"
    result = client.send_events(write(tmp_path / "snowflake.csv", text), now=now)
    assert list(result.rows["status"]) == ["invalid", "invalid", "sent"]
    first, second = result.rows["error"].iloc[:2]
    assert first.startswith("[null_marker] line 2, column 'external_user_id': the cell is \\N")
    assert second.startswith("[null_marker] line 3, column 'properties.title'")
    assert "pass null='\\\\N' if it means null" in second
    assert list(sandbox.events()["external_user_id"]) == ["u3"]


def test_the_null_marker_failure_names_the_column_and_the_flag_on_the_command_line(
    when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "redshift.csv", HEADER + f"u1,login,{when},\\N\n")
    done = validate_on_the_command_line(path)
    assert done.returncode == 1
    assert "row 2, properties.title: line 2, column 'properties.title': the cell is \\N" in (
        done.stdout
    )
    assert "pass --null '\\N' if it means null (--null '' --null '\\N' keeps" in done.stdout
    assert "Traceback" not in done.stderr


def test_with_null_the_same_cell_is_null_and_the_row_sent(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "redshift.csv", HEADER + f"u1,login,{when},\\N\n")
    assert client.send_events(path, now=now, null=["", "\\N"]).ok
    assert list(sandbox.events()["properties"]) == [{}]


def test_an_escaped_backslash_n_is_refused_too_not_read_as_n(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    # with escape="\\", pyarrow unescapes \N into "N": a null would be sent as the text "N"
    path = write(tmp_path / "mysql.csv", HEADER + f"u1,login,{when},\\N\nu2,login,{when},a\\Nb\n")
    report = cc.validate_events(path, now=now, escape="\\")
    assert list(report.failures["check"]) == ["null_marker"]
    assert report.valid["properties.title"].tolist() == ["aNb"]  # inside a cell: escaped N


def test_backslash_n_inside_a_longer_cell_is_text(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "path.csv", HEADER + f"u1,login,{when},C:\\New\n")
    report = cc.validate_events(path, now=now)
    assert report.ok and report.valid["properties.title"].tolist() == ["C:\\New"]


def test_a_null_list_without_backslash_n_reads_it_as_the_text_asked_for(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "mixed.csv", HEADER + f"u1,login,{when},\\N\n")
    report = cc.validate_events(path, now=now, null=["", "NULL"])
    assert report.ok and report.valid["properties.title"].tolist() == ["\\N"]
