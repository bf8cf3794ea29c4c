"""The API key never appears in any output: reprs, logs, results, exceptions, CLI output."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc

KEY = "sk_test_SECRET_must_not_leak_42"


@pytest.fixture
def keyed_sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[KEY]) as sb:
        yield sb


def test_key_is_absent_from_client_and_config_reprs(keyed_sandbox: cc.Sandbox) -> None:
    client = cc.Client(keyed_sandbox.base_url, KEY)
    assert KEY not in repr(client)
    assert KEY not in repr(client.config)
    assert KEY not in str(client.config.api_key)


def test_key_is_absent_from_debug_logs_results_and_retries(
    keyed_sandbox: cc.Sandbox,
    events: pd.DataFrame,
    now: pd.Timestamp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keyed_sandbox.script_faults([cc.Fault("5xx"), cc.Fault("drop")])
    client = cc.Client(keyed_sandbox.base_url, KEY)
    with caplog.at_level(logging.DEBUG):
        result = client.send_events(events, now=now, batch_size=5)
    assert result.ok
    assert KEY not in caplog.text
    assert KEY not in result.chunks.to_csv() + result.rows.to_csv() + repr(result)
    assert KEY not in result._repr_html_()


def test_key_is_absent_from_authentication_errors_even_pickled(
    keyed_sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    wrong = KEY + "_wrong"
    with pytest.raises(cc.AuthenticationError) as info:
        cc.Client(keyed_sandbox.base_url, wrong).send_events(events, now=now)
    blob = pickle.dumps(info.value)
    assert wrong.encode() not in blob
    assert wrong not in str(info.value) + repr(info.value)


def test_key_is_absent_from_cli_output(
    keyed_sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "events.parquet"
    events.assign(occurred_at=events["occurred_at"]).to_parquet(path)
    env = {"CHURN_API_KEY": KEY, "CHURN_BASE_URL": keyed_sandbox.base_url, "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "-v", "send", "events", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout + out.stderr


def test_secret_does_not_print_itself() -> None:
    secret = cc.Secret(KEY)
    assert KEY not in f"{secret} {secret!r}"
    assert secret.reveal() == KEY
