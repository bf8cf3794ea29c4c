"""The command line: exit codes, summaries and result files."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc
from churn_connector._cli import main


@pytest.fixture
def export(events: pd.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    return path


@pytest.fixture
def bad_export(events: pd.DataFrame, tmp_path: Path) -> Path:
    events.loc[3, "event_type"] = "Not Snake"
    path = tmp_path / "bad.csv"
    events.to_csv(path, index=False)
    return path


@pytest.fixture
def api_env(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


def test_validate_exits_0_when_every_row_is_valid(
    export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "events", str(export)]) == 0
    assert "10 valid, 0 invalid" in capsys.readouterr().out


def test_validate_exits_1_and_writes_the_report(bad_export: Path, tmp_path: Path) -> None:
    report = tmp_path / "failures.csv"
    assert main(["validate", "events", str(bad_export), "--report", str(report)]) == 1
    failures = pd.read_csv(report)
    assert list(failures["check"]) == ["event_type_pattern"]
    assert list(failures["row"]) == [5]  # the line number in the file (the header is line 1)


def test_send_exits_0_and_writes_chunk_and_row_frames(
    api_env: cc.Sandbox, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks, rows = tmp_path / "chunks.csv", tmp_path / "rows.parquet"
    code = main(
        [
            "send",
            "events",
            str(export),
            "--batch-size",
            "4",
            "--results",
            str(chunks),
            "--rows",
            str(rows),
        ]
    )
    assert code == 0
    assert "sent 10" in capsys.readouterr().out
    assert list(pd.read_csv(chunks)["events"]) == [4, 4, 2]
    assert (pd.read_parquet(rows)["status"] == "sent").all()
    assert len(api_env.events()) == 10


def test_send_exits_1_when_some_rows_are_invalid(api_env: cc.Sandbox, bad_export: Path) -> None:
    assert main(["send", "events", str(bad_export)]) == 1
    assert len(api_env.events()) == 9


def test_send_exits_2_when_valid_rows_are_not_delivered(api_env: cc.Sandbox, export: Path) -> None:
    api_env.set_faults(error_rate=1.0)
    assert main(["send", "events", str(export)]) == 2


def test_send_exits_3_when_the_key_is_refused(
    api_env: cc.Sandbox,
    export: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", "sk_test_wrong_wrong_wrong")
    assert main(["send", "events", str(export)]) == 3
    err = capsys.readouterr().err
    assert "refused the key" in err
    assert "sk_test_wrong_wrong_wrong" not in err


def test_send_exits_3_without_a_key(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHURN_API_KEY", raising=False)
    assert main(["send", "events", str(export), "--base-url", "http://127.0.0.1:9"]) == 3


def test_usage_errors_exit_3(export: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["send", "events", str(export), "--api-key", "x"])
    assert info.value.code == 3


def test_batch_size_over_500_exits_3(api_env: cc.Sandbox, export: Path) -> None:
    assert main(["send", "events", str(export), "--batch-size", "501"]) == 3


def test_dry_run_sends_nothing(
    api_env: cc.Sandbox, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["send", "events", str(export), "--dry-run"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert api_env.requests_log().empty


def test_sandbox_subcommand_is_dispatched(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "--help"]) == 0
    assert "--error-rate" in capsys.readouterr().out


def test_a_bad_result_file_name_is_refused_before_sending(
    api_env: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    assert main(["send", "events", str(export), "--rows", str(tmp_path / "rows.txt")]) == 3
    assert api_env.requests_log().empty


def test_a_stopped_run_still_writes_the_row_frame(
    api_env: cc.Sandbox, export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHURN_API_KEY", "sk_test_wrong_wrong_wrong")
    rows = tmp_path / "rows.csv"
    assert main(["send", "events", str(export), "--rows", str(rows)]) == 3
    assert (pd.read_csv(rows)["status"] == "failed").all()


def test_version_and_help_say_exit_codes_and_where_the_key_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and cc.__version__ in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "exit codes:" in text and "CHURN_API_KEY" in text and "``" not in text
    with pytest.raises(SystemExit):
        main(["send", "--help"])
    assert "``" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["-q", "validate", "events", "{f}"], ["validate", "events", "{f}", "-q"]],
)
def test_quiet_and_verbose_work_before_or_after_the_subcommand(
    argv: list[str], export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([a.format(f=export) for a in argv]) == 0
    assert capsys.readouterr().out == ""
    assert main(["validate", "events", str(export), "-v"]) == 0
    assert main(["validate", "events", str(export), "-v", "-q"]) == 3


def test_header_only_file_exits_0_saying_there_are_no_rows(
    api_env: cc.Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.csv"
    path.write_text("external_user_id,event_type,occurred_at\n")
    assert main(["send", "events", str(path)]) == 0
    assert "no rows" in capsys.readouterr().out


def test_a_broken_input_is_one_line_on_stderr_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.ndjson"
    path.write_text('{"a": 1}\n{"b":\n')
    assert main(["validate", "events", str(path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "e.ndjson line 2" in err


def test_rename_dtype_and_epoch_unit_options(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seconds = int((now - pd.Timedelta(hours=1)).timestamp())
    path = tmp_path / "e.csv"
    path.write_text(f"USER_ID,EVENT_TYPE,occurred_at,properties.n\nu,login,{seconds},3\n")
    argv = ["validate", "events", str(path), "--rename", "USER_ID=external_user_id"]
    assert main(argv) == 1
    assert "did you mean 'event_type'" in capsys.readouterr().out
    argv += [
        "--rename",
        "EVENT_TYPE=event_type",
        "--epoch-unit",
        "s",
        "--dtype",
        "properties.n=int64",
    ]
    assert main(argv) == 0
    with pytest.raises(SystemExit) as usage:
        main([*argv, "--dtype", "nonsense"])
    assert usage.value.code == 3
    assert main(["validate", "identities", str(path), "--epoch-unit", "s"]) == 3


@pytest.mark.parametrize(("given", "expected"), [(None, "jemalloc"), ("system", "system")])
def test_the_program_uses_arrows_jemalloc_pool_unless_told_otherwise(
    given: str | None, expected: str
) -> None:
    code = (
        "import pyarrow, churn_connector._cli as cli\n"
        "cli._use_a_lean_arrow_pool()\n"
        "print(pyarrow.default_memory_pool().backend_name)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if given is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = given
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == expected, done.stderr


def test_after_the_first_ctrl_c_the_program_leaves_a_second_to_the_default_action() -> None:
    code = (
        "import signal, churn_connector._cli as cli\n"
        "signal.signal(signal.SIGINT, cli._first_ctrl_c)\n"
        "try:\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "except KeyboardInterrupt:\n"
        "    print(signal.getsignal(signal.SIGINT) is signal.SIG_DFL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


def test_the_program_leaves_what_it_made_to_the_process_end(export: Path) -> None:
    # the console script's entry, in a process of its own: once the program is done, its
    # objects are frozen, so the interpreter's exit does not walk them (a tenth of a send)
    code = (
        "import gc, sys, churn_connector_cli\n"
        f"sys.argv = ['churn-connector', 'send', 'events', {str(export)!r}, '--dry-run', '-q']\n"
        "code = churn_connector_cli.run()\n"
        "print(code, gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["0", "True"], done.stderr


@pytest.mark.parametrize(("given", "expected"), [(None, "0"), ("1", "1")])
def test_the_program_keeps_arrows_allocator_off_huge_pages_unless_told(
    export: Path, given: str | None, expected: str
) -> None:
    code = (
        "import os, sys, churn_connector_cli\n"
        f"sys.argv = ['churn-connector', 'send', 'events', {str(export)!r}, '--dry-run', '-q']\n"
        "code = churn_connector_cli.run()\n"
        "print(code, os.environ.get('MIMALLOC_ALLOW_THP'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MIMALLOC_ALLOW_THP"}
    env["MIMALLOC_VERBOSE"] = "1"  # mimalloc says its options as it starts (on stderr)
    if given is not None:
        env["MIMALLOC_ALLOW_THP"] = given
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.stdout.split() == ["0", expected], done.stderr
    if pa.default_memory_pool().backend_name == "mimalloc":  # Arrow's own, where built in
        assert "option 'show_errors'" in done.stderr  # it said the options it read
        # the mimalloc of older pyarrow (18) has no such option; the variable is then inert
        if "option 'allow_thp'" in done.stderr:
            assert f"option 'allow_thp': {expected}" in done.stderr


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc setting")
@pytest.mark.parametrize(("given", "most"), [(None, 2), ("8", 9)])
def test_the_program_keeps_its_threads_to_two_malloc_arenas_unless_told(
    given: str | None, most: int
) -> None:
    # request bodies are built and freed on 16 sender threads: an arena each fragmented
    code = (
        "import ctypes, threading, churn_connector._cli as cli\n"
        "cli._few_malloc_arenas()\n"
        "libc = ctypes.CDLL(None)\n"
        "meet = threading.Barrier(8)\n"  # all alive at once: none takes a freed arena
        "threads = [threading.Thread(target=lambda: (bytearray(1000), meet.wait())) "
        "for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "libc.malloc_stats()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if given is not None:
        env["MALLOC_ARENA_MAX"] = given
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    arenas = done.stderr.count("Arena ")
    assert 1 <= arenas <= most, done.stderr
