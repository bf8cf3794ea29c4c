"""Files under an object-storage ledger's prefix that its segments are not (a backup of
``ledger export`` put beside them, a segment a newer version wrote): ``send`` reads past
them with a warning (a failed read sends what was perhaps delivered: the API
de-duplicates), ``ledger stats`` and ``compact`` stop with one line naming the file. Every
segment written says its format version. moto's S3 server; the program in processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from tests.conftest import MakeEvents
from tests.ledger.servers import S3Server

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "churn_connector._cli"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=120, check=False,
        env=env or dict(os.environ),
    )  # fmt: skip


@pytest.fixture
def sent(
    s3: S3Server, s3_url: str, sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp,
    tmp_path: Path,
) -> tuple[str, Path, dict[str, str]]:  # fmt: skip
    export = tmp_path / "events.parquet"
    make_events(now, n=20).to_parquet(export)
    env = {**os.environ, "CHURN_API_KEY": sandbox.api_key}
    done = _run("send", "events", str(export), "--base-url", sandbox.base_url,
                "--ledger", s3_url, "-q", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return s3_url, export, env


def test_every_segment_says_its_format_version(sent: tuple[str, Path, dict[str, str]]) -> None:
    import s3fs  # noqa: PLC0415 - the s3 extra

    url = sent[0]
    fs = s3fs.S3FileSystem()
    segments = [p for p in fs.ls(url) if p.endswith(".parquet")]
    assert segments
    for path in segments:
        with fs.open(path, "rb") as fh:
            meta = pq.read_schema(fh).metadata
        assert meta[b"churn_ledger_segment"] == b"1"


def test_an_export_beside_the_segments_warns_a_send_and_stops_stats_in_one_line(
    sent: tuple[str, Path, dict[str, str]], sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    import s3fs  # noqa: PLC0415 - the s3 extra

    url, export, env = sent
    backup = tmp_path / "backup.parquet"
    assert _run("ledger", "export", url, str(backup)).returncode == 0
    s3fs.S3FileSystem().put(str(backup), f"{url}backup.parquet")
    done = _run("send", "events", str(export), "--base-url", sandbox.base_url,
                "--ledger", url, "-v", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ledger read failed" in done.stderr and "backup.parquet" in done.stderr
    assert "Traceback" not in done.stderr and "KeyError" not in done.stderr
    for command in (["stats", url], ["compact", url]):
        done = _run("ledger", *command)
        assert done.returncode == 3, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "backup.parquet under the prefix is not a ledger segment" in done.stderr


def test_a_segment_of_an_unknown_format_version_is_refused(
    sent: tuple[str, Path, dict[str, str]],
) -> None:
    import s3fs  # noqa: PLC0415 - the s3 extra

    url = sent[0]
    fs = s3fs.S3FileSystem()
    path = next(p for p in fs.ls(url) if p.endswith(".parquet"))
    with fs.open(path, "rb") as fh:
        table = pq.read_table(fh)
    newer = table.replace_schema_metadata({b"churn_ledger_segment": b"2"})
    sink = pa.BufferOutputStream()
    pq.write_table(newer, sink)
    fs.pipe_file(f"{url}99999999999999999999-newer.parquet", sink.getvalue().to_pybytes())
    done = _run("ledger", "stats", url)
    assert done.returncode == 3, done.stderr
    assert "is of format version 2" in done.stderr and "upgrade churn-connector" in done.stderr
