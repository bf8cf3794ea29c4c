"""``churn-connector resend ROWS DATA`` and ``--receipts``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._resend import _send_keywords


@pytest.fixture
def api_env(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


@pytest.fixture
def export(events: pd.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "events.csv"
    events.to_csv(path, index=False)
    return path


def test_send_then_resend_delivers_everything_once_and_leaves_receipts(
    api_env: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    api_env.set_faults(error_rate=1.0)
    rows, receipts = tmp_path / "rows.parquet", tmp_path / "receipts"
    argv = ["send", "events", str(export), "--rows", str(rows), "--receipts", str(receipts)]
    assert main([*argv, "--batch-size", "4", "-q"]) == 2
    assert len(api_env.events()) == 0
    api_env.set_faults(error_rate=0.0)

    after = tmp_path / "after.csv"
    argv = ["resend", str(rows), str(export), "--rows", str(after), "--receipts", str(receipts)]
    assert main([*argv, "-q"]) == 0

    assert len(api_env.events()) == 10
    assert (pd.read_csv(after)["status"] == "sent").all()  # the whole input's account
    lines = (receipts / "receipts.jsonl").read_text().splitlines()
    sent, resent = (json.loads(line) for line in lines)
    assert (sent["command"], sent["exit_code"], sent["counts"]["failed"]) == ("send", 2, 10)
    assert (resent["command"], resent["exit_code"], resent["counts"]["sent"]) == ("resend", 0, 10)
    assert sent["input"] == resent["input"]
    assert api_env.api_key not in "".join(lines)
    # the updated rows file is one a further re-send accepts: nothing is left to send
    assert main(["resend", str(after), str(export), "-q"]) == 0
    assert len(api_env.events()) == 10


def test_resend_of_a_changed_input_exits_3_and_says_so(
    api_env: cc.Sandbox, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.csv"
    assert main(["send", "events", str(export), "--rows", str(rows), "-q"]) == 0
    export.write_text(export.read_text() + export.read_text().splitlines()[1] + "\n")
    assert main(["resend", str(rows), str(export)]) == 3
    assert "the input no longer matches" in capsys.readouterr().err


def test_a_run_that_stops_still_leaves_its_receipt(
    export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CHURN_API_KEY", "canary-key-0123456789")
    receipts = tmp_path / "r.jsonl"
    argv = ["send", "events", str(export), "--base-url", f"http://127.0.0.1:{port}"]
    assert main([*argv, "--receipts", str(receipts), "--deadline", "2", "-q"]) == 3
    receipt = json.loads(receipts.read_text())
    assert receipt["exit_code"] == 3 and receipt["complete"] is False
    assert "canary-key" not in receipts.read_text()


def test_an_option_of_the_other_kind_is_refused_by_name_not_by_a_type_error() -> None:
    # batch_size is an events option: an identities re-send refuses it before reading anything
    with pytest.raises(cc.ConfigurationError, match=r"unknown option\(s\) \['batch_size'\]"):
        _send_keywords("identities", {"batch_size": 10})
