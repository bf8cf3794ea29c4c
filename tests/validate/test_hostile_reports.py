"""Reports cannot be used against their readers: what an input writes in a column name or a
cell reaches a terminal, a CI log, a JUnit viewer or a spreadsheet harmless (escaped,
quoted, neutralised, capped). The program in processes of its own, its outputs read back."""

from __future__ import annotations

import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "churn_connector._cli"]
HOSTILE_NAME = "\n::add-mask::x\n::stop-commands::t0k\n::error::pwned\x1b[2J\x07"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=120, check=False,
        errors="surrogateescape",
    )  # fmt: skip


@pytest.fixture
def hostile(now: pd.Timestamp, tmp_path: Path) -> Path:
    path = tmp_path / "hostile.csv"
    when = str(now - pd.Timedelta(hours=1))
    pd.DataFrame(
        {
            "external_user_id": ['=HYPERLINK("http://evil")', "u2", "u3"],
            "event_type": ["login", "Bad\x1b]0;title\x07\r\n::error::cell", None],
            "occurred_at": [when] * 3,
            HOSTILE_NAME: ["a", "b", "c"],
            "properties.note": ["+1", "@SUM(A1)", "-2"],
        }
    ).to_csv(path, index=False)
    return path


def test_github_annotations_carry_no_command_of_the_input(hostile: Path) -> None:
    done = _run("validate", "events", str(hostile), "--format", "github")
    assert done.returncode == 1, done.stderr
    for line in done.stdout.splitlines():
        assert line.startswith(("::error ", "::warning ", "::notice ")), line
    for stream in (done.stdout, done.stderr):
        assert "\x1b" not in stream and "\x07" not in stream
        assert not any(
            line.startswith(("::add-mask::", "::stop-commands::", "::error::"))
            for line in stream.splitlines()
        )


def test_the_text_summary_shows_names_and_values_escaped(hostile: Path) -> None:
    done = _run("validate", "events", str(hostile))
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "::add-mask::" not in [line[:12] for line in done.stdout.splitlines()]
    assert "\\x1b[2J" in done.stdout  # shown, as its escape


def test_junit_stays_well_formed_whatever_names_and_values_hold(
    hostile: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    done = _run("validate", "events", str(hostile), "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    document = xml.dom.minidom.parse(str(junit))  # noqa: S318 - our own output, and it is the test
    assert document.getElementsByTagName("testsuites")


def test_quarantine_and_failure_csvs_neutralise_formulas_and_parquet_keeps_them(
    hostile: Path, tmp_path: Path
) -> None:
    csv, parquet, failures = (
        tmp_path / "q.csv",
        tmp_path / "q.parquet",
        tmp_path / "failures.csv",
    )
    for path in (csv, parquet):
        done = _run("validate", "events", str(hostile), "--quarantine", str(path))
        assert done.returncode == 1, done.stderr
    done = _run("validate", "events", str(hostile), "--report", str(failures))
    assert done.returncode == 1, done.stderr
    shown = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert shown["external_user_id"].tolist()[0] == '\'=HYPERLINK("http://evil")'
    assert set(shown["properties.note"]) <= {"'+1", "'@SUM(A1)", "'-2"}
    kept = pd.read_parquet(parquet)
    assert kept["external_user_id"].tolist()[0] == '=HYPERLINK("http://evil")'
    assert set(kept["properties.note"]) <= {"+1", "@SUM(A1)", "-2"}
    for cell in pd.read_csv(failures, dtype=str, keep_default_na=False).to_numpy().ravel():
        assert not cell.startswith(("=", "+", "-", "@")), cell


def test_lone_surrogates_never_crash_the_quarantine(now: pd.Timestamp, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": pd.Series(["u\udc00", "u2"], dtype=object),
            "event_type": pd.Series(["login", None], dtype=object),
            "occurred_at": [now - pd.Timedelta(hours=1)] * 2,
            "properties.p": pd.Series(["a\ud800", "b"], dtype=object),
        }
    )
    report = cc.validate_events(frame)
    assert len(report.quarantine()) == 2
    for name in ("q.csv", "q.parquet"):
        report.quarantine(tmp_path / name)
    text = (tmp_path / "q.csv").read_text(encoding="utf-8")
    assert "u\\udc00" in text  # the escape, where UTF-8 cannot carry the character
    assert len(pd.read_parquet(tmp_path / "q.parquet")) == 2


def test_one_huge_value_is_never_copied_whole_into_a_report(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    big = tmp_path / "big.csv"
    cell = "X" * 5_000_000  # capitals: not snake_case
    pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": [cell, "login"],
            "occurred_at": [str(now - pd.Timedelta(hours=1))] * 2,
        }
    ).to_csv(big, index=False)
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    done = _run(
        "validate", "events", str(big), "--json", str(report), "--junit", str(junit),
        "--format", "github",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-500:]
    assert len(done.stdout) + len(done.stderr) < 20_000
    assert report.stat().st_size < 50_000
    assert junit.stat().st_size < 50_000
    sent = _run("send", "events", str(big), "--dry-run")
    assert sent.returncode == 1, sent.stderr[-500:]
    assert len(sent.stdout) + len(sent.stderr) < 20_000
