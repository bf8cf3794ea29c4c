"""``--plan FILE`` on ``validate`` and ``send``: a row that breaks the tracking plan is
invalid by its named rule, in the summary, the JSON report and the quarantine, and is never
sent over real HTTP to the sandbox; ``--warn-on 'plan.*'`` lets the gate pass while those
rows stay out of the valid ones; a plan with a keyword outside the subset stops the run first."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main

pytestmark = pytest.mark.e2e

PLAN = """\
events:
  invoice_paid:
    type: object
    required: [amount, currency, plan]
    properties:
      amount: {type: number, minimum: 0}
      currency: {type: string, pattern: "^[a-z]{3}$"}
unknown_events: allow
"""


def _export(tmp_path: Path, now: pd.Timestamp) -> Path:
    path = tmp_path / "events.csv"
    at = (now - pd.Timedelta(hours=1)).isoformat()
    pd.DataFrame(
        {
            "external_user_id": ["u1", "u2", "u3"],
            "event_type": ["invoice_paid", "invoice_paid", "login"],
            "occurred_at": [at, at, at],
            "properties": [
                '{"amount": -40, "currency": "usd ", "plan": "pro"}',
                '{"amount": 40, "currency": "usd", "plan": "pro"}',
                "{}",
            ],
        }
    ).to_csv(path, index=False)
    return path


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    return path


def test_send_with_a_plan_sends_nothing_that_breaks_it(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    plan_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    rows = tmp_path / "rows.csv"
    path = _export(tmp_path, now)
    assert main(["send", "events", str(path), "--plan", str(plan_file), "--rows", str(rows)]) == 1
    assert list(pd.read_csv(rows)["status"]) == ["invalid", "sent", "sent"]
    assert sorted(sandbox.events()["external_user_id"]) == ["u2", "u3"]


def test_validate_warn_on_plan_rules_passes_the_gate_and_keeps_the_row_out_of_valid(
    now: pd.Timestamp, tmp_path: Path, plan_file: Path
) -> None:
    path = _export(tmp_path, now)
    valid = tmp_path / "valid.csv"
    args = ["validate", "events", str(path), "--plan", str(plan_file), "--warn-on", "plan.*"]
    assert main([*args, "--passed", str(valid)]) == 0
    assert list(pd.read_csv(valid)["external_user_id"]) == ["u2", "u3"]


def test_validate_reports_the_plans_rules_in_json_and_quarantines_the_row(
    now: pd.Timestamp, tmp_path: Path, plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _export(tmp_path, now)
    report, quarantine = tmp_path / "report.json", tmp_path / "bad.csv"
    args = ["validate", "events", str(path), "--plan", str(plan_file)]
    code = main([*args, "--json", str(report), "--quarantine", str(quarantine)])
    assert code == 1
    document = json.loads(report.read_text())
    checks = {c["check"] for c in document["checks"]}
    assert checks == {"plan.invoice_paid.amount.minimum", "plan.invoice_paid.currency.pattern"}
    assert list(pd.read_csv(quarantine)["external_user_id"]) == ["u1"]
    assert "plan.invoice_paid.amount.minimum" in capsys.readouterr().out


def test_a_plan_with_a_keyword_outside_the_subset_stops_validate_naming_it(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"events": {"signup": {"allOf": [{}]}}}))
    path = _export(tmp_path, now)
    assert main(["validate", "events", str(path), "--plan", str(plan)]) == 3
    assert "'allOf' is not in the supported subset" in capsys.readouterr().err
