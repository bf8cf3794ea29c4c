"""The data-quality gate: thresholds on both sides of each boundary, warn-only checks, the
JSON report (against its schema, and exact on a known messy input), GitHub annotations with
the file's line numbers, JUnit XML as a JUnit consumer reads it, the input's fingerprint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import junitparser
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector.__version__ import __version__
from churn_connector._validate.checks import CHECKS, CheckInfo
from churn_connector._validate.ci import github_lines, junit_xml
from churn_connector._validate.document import schema

ROOT = Path(__file__).parents[2]


def _events(now: pd.Timestamp, n: int, bad: int) -> pd.DataFrame:
    """``n`` events, the first ``bad`` of them with a bad event type."""
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["Bad Type" if i < bad else "login" for i in range(n)],
            "occurred_at": [now - pd.Timedelta(seconds=i) for i in range(n)],
        }
    )


# --------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize(
    ("bad", "max_invalid", "status"),
    [
        (0, None, "pass"),
        (1, None, "fail"),  # no threshold: any invalid row fails, as validate always did
        (3, 3, "warn"),  # at the threshold: within it
        (4, 3, "fail"),  # one above
        (3, "3", "warn"),
        (4, "3", "fail"),
        (5, "5%", "warn"),  # 5 of 100 rows is 5%: within
        (6, "5%", "fail"),
        (0, "0%", "pass"),
        (1, "0%", "fail"),
        (1, "0.5%", "fail"),  # 1 of 100 is 1%, above 0.5%
        (100, "100%", "warn"),
    ],
)
def test_max_invalid_fails_only_above_its_threshold(
    now: pd.Timestamp, bad: int, max_invalid: Any, status: str
) -> None:
    verdict = cc.validate_events(_events(now, 100, bad), now=now).gate(max_invalid=max_invalid)
    assert verdict.status == status
    assert verdict.exit_code == (1 if status == "fail" else 0)
    assert verdict.passed is (status != "fail")
    assert verdict.invalid == bad


@pytest.mark.parametrize(
    ("bad", "warn_invalid", "status"),
    [(2, 2, "pass"), (3, 2, "warn"), (2, "2%", "pass"), (3, "2%", "warn"), (9, "2%", "warn")],
)
def test_warn_invalid_warns_only_above_its_threshold(
    now: pd.Timestamp, bad: int, warn_invalid: Any, status: str
) -> None:
    report = cc.validate_events(_events(now, 100, bad), now=now)
    verdict = report.gate(max_invalid=10, warn_invalid=warn_invalid)
    assert verdict.status == status
    assert verdict.exit_code == 0


def test_a_verdict_gives_its_reasons(now: pd.Timestamp) -> None:
    verdict = cc.validate_events(_events(now, 200, 3), now=now).gate(max_invalid="1%")
    assert verdict.reasons == ("3 invalid rows (1.5% of 200 rows): the gate fails on more than 1%",)


def test_a_check_that_only_warns_does_not_count_against_the_threshold(now: pd.Timestamp) -> None:
    events = _events(now, 10, 2)
    events.loc[5, "external_user_id"] = " "  # another check: it still counts
    report = cc.validate_events(events, now=now)
    verdict = report.gate(warn_on=["event_type_pattern"])
    assert (verdict.invalid, verdict.warned, verdict.status) == (1, 2, "fail")
    assert report.gate(max_invalid=1, warn_on=["event_type_pattern"]).status == "warn"
    assert report.n_invalid == 3  # the rows stay invalid: never sent


def test_a_row_failing_a_warned_check_and_another_counts(now: pd.Timestamp) -> None:
    events = _events(now, 10, 1)
    events.loc[0, "external_user_id"] = " "
    verdict = cc.validate_events(events, now=now).gate(warn_on=["event_type_pattern"])
    assert (verdict.invalid, verdict.warned) == (1, 0)


def test_a_missing_column_counts_every_row_unless_its_check_only_warns(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(_events(now, 10, 0).drop(columns="occurred_at"), now=now)
    assert report.gate().invalid == 10
    verdict = report.gate(warn_on=["column_in_dataframe"])
    assert (verdict.invalid, verdict.warned, verdict.status) == (0, 10, "warn")


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ("event_type_patern", "did you mean event_type_pattern"),
        ("nonsense", "is no check's name"),
    ],
)
def test_an_unknown_check_is_refused_naming_close_ones(
    now: pd.Timestamp, given: str, match: str
) -> None:
    report = cc.validate_events(_events(now, 3, 0), now=now)
    with pytest.raises(cc.ConfigurationError, match=match):
        report.gate(warn_on=[given])


def test_a_check_of_the_other_kind_is_refused(now: pd.Timestamp) -> None:
    report = cc.validate_events(_events(now, 3, 0), now=now)
    with pytest.raises(cc.ConfigurationError, match="a check of identities, not of events"):
        report.gate(warn_on=["phone_e164"])


@pytest.mark.parametrize("value", ["", "-1", "abc", "1.5", "101%", -1, 1.5, True])
def test_a_threshold_that_is_no_count_or_share_is_refused(now: pd.Timestamp, value: Any) -> None:
    report = cc.validate_events(_events(now, 3, 0), now=now)
    with pytest.raises(cc.ConfigurationError, match="max_invalid"):
        report.gate(max_invalid=value)


# --------------------------------------------------------------------------- the JSON report


@pytest.fixture
def messy_csv(now: pd.Timestamp, tmp_path: Path) -> Path:
    """Six events: line 3 a bad type, line 5 a blank user and a naive time, line 7 a bad
    type that only warns when asked; the header is line 1."""
    t = (now - pd.Timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    naive = (now - pd.Timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M:%S")
    path = tmp_path / "messy.csv"
    path.write_text(
        "external_user_id,event_type,occurred_at\n"
        f"u1,login,{t}\n"
        f"u2,Add To Cart,{t}\n"
        f"u3,login,{t}\n"
        f" ,login,{naive}\n"
        f"u5,login,{t}\n"
        f"u6,Sign Up,{t}\n"
    )
    return path


def test_the_json_report_follows_its_schema(messy_csv: Path) -> None:
    doc = json.loads(cc.validate_events(messy_csv).to_json(max_invalid="50%"))
    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)


def test_the_json_report_is_exact_on_a_known_messy_input(messy_csv: Path) -> None:
    report = cc.validate_events(messy_csv)
    doc = json.loads(report.to_json(max_invalid=2, warn_on=["event_type_pattern"], first=3))
    path = str(messy_csv)
    data = messy_csv.read_bytes()
    naive_message = report.failures["message"][2]
    assert doc == {
        "contract_version": "v1",
        "package_version": __version__,
        "kind": "events",
        "input": {
            "path": path,
            "files": [{"name": "messy.csv", "path": path, "format": "csv", "size": len(data)}],
            "fingerprint": {
                "kind": "file",
                "size": len(data),
                "rows": 6,
                "sha256": hashlib.sha256(data).hexdigest(),  # what sha256sum prints
            },
        },
        "verdict": {
            "status": "warn",
            "exit_code": 0,
            "invalid_rows": 1,
            "warned_rows": 2,
            "reasons": [
                "1 invalid row (16.66% of 6 rows), within max_invalid 2",
                "2 rows fail only checks that warn (event_type_pattern): not sent",
            ],
            "max_invalid": "2",
            "warn_invalid": None,
            "warn_on": ["event_type_pattern"],
            "gates": [],
        },
        "counts": {"rows": 6, "valid": 3, "invalid": 3, "duplicates": 0, "failures": 4},
        "checks": [
            {
                "check": "external_user_id_not_blank",
                "severity": "error",
                "rows": 1,
                "failures": 1,
                "columns": ["external_user_id"],
            },
            {
                "check": "event_type_pattern",
                "severity": "warning",
                "rows": 2,
                "failures": 2,
                "columns": ["event_type"],
            },
            {
                "check": "occurred_at_naive",
                "severity": "error",
                "rows": 1,
                "failures": 1,
                "columns": ["occurred_at"],
            },
        ],
        "columns": [
            {"column": "event_type", "rows": 2, "failures": 2},
            {"column": "external_user_id", "rows": 1, "failures": 1},
            {"column": "occurred_at", "rows": 1, "failures": 1},
        ],
        "failures": [
            {
                "row": 3,
                "file": path,
                "line": 3,
                "position": 1,
                "column": "event_type",
                "check": "event_type_pattern",
                "severity": "warning",
                "value": "Add To Cart",
                "message": report.failures["message"][0],
            },
            {
                "row": 5,
                "file": path,
                "line": 5,
                "position": 3,
                "column": "external_user_id",
                "check": "external_user_id_not_blank",
                "severity": "error",
                "value": " ",
                "message": report.failures["message"][1],
            },
            {
                "row": 5,
                "file": path,
                "line": 5,
                "position": 3,
                "column": "occurred_at",
                "check": "occurred_at_naive",
                "severity": "error",
                "value": report.failures["value"][2],
                "message": naive_message,
            },
        ],
        "failures_listed": 3,
        "notes": [],
        "wire_paths": {"columnar": 1, "per_row": 0},
    }
    assert "naive_timezone" in naive_message


def test_the_schema_in_the_docs_is_the_packages() -> None:
    docs = ROOT / "docs" / "reference" / "validation-report.v1.schema.json"
    assert json.loads(docs.read_text()) == schema()


def test_a_table_level_failure_counts_the_rows_it_marked(now: pd.Timestamp, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    _events(now, 4, 0).to_csv(folder / "part-0.csv", index=False)
    _events(now, 3, 0).drop(columns="occurred_at").to_csv(folder / "part-1.csv", index=False)
    doc = json.loads(cc.validate_events(folder, now=now).to_json())
    assert doc["checks"] == [
        {
            "check": "column_in_dataframe",
            "severity": "error",
            "rows": 3,  # the rows of part-1.csv, not all seven
            "failures": 1,
            "columns": ["occurred_at"],
        }
    ]
    assert doc["counts"]["invalid"] == 3
    assert doc["input"]["fingerprint"]["kind"] == "folder"


def test_a_folders_fingerprint_is_that_of_its_parts_sha256sum_lines(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "export"
    (folder / "day=1").mkdir(parents=True)
    _events(now, 2, 0).to_csv(folder / "day=1" / "a.csv", index=False)
    _events(now, 3, 0).to_csv(folder / "b.csv", index=False)
    lines = "".join(
        f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}\n"
        for name in ("b.csv", "day=1/a.csv")
    )
    # day=1/ beside a file at the top is two partition layouts: read the files' own columns
    fingerprint = cc.validate_events(folder, now=now, partitioning=None).fingerprint
    assert fingerprint["sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert fingerprint["rows"] == 5


def test_a_tables_fingerprint_changes_with_any_cell_and_not_with_slicing(
    now: pd.Timestamp,
) -> None:
    events = _events(now, 50, 3)
    first = cc.validate_events(events, now=now).fingerprint
    assert cc.validate_events(events, now=now, slice_rows=7).fingerprint == first
    changed = events.copy()
    changed.loc[40, "external_user_id"] = "u40x"
    assert cc.validate_events(changed, now=now).fingerprint["sha256"] != first["sha256"]
    assert first["kind"] == "table" and first["size"] is None and first["rows"] == 50


# --------------------------------------------------------------------------- CI formats


def test_github_lines_carry_the_csv_line_numbers(messy_csv: Path) -> None:
    report = cc.validate_events(messy_csv)
    lines = github_lines(report, report.gate(warn_on=["event_type_pattern"]))
    assert [line.split("::")[1] for line in lines[:-1]] == [
        f"warning file={messy_csv},line=3,title=event_type_pattern",
        f"error file={messy_csv},line=5,title=external_user_id_not_blank",
        f"error file={messy_csv},line=5,title=occurred_at_naive",
        f"warning file={messy_csv},line=7,title=event_type_pattern",
    ]
    assert lines[-1].startswith("::error title=churn-connector validate (fail)::events: 6 rows")


def test_github_lines_carry_the_ndjson_line_numbers(now: pd.Timestamp, tmp_path: Path) -> None:
    t = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    path = tmp_path / "events.ndjson"
    path.write_text(
        f'{{"external_user_id": "u1", "event_type": "login", "occurred_at": "{t}"}}\n'
        "\n"  # a blank line still counts
        f'{{"external_user_id": "u2", "event_type": "Bad", "occurred_at": "{t}"}}\n'
    )
    report = cc.validate_events(path, now=now)
    first = github_lines(report, report.gate())[0]
    assert first.startswith(f"::error file={path},line=3,title=event_type_pattern::row 3")


def test_github_lines_point_into_the_part_file_of_a_folder(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    _events(now, 2, 0).to_csv(folder / "part-0.csv", index=False)
    _events(now, 2, 1).to_csv(folder / "part-1.csv", index=False)
    report = cc.validate_events(folder, now=now)
    first = github_lines(report, report.gate())[0]
    assert first.startswith(f"::error file={folder / 'part-1.csv'},line=2,title=")


def test_github_lines_for_parquet_name_the_file_without_a_line(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "events.parquet"
    _events(now, 3, 1).to_parquet(path)
    report = cc.validate_events(path, now=now)
    assert github_lines(report, report.gate())[0].startswith(
        f"::error file={path},title=event_type_pattern::row 0, event_type:"
    )


def test_github_lines_escape_what_would_end_a_command(now: pd.Timestamp) -> None:
    events = _events(now, 2, 0)
    events.loc[0, "event_type"] = "a,b\nc: 100%"
    report = cc.validate_events(events, now=now)
    line = github_lines(report, report.gate())[0]
    assert "\n" not in line
    assert "100%25" in line  # % starts an escape in a workflow command


def test_github_lines_are_capped_with_a_summary(now: pd.Timestamp) -> None:
    report = cc.validate_events(_events(now, 80, 60), now=now)
    lines = github_lines(report, report.gate(), cap=50)
    assert len(lines) == 51
    assert lines[-1].endswith("10 more failures not shown")


def test_the_junit_report_has_a_case_per_check_and_the_failures(messy_csv: Path) -> None:
    report = cc.validate_events(messy_csv)
    path = messy_csv.with_suffix(".xml")
    path.write_text(junit_xml(report, report.gate(warn_on=["event_type_pattern"])))
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [s.name for s in suites] == [str(messy_csv), "gate"]
    cases = {case.name: case for case in suites[0]}
    # a tracking plan's rules are cases when they found something (test_plan.py)
    events_checks = [
        c.name
        for c in cc_checks()
        if c.applies_to in ("both", "events") and not c.name.startswith("plan.")
    ]
    assert list(cases) == events_checks
    failed = {name for name, case in cases.items() if not case.is_passed}
    assert failed == {"external_user_id_not_blank", "occurred_at_naive"}  # warned: passes
    blank = cases["external_user_id_not_blank"].result[0]
    assert blank.message.startswith("external_user_id_not_blank: 1 rows")
    assert "row 5, external_user_id" in (blank.text or "")
    assert suites[0].tests == len(events_checks) and suites[0].failures == 2
    gate = next(iter(suites[1]))
    assert not gate.is_passed
    totals = (sum(s.tests for s in suites), sum(s.failures for s in suites))
    assert totals == (len(events_checks) + 1, 3)


def test_the_junit_report_has_a_suite_per_part_file(now: pd.Timestamp, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    _events(now, 2, 0).to_csv(folder / "part-0.csv", index=False)
    _events(now, 3, 2).to_csv(folder / "part-1.csv", index=False)
    report = cc.validate_events(folder, now=now)
    out = tmp_path / "junit.xml"
    out.write_text(junit_xml(report, report.gate()))
    suites = list(junitparser.JUnitXml.fromfile(str(out)))
    assert [(s.name, s.failures) for s in suites] == [
        ("part-0.csv", 0),
        ("part-1.csv", 1),
        ("gate", 1),
    ]


def test_within_the_threshold_no_junit_case_fails(messy_csv: Path) -> None:
    report = cc.validate_events(messy_csv)
    out = messy_csv.with_suffix(".xml")
    out.write_text(junit_xml(report, report.gate(max_invalid="50%")))
    xml = junitparser.JUnitXml.fromfile(str(out))
    assert sum(s.failures for s in xml) == 0
    cases = {case.name: case for case in next(iter(xml))}
    assert "within the gate's threshold" in (cases["occurred_at_naive"].system_out or "")


def cc_checks() -> list[CheckInfo]:
    return list(CHECKS.values())


def test_an_identities_report_carries_its_notes_and_checks(tmp_path: Path) -> None:
    users = cc.samples.sample_users(60)
    path = tmp_path / "users.parquet"
    users.to_parquet(path)
    report = cc.validate_identities(path)
    doc = json.loads(report.to_json(max_invalid="10%"))
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["kind"] == "identities"
    assert doc["notes"] == [dict(note) for note in report.notes] != []
    assert sum(c["rows"] for c in doc["checks"]) >= doc["counts"]["invalid"] > 0
    assert all(f["line"] is None for f in doc["failures"])  # Parquet rows have no lines
