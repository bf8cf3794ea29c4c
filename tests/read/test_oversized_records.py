"""A record longer than the reader reads at once is a clean refusal naming the line and
the size, exit 3: never an interpreter abort as the program exits (pyarrow's read-ahead
thread inside our stream), never a read that fills the memory (a decompression bomb). The
program in a process of its own."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "churn_connector._cli"]
HEADER = b"external_user_id,event_type,occurred_at\n"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)


def _bomb(path: Path, head: bytes, mib: int) -> None:
    """``head``, then ``mib`` MiB of one byte and no line break, gzip-compressed (~1:1000)."""
    block = b"0" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(head)
        for _ in range(mib):
            fh.write(block)


@pytest.mark.parametrize("command", [["validate"], ["send", "--dry-run"]])
def test_a_compressed_csv_record_longer_than_a_block_is_refused_without_an_abort(
    command: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "bomb.csv.gz"
    _bomb(path, HEADER, 128)
    done = _run(command[0], "events", str(path), *command[1:])
    assert "Fatal Python error" not in done.stderr
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stderr.startswith("error: bomb.csv.gz line 2: a record (or an unclosed quote) ")
    assert "MiB" in done.stderr


def test_a_csv_cell_longer_than_a_block_names_its_line_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_bytes(
        HEADER + b"u1,login,2026-01-01T00:00:00Z\nu2,login," + b"9" * (24 << 20) + b"\n"
    )
    done = _run("validate", "events", str(path))
    assert done.returncode == 3, done.stderr[-2000:]
    assert "long.csv line 3: a record (or an unclosed quote) longer than" in done.stderr
    assert "Fatal Python error" not in done.stderr


def test_an_ndjson_bomb_is_refused_naming_the_size(tmp_path: Path) -> None:
    path = tmp_path / "bomb.ndjson.gz"
    _bomb(path, b'{"external_user_id": "', 100)
    done = _run("validate", "events", str(path))
    assert done.returncode == 3, done.stderr[-2000:]
    assert "bomb.ndjson.gz line 1 is longer than 64 MiB" in done.stderr


def test_a_header_wider_than_the_column_limit_is_refused_naming_it(tmp_path: Path) -> None:
    n = 25_000
    path = tmp_path / "wide.csv"
    names = ["external_user_id", "event_type", "occurred_at"] + [
        f"properties.c{i}" for i in range(n)
    ]
    path.write_text(
        ",".join(names) + "\n" + ",".join(["u1", "login", "2026-01-01T00:00:00Z"] + ["1"] * n)
        + "\n"
    )  # fmt: skip
    done = _run("validate", "events", str(path))
    assert done.returncode == 3, done.stderr[-2000:]
    assert "the input has 25,003 columns, more than the 10,000" in done.stderr
