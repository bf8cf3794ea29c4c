"""Disks that fail end cleanly: exit 3, one line naming the path and the errno, the run
stopped like any other stop, and no result file that reads as a whole but shorter result.

A folder even root may not write to is /sys (sysfs takes no new files); a full disk is a
child process under RLIMIT_FSIZE, where a write past the limit fails with EFBIG as a full
disk fails with ENOSPC."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._results.result import write_frames
from tests.conftest import Figures, MakeEvents

pytestmark = pytest.mark.e2e  # real HTTP and processes throughout

UNWRITABLE = Path("/sys/churn-connector-results")


def _limited(size: int) -> Callable[[], None]:
    """A child's set-up: no file may grow past ``size`` bytes; the write fails, no signal."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def _cli(
    args: list[str], sandbox: cc.Sandbox, tmp_path: Path, size: int
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "send", "events", *args, "-q"],
        env={**os.environ, "CHURN_API_KEY": sandbox.api_key, "TMPDIR": str(tmp_path)},
        preexec_fn=_limited(size),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def export(make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path) -> Path:
    path = tmp_path / "events.parquet"
    make_events(now, n=10_000, users=50).to_parquet(path)
    return path


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs Linux's /sys")
@pytest.mark.parametrize("option", ["--rows", "--results"])
def test_an_unwritable_result_folder_stops_the_run_before_anything_is_sent(
    option: str,
    export: Path,
    sandbox: cc.Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    target = UNWRITABLE / "rows.csv"
    code = main(
        ["send", "events", str(export), "--base-url", sandbox.base_url, option, str(target)]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: cannot write the result file {target}: ")
    assert "(EPERM)" in err or "(EACCES)" in err
    assert sandbox.stats()["stored"] == 0
    assert sandbox.requests_log().empty


def test_a_result_file_that_cannot_be_written_after_the_send_is_exit_3_naming_path_and_errno(
    export: Path, sandbox: cc.Sandbox, tmp_path: Path, figures: Figures
) -> None:
    rows, chunks = tmp_path / "out" / "rows.csv", tmp_path / "out" / "chunks.csv"
    args = [str(export), "--base-url", sandbox.base_url, "--rows", str(rows)]
    done = _cli([*args, "--results", str(chunks)], sandbox, tmp_path, size=200_000)
    assert done.returncode == 3, done.stderr
    assert done.stderr == (
        f"error: cannot write the result file {rows}: File too large (EFBIG); "
        "larger than a file may grow here (ulimit -f, or the file system's limit)\n"
    )
    assert sandbox.stats()["stored"] == 10_000  # everything was sent first
    assert not rows.exists()  # no shorter file that reads as the whole result
    assert os.listdir(rows.parent) == ["chunks.csv"]  # complete, and no temporary left
    assert pd.read_csv(chunks)["events"].sum() == 10_000
    figures(f"exit {done.returncode}; {done.stderr.strip()}")


def test_a_full_temp_folder_for_the_message_ids_stops_the_run_with_one_line(
    export: Path, sandbox: cc.Sandbox, tmp_path: Path, figures: Figures
) -> None:
    chunks = tmp_path / "chunks.csv"
    args = [str(export), "--base-url", sandbox.base_url, "--slice-rows", "1000"]
    done = _cli([*args, "--results", str(chunks)], sandbox, tmp_path, size=64_000)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        f"error: cannot write the temporary file of the message ids in {tmp_path}: "
        "File too large (EFBIG); free space there"
    )
    assert "Traceback" not in done.stderr
    # the requests in flight landed and are recorded; the rest was never sent
    sent = pd.read_csv(chunks)
    assert sent["events"].sum() == sandbox.stats()["stored"] < 10_000
    figures(f"exit 3; {sandbox.stats()['stored']:,} of 10,000 sent before the spill failed")


def test_a_result_file_cut_short_by_an_interrupt_leaves_the_previous_file_and_no_temporary(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("row,status\n0,sent\n1,sent\n")

    def frames() -> Iterator[pd.DataFrame]:
        yield pd.DataFrame({"status": ["sent"]}, index=pd.Index([0], name="row"))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_frames(frames(), path)
    assert path.read_text() == "row,status\n0,sent\n1,sent\n"
    assert os.listdir(tmp_path) == ["rows.csv"]
