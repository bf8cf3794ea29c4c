"""Volume and freshness in the gate: ``expect_rows``, ``max_change`` against the median of
the receipts' runs, ``max_lag`` of the newest valid occurred_at; each a named gate in the
verdict, its reasons, the JSON report, JUnit and GitHub annotations."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import junitparser
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._validate import github_lines, junit_xml
from churn_connector._validate.document import schema


def _events(now: pd.Timestamp, n: int, *, newest_ago: pd.Timedelta) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": [now - newest_ago - pd.Timedelta(minutes=i) for i in range(n)],
        }
    )


def _receipts(path: Path, rows: list[int], kind: str = "events", **extra: object) -> Path:
    with path.open("a") as out:
        for n in rows:
            out.write(json.dumps({"kind": kind, "rows": n, "exit_code": 0, **extra}) + "\n")
    return path


@pytest.fixture
def report(now: pd.Timestamp) -> cc.ValidationReport:
    """Ten valid events, the newest 2 hours old."""
    return cc.validate_events(_events(now, 10, newest_ago=pd.Timedelta(hours=2)), now=now)


@pytest.mark.parametrize(
    ("expect", "status"),
    [("10..10", "pass"), ("11..", "fail"), ("..9", "fail"), ("..10", "pass"), ("1..20", "pass")],
)
def test_expect_rows_fails_outside_its_range_ends_included(
    report: cc.ValidationReport, expect: str, status: str
) -> None:
    verdict = report.gate(expect_rows=expect)
    assert verdict.status == status
    [gate] = verdict.gates
    assert (gate.name, gate.status, gate.value) == ("expect_rows", status, 10)
    if status == "fail":
        assert verdict.exit_code == 1
        assert verdict.reasons[0].startswith("expect_rows: 10 rows read, ")


@pytest.mark.parametrize(
    ("lag", "status"), [("3h", "pass"), ("1h", "fail"), ("119m", "fail"), ("121m", "pass")]
)
def test_max_lag_judges_the_newest_valid_occurred_at(
    report: cc.ValidationReport, lag: str, status: str
) -> None:
    verdict = report.gate(max_lag=lag)
    [gate] = verdict.gates
    assert (gate.name, gate.status, verdict.status) == ("max_lag", status, status)
    assert gate.value == 7200.0


def test_max_lag_ignores_invalid_rows_and_fails_without_a_valid_event(now: pd.Timestamp) -> None:
    df = _events(now, 3, newest_ago=pd.Timedelta(hours=5))
    df.loc[0, "occurred_at"] = now  # fresh, but invalid: no user
    df.loc[0, "external_user_id"] = ""
    verdict = cc.validate_events(df, now=now).gate(max_lag="1h", max_invalid=1)
    assert verdict.gates[0].value == pytest.approx(5 * 3600 + 60)
    assert verdict.status == "fail"
    nothing = cc.validate_events(df.iloc[:1], now=now).gate(max_lag="1h", max_invalid=1)
    assert nothing.gates[0].status == "fail" and "no valid event" in nothing.reasons[-1]


def test_max_lag_is_refused_for_identities() -> None:
    report = cc.validate_identities(pd.DataFrame({"external_user_id": ["u1"]}))
    with pytest.raises(cc.ConfigurationError, match="identities have none"):
        report.gate(max_lag="1h")


def test_max_change_compares_with_the_median_of_the_last_runs_of_the_kind(
    report: cc.ValidationReport, tmp_path: Path
) -> None:
    receipts = _receipts(tmp_path / "receipts.jsonl", [1000, 30, 20, 20])  # the last 3: 20
    _receipts(receipts, [10], kind="identities")  # another kind: no measure
    _receipts(receipts, [10], exit_code=3)  # stopped part way: no measure
    _receipts(receipts, [10], complete=False)
    verdict = report.gate(max_change="50%", history=str(receipts), history_runs=3)
    [gate] = verdict.gates
    # 10 rows against a median of 20 is a 50% change: within 50%, above 49%
    assert (gate.status, gate.value, verdict.status) == ("pass", 50.0, "pass")
    failed = report.gate(max_change="49%", history=str(tmp_path), history_runs=3)  # the folder
    assert failed.status == "fail" and failed.gates[0].value == 50.0
    assert failed.reasons == (
        "max_change: 10 rows read, 50% fewer than the median of the last 3 events runs (20); "
        "at most 49% allowed: check the export",
    )
    # with all four runs the median is 25: a 60% change
    assert report.gate(max_change="50%", history=str(receipts)).gates[0].value == 60.0


def test_max_change_without_earlier_runs_says_so_and_passes(
    report: cc.ValidationReport, tmp_path: Path
) -> None:
    verdict = report.gate(max_change="10%", history=str(tmp_path / "none.jsonl"))
    assert verdict.status == "pass"
    assert verdict.reasons[0].startswith("max_change: no earlier complete events run in ")


def test_max_change_needs_the_receipts_and_bad_limits_are_refused(
    report: cc.ValidationReport, tmp_path: Path
) -> None:
    with pytest.raises(cc.ConfigurationError, match="give their receipts with history"):
        report.gate(max_change="50%")
    for bad in ({"expect_rows": "10"}, {"expect_rows": "9..3"}, {"max_lag": "6 hours"}):
        with pytest.raises(cc.ConfigurationError):
            report.gate(**bad)  # type: ignore[arg-type]
    broken = tmp_path / "r.jsonl"
    broken.write_text("not json\n")
    with pytest.raises(cc.ConfigurationError, match=r"line 1 of .* is no receipt"):
        report.gate(max_change="50%", history=str(broken))


def test_each_gate_is_named_in_the_json_report_junit_and_github(
    report: cc.ValidationReport, tmp_path: Path
) -> None:
    verdict = report.gate(expect_rows="100..", max_lag="6h")
    document = json.loads(report.to_json(expect_rows="100..", max_lag="6h"))
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)
    gates = {g["gate"]: g["status"] for g in document["verdict"]["gates"]}
    assert gates == {"expect_rows": "fail", "max_lag": "pass"}
    assert document["verdict"]["status"] == "fail"
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(report, verdict))
    gate = list(junitparser.JUnitXml.fromfile(str(path)))[-1]
    assert (gate.name, gate.tests, gate.failures) == ("gate", 3, 2)  # the verdict, expect_rows
    judged = {case.name: not case.is_passed for case in gate}
    assert judged == {"gate": True, "gate.expect_rows": True, "gate.max_lag": False}
    lines = github_lines(report, verdict)
    assert any(line.startswith("::error title=gate.expect_rows::10 rows read") for line in lines)
