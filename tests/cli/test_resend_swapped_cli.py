"""``churn-connector resend DATA ROWS`` (the arguments swapped) says so, with the command in
the right order (exit 3), before reading the input as a rows file; nothing is sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main


@pytest.fixture
def api_env(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


@pytest.mark.parametrize(
    ("data_name", "rows_name"), [("events.csv", "rows.parquet"), ("events.parquet", "rows.csv")]
)
def test_swapped_arguments_exit_3_with_the_command_in_order_and_send_nothing(
    api_env: cc.Sandbox, events: pd.DataFrame, tmp_path: Path, data_name: str, rows_name: str
) -> None:
    data, rows = tmp_path / data_name, tmp_path / rows_name
    if data.suffix == ".csv":
        events.to_csv(data, index=False)
    else:
        events.to_parquet(data)
    assert main(["send", "events", str(data), "--rows", str(rows), "-q"]) == 0
    before = len(api_env.requests_log())
    env = {**os.environ, "CHURN_BASE_URL": api_env.base_url, "CHURN_API_KEY": api_env.api_key}
    done = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "resend", str(data), str(rows)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 3
    [line] = done.stderr.strip().splitlines()
    assert f"the rows file and the input are swapped: {rows} is the rows file" in line
    assert line.endswith(f"the rows file comes first: churn-connector resend {rows} {data}")
    assert "Traceback" not in done.stderr
    assert len(api_env.requests_log()) == before
