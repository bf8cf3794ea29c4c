"""``churn-connector ledger forget`` refuses a scope the ledger holds no records of, naming the
scopes it holds (exit 3): a mistyped scope in a retention job forgot nothing, with exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import churn_connector as cc
from churn_connector._cli import main

SCOPE = "https://api.example.com#0123456789abcdef"
OTHER = "https://staging.example.com#fedcba9876543210"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    with cc.Ledger(str(path)) as kept:
        kept.record(SCOPE, "events", [("e1", "d"), ("e2", "d")])
        kept.record(OTHER, "identities", [("u1", "d")])
    return path


def test_an_unknown_scope_exits_3_naming_the_known_ones_and_forgets_nothing(
    ledger: Path,
) -> None:
    command = [sys.executable, "-m", "churn_connector._cli", "ledger", "forget", str(ledger)]
    done = subprocess.run(
        [*command, "--scope", "https://api.example.com"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3
    [line] = done.stderr.strip().splitlines()
    assert "holds no records of scope 'https://api.example.com'" in line
    assert f"its scopes are {SCOPE!r}, {OTHER!r}" in line
    assert "pass one of those to --scope" in line
    assert "Traceback" not in done.stderr
    with cc.Ledger(str(ledger)) as kept:
        assert kept.count("events") == 2 and kept.count("identities") == 1


def test_a_ledger_without_records_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.sqlite"
    cc.Ledger(str(path)).close()
    assert main(["ledger", "forget", str(path), "--scope", SCOPE]) == 3
    assert f"holds no records, so no scope {SCOPE!r}" in capsys.readouterr().err


def test_a_known_scope_without_records_of_the_kind_forgets_none_and_exits_0(
    ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "forget", str(ledger), "--scope", SCOPE, "--kind", "identities"]) == 0
    assert f"forgot 0 records of {SCOPE}" in capsys.readouterr().out
