"""A quoted CSV cell still open when the file ends: pyarrow reads every line after the quote
into that cell without a word, so a stray quote (or a file cut short in a quoted cell)
would send one row holding the rest of the file and lose the rows after it."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._read.csv_bytes import open_quote

HEADER = "external_user_id,event_type,occurred_at,properties.plan\n"


@pytest.fixture
def when(now: pd.Timestamp) -> str:
    return (now - pd.Timedelta(hours=1)).isoformat()


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


def test_a_file_cut_short_inside_a_quoted_cell_refuses_that_row(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "cut.csv", HEADER + f'a,login,{when},pro\nb,login,{when},"te')
    report = cc.validate_events(path, now=now)
    assert list(report.valid.index) == [2]
    failure = report.failures.iloc[0]
    # without a final newline, a quote still open at the end is a cut (see test_truncated)
    assert (failure["row"], failure["check"]) == (3, "truncated")
    assert "ends inside the quoted cell of column 'properties.plan'" in failure["message"]
    assert "it was cut short" in failure["message"]


def test_a_stray_quote_that_swallows_later_lines_says_how_many(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f'a,login,{when},"pro\nb,login,{when},free\nc,login,{when},team\n'
    report = cc.validate_events(write(tmp_path / "stray.csv", text), now=now)
    assert report.n_rows == 1  # what pyarrow made of the file: one row, the rest in its cell
    failure = report.failures.iloc[0]
    assert (failure["row"], failure["check"]) == (2, "quote_closed")
    assert "the 2 line(s) after it were read into that cell" in failure["message"]


@pytest.mark.e2e
def test_nothing_of_an_unclosed_row_is_sent(
    client: cc.Client, sandbox: cc.Sandbox, when: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "cut.csv", HEADER + f'a,login,{when},pro\nb,login,{when},"te\n')
    result = client.send_events(path)
    assert list(sandbox.events()["external_user_id"]) == ["a"]
    assert result.counts["invalid"] == 1


@pytest.mark.parametrize(
    "last",
    [
        '"two\nlines"\n',  # a quoted cell that ends in a line break, closed
        '"ends in a break\n"',  # the same, without the file's last newline
        '"say ""hi""\n"\n',  # doubled quotes inside
        'te"x\n',  # a quote inside an unquoted cell is a character
    ],
)
def test_closed_quotes_in_the_last_cell_are_read_as_written(
    now: pd.Timestamp, when: str, tmp_path: Path, last: str
) -> None:
    report = cc.validate_events(
        write(tmp_path / "ok.csv", HEADER + f"a,login,{when},{last}"), now=now
    )
    assert report.failures.empty
    assert report.n_rows == 1


def test_a_gzipped_file_cut_short_inside_a_quote_is_found_too(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(gzip.compress((HEADER + f'a,login,{when},"pro\n').encode()))
    report = cc.validate_events(path, now=now)
    assert list(report.failures["check"]) == ["quote_closed"]


def test_the_cli_exits_1_and_names_the_line(
    when: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "cut.csv", HEADER + f'a,login,{when},pro\nb,login,{when},"te')
    assert main(["send", "events", str(path), "--dry-run"]) == 1
    assert "[truncated] line 3" in capsys.readouterr().out


def test_an_escaped_quote_does_not_close_the_cell() -> None:
    assert open_quote('a,"x\\"\n', ",", '"', "\\")
    assert not open_quote('a,"x\\""\n', ",", '"', "\\")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet='ab,"\n', max_size=6), min_size=1, max_size=4))
def test_cells_written_by_the_csv_module_are_never_open(cells: list[str]) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    written = out.getvalue()
    assert not open_quote(written, ",", '"', None)
    # cut inside the last quoted cell (before its closing quote): open
    if written.endswith('"\n') and len(cells[-1]) > 0:
        assert open_quote(written[:-2], ",", '"', None)


def test_an_open_quote_in_an_earlier_column_is_named_for_what_it_is(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f'a,"login,{when},pro\nb,login,{when},free\nc,login,{when},team\n'
    report = cc.validate_events(write(tmp_path / "stray.csv", text), now=now)
    failure = report.failures.iloc[0]
    assert (failure["row"], failure["check"]) == (2, "quote_closed")
    assert "the 2 line(s) after it were read into that cell" in failure["message"]


def test_a_line_short_of_a_cell_is_still_line_cells(
    now: pd.Timestamp, when: str, tmp_path: Path
) -> None:
    text = HEADER + f"a,login,{when}\nb,login,{when},free\n"
    report = cc.validate_events(write(tmp_path / "short.csv", text), now=now)
    assert list(report.failures["check"]) == ["line_cells"]
