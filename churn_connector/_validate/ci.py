"""A validation report as CI shows it: GitHub Actions workflow commands and JUnit XML.

GitHub: one ``::error`` (or ``::warning``, for a check that only warns) line per failure,
with the file and, for CSV/TSV/NDJSON rows, the line, so the pull request's diff shows the
row; at most ``cap`` of them, then one summary line with the verdict.

JUnit: one test suite per input file (a table's: one, named after its kind), one test case
per check that applies to the kind, failed (with the number of rows and the first examples)
when the check found rows and the gate failed; a last suite, ``gate``, holds the verdict as
one test case. Failures of checks that only warn, or found while the gate still passed, are
the case's ``system-out``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import pandas as pd

from .._core import echoed
from .._notebook import plural
from .._read import Source
from .checks import CHECKS, PLAN_PREFIX, info
from .failure_log import failure_line
from .gate import GateVerdict, warns

if TYPE_CHECKING:
    from .report import ValidationReport

GITHUB_CAP = 50  # annotations shown before the summary line (GitHub shows 10 per step)
EXAMPLES = 5  # failures quoted in a JUnit failure


def _data(text: str) -> str:
    # what the input wrote is made harmless first (no line break can start a workflow
    # command of its own, no terminal escape reaches the log), then GitHub's own escapes
    return echoed(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github(text: str) -> str:
    """GitHub's own escapes of a text already made harmless (``failure_line``'s)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _table_file(source: Source) -> str | None:
    if source.kind == "file" and source.parts:
        return str(source.parts[0].path)
    return source.path


def github_lines(
    report: ValidationReport, verdict: GateVerdict, *, cap: int = GITHUB_CAP
) -> list[str]:
    """Workflow command lines for ``report`` (see the module)."""
    source = report.source
    warn = set(verdict.warn_on)
    lines = []
    for rec in report.failures.head(cap).itertuples(index=False):
        at_table = rec.position is pd.NA
        file, line = (_table_file(source), None) if at_table else source.locate(rec.row)
        level = "warning" if warns(str(rec.check), warn) else "error"
        props = [f"file={_property(file)}"] if file else []
        if line is not None:
            props.append(f"line={line}")
        props.append(f"title={_property(str(rec.check))}")
        text = failure_line(
            None if at_table else rec.position, rec.row, rec.column, str(rec.message)
        )
        lines.append(f"::{level} {','.join(props)}::{_github(text)}")
    for gate in verdict.gates:  # volume and freshness: one annotation each that failed
        if gate.status == "fail":
            lines.append(f"::error title=gate.{gate.name}::{_data(gate.message)}")
    more = len(report.failures) - min(cap, len(report.failures))
    tail = f"; {more:,} more failures not shown" if more else ""
    level = {"fail": "error", "warn": "warning", "pass": "notice"}[verdict.status]
    said = "; ".join(verdict.reasons) or "every row is valid"
    head = f"{report.kind}: {plural(report.n_rows, 'row')}, {report.n_invalid:,} invalid"
    lines.append(
        f"::{level} title=churn-connector validate ({verdict.status})::"
        f"{_data(f'{head}: {said}{tail}')}"
    )
    return lines


def junit_xml(report: ValidationReport, verdict: GateVerdict) -> str:
    """The JUnit XML document for ``report`` (see the module)."""
    source = report.source
    failures = report.failures
    # a test case a check; a tracking plan's rules: those that found something
    checks = [
        c.name
        for c in CHECKS.values()
        if c.applies_to in ("both", report.kind) and not c.name.startswith(PLAN_PREFIX)
    ]
    checks += sorted({str(c) for c in failures["check"] if str(c).startswith(PLAN_PREFIX)})
    # which suite (file) each failure belongs to; table-level ones concern every file
    names = [p.name for p in source.parts] if source.kind == "folder" else []
    suites = names or [_suite_name(report, source)]
    by_suite: dict[str, list[Any]] = defaultdict(list)
    everywhere: list[Any] = []
    for rec in failures.itertuples(index=False):
        if rec.position is pd.NA or not names:
            (everywhere if names else by_suite[suites[0]]).append(rec)
            continue
        part = str(rec.row).rpartition(":")[0]
        by_suite[part if part in names else suites[0]].append(rec)
    root = ET.Element("testsuites", name=f"churn-connector validate {report.kind}")
    totals = Counter[str]()
    for suite_name in suites:
        found = [*everywhere, *by_suite.get(suite_name, [])]
        suite = _suite(suite_name, report.kind, checks, found, verdict)
        root.append(suite)
        totals["tests"] += int(suite.get("tests", "0"))
        totals["failures"] += int(suite.get("failures", "0"))
    gate = ET.SubElement(root, "testsuite", name="gate", tests="1", errors="0", skipped="0")
    case = ET.SubElement(gate, "testcase", classname=f"churn_connector.{report.kind}", name="gate")
    if verdict.status == "fail":
        failure = ET.SubElement(case, "failure", message="; ".join(verdict.reasons), type="gate")
        failure.text = "; ".join(verdict.reasons)
    elif verdict.reasons:
        ET.SubElement(case, "system-out").text = "; ".join(verdict.reasons)
    failed = int(verdict.status == "fail")
    for judged in verdict.gates:  # volume and freshness: a case each, named for its gate
        one = ET.SubElement(
            gate, "testcase", classname=f"churn_connector.{report.kind}", name=f"gate.{judged.name}"
        )
        if judged.status == "fail":
            fault = ET.SubElement(one, "failure", message=judged.message, type=judged.name)
            fault.text = judged.message
            failed += 1
        else:
            ET.SubElement(one, "system-out").text = judged.message
    gate.set("tests", str(1 + len(verdict.gates)))
    gate.set("failures", str(failed))
    totals["tests"] += 1 + len(verdict.gates)
    totals["failures"] += failed
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    _harmless(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _harmless(root: ET.Element) -> None:
    """Every name and text of the document as ``echoed`` makes it: characters XML 1.0
    cannot hold (control characters, lone surrogates) escaped, so the file stays
    well-formed whatever a column name or a value holds, and each text capped (a failure's
    examples keep their line breaks, one example a line)."""
    for element in root.iter():
        for name, value in element.attrib.items():
            element.set(name, echoed(value))
        if element.text:
            lines = element.text.split("\n")
            element.text = "\n".join(echoed(line) for line in lines)


def _suite_name(report: ValidationReport, source: Source) -> str:
    if source.kind == "file" and source.parts:
        return str(source.parts[0].path)
    return source.path or report.kind


def _suite(
    name: str, kind: str, checks: list[str], found: list[Any], verdict: GateVerdict
) -> ET.Element:
    suite = ET.Element("testsuite", name=name, tests=str(len(checks)), errors="0", skipped="0")
    by_check: dict[str, list[Any]] = defaultdict(list)
    for rec in found:
        by_check[str(rec.check)].append(rec)
    failed = 0
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=f"churn_connector.{kind}", name=check)
        recs = by_check.get(check)
        if not recs:
            continue
        rows = {rec.position for rec in recs if rec.position is not pd.NA}
        count = plural(len(rows), "row") if rows else "the table"
        examples = "\n".join(
            failure_line(rec.position, rec.row, rec.column, str(rec.message))
            for rec in recs[:EXAMPLES]
        )
        more = f"\n... {len(recs) - EXAMPLES:,} more" if len(recs) > EXAMPLES else ""
        message = f"{check}: {count} ({info(check).rule})"
        warned = warns(check, verdict.warn_on)
        if verdict.status == "fail" and not warned:
            element = ET.SubElement(case, "failure", message=message, type=check)
            element.text = examples + more
            failed += 1
        else:
            level = "warning" if warned else "within the gate's threshold"
            ET.SubElement(case, "system-out").text = f"{level}: {message}\n{examples}{more}"
    suite.set("failures", str(failed))
    return suite
