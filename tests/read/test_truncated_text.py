"""A text export cut short: a file that ends without a final newline and whose last record is
short of cells, or stops inside a quoted cell or a JSON object, has that row refused
(``truncated``) and the rest sent; a last record that is whole but unterminated is sent, with
a note in the report (a value cut at its end cannot be told from a whole one)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main

HEADER = "external_user_id,event_type,occurred_at,properties.n\n"


@pytest.fixture
def when(now: pd.Timestamp) -> str:
    return (now - pd.Timedelta(hours=1)).isoformat()


def write(path: Path, text: str) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def tabbed(text: str, name: str) -> str:
    return text.replace(",", "\t") if ".tsv" in name else text


@pytest.mark.parametrize("name", ["cut.csv", "cut.tsv", "cut.csv.gz", "cut.tsv.gz"])
def test_a_last_line_short_of_cells_without_newline_is_refused_and_the_rest_stored(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path, name: str
) -> None:
    text = tabbed(HEADER + f"u1,login,{when},123\nu2,login,{when[:-9]}", name)
    result = client.send_events(write(tmp_path / name, text), now=now)
    assert list(result.rows["status"]) == ["sent", "invalid"]
    assert "[truncated] line 3 has 3 of the 4 cells" in result.rows["error"].iloc[1]
    assert "it was cut short" in result.rows["error"].iloc[1]
    assert list(sandbox.events()["external_user_id"]) == ["u1"]


def test_a_last_line_cut_inside_a_quoted_cell_without_newline_is_truncated(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    header = "external_user_id,event_type,occurred_at,properties\n"
    text = header + f'u1,login,{when},"{{""a"":1}}"\nu2,login,{when},"{{""a'
    report = cc.validate_events(write(tmp_path / "cut.csv", text), now=now)
    failure = report.failures.iloc[0]
    assert (failure["row"], failure["check"]) == (3, "truncated")
    assert "ends inside the quoted cell of column 'properties'" in failure["message"]
    assert list(report.valid.index) == [2]


@pytest.mark.parametrize("name", ["cut.ndjson", "cut.ndjson.gz"])
def test_an_ndjson_last_line_cut_inside_its_object_is_refused_and_the_rest_stored(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path, name: str
) -> None:
    whole = {"external_user_id": "u1", "event_type": "login", "occurred_at": when}
    text = orjson.dumps(whole).decode() + '\n{"external_user_id":"u2","event_type":"lo'
    result = client.send_events(write(tmp_path / name, text), now=now)
    assert list(result.rows["status"]) == ["sent", "invalid"]
    assert (
        "[truncated] line 2: the file ends inside this line's JSON" in result.rows["error"].iloc[1]
    )
    assert list(sandbox.events()["external_user_id"]) == ["u1"]


def test_a_cut_value_in_a_whole_last_line_is_sent_with_a_note_naming_line_and_column(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    # "123" cut to "12": every cell is there, so nothing tells the cut; the note says so
    path = write(tmp_path / "cut.csv", HEADER + f"u1,login,{when},123\nu2,login,{when},12")
    result = client.send_events(path, now=now)
    assert result.ok
    assert list(sandbox.events()["properties"]) == [{"n": "123"}, {"n": "12"}]
    [note] = result.notes
    assert (note["kind"], note["column"], note["count"]) == ("no_final_newline", "properties.n", 1)
    assert note["message"].startswith("cut.csv ends without a final newline after line 3")
    assert "compare that line's 'properties.n' cell with the source" in note["message"]


def test_a_whole_ndjson_last_line_without_newline_is_sent_with_a_note(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    line = {"external_user_id": "u1", "event_type": "login", "occurred_at": when}
    result = client.send_events(write(tmp_path / "e.ndjson", orjson.dumps(line).decode()), now=now)
    assert result.ok and len(sandbox.events()) == 1
    [note] = result.notes
    assert (note["kind"], note["column"]) == ("no_final_newline", "")
    assert "after line 1: a whole JSON object" in note["message"]


@pytest.mark.parametrize("name", ["whole.csv", "whole.ndjson"])
def test_a_file_that_ends_with_its_newline_has_no_note(
    now: pd.Timestamp, when: str, tmp_path: Path, name: str
) -> None:
    line = {"external_user_id": "u1", "event_type": "x", "occurred_at": when}
    if name.endswith(".csv"):
        text = HEADER + f"u1,login,{when},123\n"
    else:
        text = orjson.dumps(line).decode() + "\n"
    report = cc.validate_events(write(tmp_path / name, text), now=now)
    assert report.ok and report.notes == []


def test_a_short_last_line_that_ends_with_its_newline_is_still_line_cells(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "short.csv", HEADER + f"u1,login,{when},1\nu2,login,{when}\n")
    assert list(cc.validate_events(path, now=now).failures["check"]) == ["line_cells"]


def test_a_header_alone_without_its_newline_is_zero_rows_with_a_note(tmp_path: Path) -> None:
    report = cc.validate_events(write(tmp_path / "head.csv", HEADER.rstrip("\n")))
    assert report.n_rows == 0
    [note] = report.notes
    assert (
        "head.csv ends without a final newline after its header: no row was read"
        in (note["message"])
    )


def test_the_note_of_a_slice_split_for_the_first_requests_is_given_once(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    # the first slice is sent in parts (heads of 2,000 rows): each part carries the
    # reader's notes, and the report still has one
    at = [(now - pd.Timedelta(minutes=i + 1)).isoformat() for i in range(5_000)]
    lines = [f"u{i},login,{t},{i}" for i, t in enumerate(at)]
    result = client.send_events(write(tmp_path / "big.csv", HEADER + "\n".join(lines)), now=now)
    assert result.ok and [n["kind"] for n in result.notes] == ["no_final_newline"]


def test_the_cli_exits_1_for_a_cut_file_with_the_line_and_no_traceback(
    when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "cut.csv", HEADER + f"u1,login,{when},123\nu2,lo")
    done = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "validate", "events", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "row 3: line 3 has 2 of the 4 cells and the file ends there" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_the_cli_prints_the_note_and_exits_0_for_a_whole_unterminated_file(
    when: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "whole.csv", HEADER + f"u1,login,{when},123")
    assert main(["validate", "events", str(path)]) == 0
    assert "note: whole.csv ends without a final newline after line 2" in capsys.readouterr().out


def test_a_folder_of_parts_without_final_newlines_names_three_and_counts_the_rest(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    for part in range(5):
        write(tmp_path / f"part-{part}.csv", HEADER + f"u{part},login,{when},{part}")
    report = cc.validate_events(tmp_path, now=now)
    assert report.ok and report.n_rows == 5
    assert [n["message"].split(" ends ")[0] for n in report.notes[:3]] == [
        "part-0.csv",
        "part-1.csv",
        "part-2.csv",
    ]
    assert report.notes[3]["count"] == 2
    assert report.notes[3]["message"].startswith("2 more files end without a final newline")
