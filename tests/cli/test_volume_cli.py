"""Volume and freshness on the command line: ``send --receipts`` records each run's rows
(over real HTTP to the sandbox), and ``validate --max-change`` judges the next export
against their median; ``--expect-rows`` and ``--max-lag`` fail a run that is valid row by
row, naming the gate in the summary and the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main

pytestmark = pytest.mark.e2e


def _export(path: Path, now: pd.Timestamp, n: int, ago: pd.Timedelta) -> Path:
    pd.DataFrame(
        {
            "external_user_id": [f"{path.stem}_u{i}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": [(now - ago - pd.Timedelta(seconds=i)).isoformat() for i in range(n)],
        }
    ).to_csv(path, index=False)
    return path


def test_validate_judges_an_export_against_the_sends_receipts(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    receipts = tmp_path / "receipts"
    for day, n in enumerate((40, 44, 36)):
        sent = _export(tmp_path / f"day{day}.csv", now, n, pd.Timedelta(hours=1))
        assert main(["send", "events", str(sent), "--receipts", str(receipts)]) == 0
    assert len(sandbox.events()) == 120
    today = _export(tmp_path / "today.csv", now, 12, pd.Timedelta(hours=1))
    gate = ["--max-change", "50%", "--history", str(receipts)]
    report = tmp_path / "report.json"
    assert main(["validate", "events", str(today), *gate, "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert (
        "max_change: 12 rows read, 70% fewer than the median of the last 3 events runs (40)" in out
    )
    [judged] = json.loads(report.read_text())["verdict"]["gates"]
    assert (judged["gate"], judged["status"], judged["value"]) == ("max_change", "fail", 70.0)
    usual = _export(tmp_path / "usual.csv", now, 39, pd.Timedelta(hours=1))
    assert main(["validate", "events", str(usual), *gate]) == 0


def test_expect_rows_and_max_lag_fail_an_export_valid_row_by_row(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = _export(tmp_path / "stale.csv", now, 5, pd.Timedelta(hours=8))
    assert main(["validate", "events", str(stale)]) == 0
    assert main(["validate", "events", str(stale), "--max-lag", "6h"]) == 1
    assert "max_lag: the newest occurred_at" in capsys.readouterr().out
    assert main(["validate", "events", str(stale), "--max-lag", "9h"]) == 0
    assert main(["validate", "events", str(stale), "--expect-rows", "100..10000"]) == 1
    assert "expect_rows: 5 rows read, fewer than the 100 expected" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["validate", "events", str(stale), "--expect-rows", "abc"])
    assert info.value.code == 3
    assert "MIN..MAX" in capsys.readouterr().err
