"""A compressed NDJSON file that holds nothing (a finished gzip stream of no bytes: an export
of a day without rows) is 0 rows, as a header-only CSV is: exit 0, "the input holds no rows".
It has no columns to check, so nothing is reported missing; alone or as a folder's part."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main


def test_an_empty_gzip_ndjson_is_zero_rows_and_validate_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "day.ndjson.gz"
    path.write_bytes(gzip.compress(b""))
    report = cc.validate_events(path)
    assert (report.n_rows, report.failures.empty) == (0, True)
    assert main(["validate", "events", str(path)]) == 0
    out = capsys.readouterr().out
    assert "the input holds no rows: nothing to validate" in out
    assert "missing" not in out and "reserved" not in out


def test_an_empty_gzip_ndjson_sends_nothing_and_exits_0(
    sandbox: cc.Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = tmp_path / "day.jsonl.gz"
    path.write_bytes(gzip.compress(b""))
    assert main(["send", "events", str(path)]) == 0
    assert "the input holds no rows: nothing to send" in capsys.readouterr().out
    assert sandbox.requests_log().empty


def test_an_empty_gzip_part_beside_others_adds_no_failure(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    (tmp_path / "part-0.ndjson.gz").write_bytes(gzip.compress(b""))
    line = {"external_user_id": "u1", "event_type": "login", "occurred_at": now.isoformat()}
    (tmp_path / "part-1.ndjson").write_bytes(orjson.dumps(line) + b"\n")
    report = cc.validate_events(tmp_path, now=now)
    assert (report.n_rows, report.ok, report.failures.empty) == (1, True, True)
