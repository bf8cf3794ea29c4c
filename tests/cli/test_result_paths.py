"""No file of the user's is lost: a result path that is the input (by any spelling or link)
or another result path of the same run is refused before anything is read or sent; report
and receipt paths that cannot be written are refused before the run; ``validate``'s result
files are written whole, a signal meanwhile waiting until they are. Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.conftest import MakeEvents

pytestmark = pytest.mark.e2e  # real processes throughout

CLI = [sys.executable, "-m", "churn_connector._cli"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.fixture
def export(make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    frame = make_events(now, n=20)
    frame.loc[3, "event_type"] = None  # one invalid row: every result file has something
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("send", "--rows"),
        ("send", "--results"),
        ("validate", "--quarantine"),
        ("validate", "--passed"),
        ("validate", "--report"),
        ("validate", "--json"),
        ("validate", "--junit"),
    ],
)
def test_a_result_path_that_is_the_input_is_refused_and_the_input_kept(
    command: str, flag: str, export: Path
) -> None:
    before = export.read_bytes()
    extra = ["--dry-run"] if command == "send" else []
    done = _run(command, "events", str(export), flag, str(export), *extra)
    assert done.returncode == 3, done.stderr
    assert f"{flag} {export} is the input file" in done.stderr
    assert "Traceback" not in done.stderr
    assert export.read_bytes() == before


def test_a_link_to_the_input_or_another_spelling_is_the_input(export: Path, tmp_path: Path) -> None:
    before = export.read_bytes()
    hard = tmp_path / "hard.csv"
    os.link(export, hard)
    soft = tmp_path / "out" / "soft.csv"
    soft.parent.mkdir()
    soft.symlink_to(export)
    for path in (hard, soft, tmp_path / "out" / ".." / "in.csv"):
        done = _run("validate", "events", str(export), "--passed", str(path))
        assert done.returncode == 3, done.stderr
        assert "is the input file" in done.stderr
    assert export.read_bytes() == before


def test_a_result_inside_the_input_folder_is_refused(
    make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    make_events(now, n=5).to_parquet(folder / "part-0.parquet")
    done = _run("send", "events", str(folder), "--dry-run", "--rows", str(folder / "rows.csv"))
    assert done.returncode == 3, done.stderr
    assert "lies inside the input folder" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.parquet"]


@pytest.mark.parametrize(
    ("command", "first", "second"),
    [
        ("send", "--rows", "--results"),
        ("validate", "--passed", "--quarantine"),
        ("validate", "--json", "--junit"),
    ],
)
def test_two_results_on_one_file_are_refused_before_anything_is_sent(
    command: str, first: str, second: str, export: Path, tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    out = tmp_path / "out.csv"
    env = {**os.environ, "CHURN_API_KEY": sandbox.api_key}
    extra = ["--base-url", sandbox.base_url] if command == "send" else []
    done = _run(command, "events", str(export), first, str(out), second, str(out), *extra, env=env)
    assert done.returncode == 3, done.stderr
    assert "name one file" in done.stderr
    assert f"{first} {out}" in done.stderr and f"{second} {out}" in done.stderr
    assert not out.exists()
    assert len(sandbox.requests_log()) == 0


@pytest.mark.parametrize(
    ("command", "flag"),
    [("send", "--receipts"), ("validate", "--json"), ("validate", "--junit")],
)
def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(
    command: str, flag: str, export: Path, tmp_path: Path, sandbox: cc.Sandbox
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {**os.environ, "CHURN_API_KEY": sandbox.api_key}
    extra = ["--base-url", sandbox.base_url] if command == "send" else []
    target = str(blocker / "report.out")  # a file where a folder would have to be
    done = _run(command, "events", str(export), flag, target, *extra, env=env)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: cannot write the ") and target in done.stderr
    assert done.stdout == ""  # no summary: the run never started
    assert len(sandbox.requests_log()) == 0


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_sigterm_while_passed_rows_are_written_completes_them_then_exits(
    make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    n = 300_000
    export = tmp_path / "events.parquet"
    frame = make_events(now, n=n, users=50)
    frame["occurred_at"] = now - pd.Timedelta(hours=1) - pd.to_timedelta(range(n), unit="s")
    frame.to_parquet(export)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [*CLI, "validate", "events", str(export), "-q", "--passed", str(out / "passed.csv")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and any(
            p.name.startswith(".passed.csv.") and p.suffix == ".part" for p in out.iterdir()
        ):
            break  # the file is being written, under its temporary name
        time.sleep(0.002)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err == "interrupted: the result files were completed first\n"
    assert len(pd.read_csv(out / "passed.csv", dtype=str)) == n
    assert sorted(os.listdir(out)) == ["passed.csv"]  # no temporary left


def test_resend_refuses_to_write_its_rows_over_the_rows_file_it_reads(
    export: Path, tmp_path: Path
) -> None:
    rows = tmp_path / "rows.csv"
    assert _run("send", "events", str(export), "--dry-run", "--rows", str(rows)).returncode == 1
    before = rows.read_bytes()
    done = _run("resend", str(rows), str(export), "--dry-run", "--results", str(rows))
    assert done.returncode == 3, done.stderr
    assert f"--results {rows} is the input file" in done.stderr
    assert rows.read_bytes() == before
