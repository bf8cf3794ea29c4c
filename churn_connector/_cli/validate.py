"""``churn-connector validate``: the data-quality gate.

Exit codes (a contract, docs/reference/exit-codes.md): 0 the gate passes (warnings
allowed); 1 invalid rows above ``--max-invalid`` (any invalid row without it); 3 the check
could not run (the input unreadable, bad options, or an error of ours): a check that did
not complete never passes.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, get_args

from .._core import ChurnConnectorError, ConfigurationError, ExitCode, options_of
from .._delivery import SendOptions
from .._events import validate_events
from .._identities import validate_identities
from .._read import Format
from .._results import (
    check_report_path,
    check_result_path,
    refuse_clashes,
    write_frame,
    write_text,
)
from .._slices import without_valid_rows
from .._validate import (
    FIRST_FAILURES,
    GITHUB_CAP,
    GateOptions,
    ValidationReport,
    csv_safe,
    dumps,
    github_lines,
    junit_xml,
    report_document,
    write_rows,
)
from .flags import _given, add_data_arguments, add_flag, data_options, input_of, inputs_of
from .held import Signalled, signals_held

FORMATS = ("text", "json", "github")
INPUT_FORMATS: tuple[str, ...] = get_args(Format)


def add_validate(sub: Any, verbosity: Any) -> argparse.ArgumentParser:
    """The ``validate`` subcommand's parser."""
    p: argparse.ArgumentParser = sub.add_parser(
        "validate", help="check a file against the contract, as a gate; send nothing"
    )
    verbosity(p)
    # --format takes the input's format (for files named without one) and the report's:
    # their values differ (csv, tsv, parquet, ndjson, avro; text, json, github)
    add_data_arguments(p, skip=("format",))
    gate = p.add_argument_group(
        "the gate (exit 1 above --max-invalid, or outside a volume or freshness limit; 0 otherwise)"
    )
    for option in options_of(GateOptions):
        # --history is the run history's one flag (SendOptions'): the gate reads it
        if option.declared.help is None:
            option = next(o for o in options_of(SendOptions) if o.name == option.name)
        add_flag(gate, option)
    out = p.add_argument_group("reports")
    out.add_argument(
        "--format",
        choices=[*FORMATS, *INPUT_FORMATS],
        action="append",
        dest="formats",
        default=None,
        help="stdout: a summary (text, the default), the JSON report (json) or GitHub Actions "
        "annotations (github); csv, tsv, parquet, ndjson or avro: the format of files "
        "whose name says none, as for send (repeatable: one of each)",
    )
    out.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report here")
    out.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report here")
    out.add_argument(
        "--first",
        type=int,
        default=FIRST_FAILURES,
        metavar="N",
        help=f"failures listed in the JSON report (default {FIRST_FAILURES})",
    )
    out.add_argument("--report", type=Path, help="write the failures to this .csv/.parquet")
    out.add_argument(
        "--passed",
        type=Path,
        metavar="FILE",
        help="write the rows that passed, as read, to this .csv/.parquet (ready to send)",
    )
    out.add_argument(
        "--quarantine",
        type=Path,
        metavar="FILE",
        help="write the rows that did not, with row, failed_checks and reasons (.csv/.parquet)",
    )
    return p


def run_validate(args: argparse.Namespace) -> int:
    """Validate, write the reports asked for, and return the gate's exit code."""
    try:
        return _run(args)
    except Exception as exc:  # a check that did not complete never passes
        if _ours(exc):
            raise  # the caller's handler prints it and exits 3
        traceback.print_exc()
        print(
            "error: the check could not complete (an error of churn-connector: please "
            "report it); the gate does not pass",
            file=sys.stderr,
        )
        return ExitCode.STOPPED


def _ours(exc: Exception) -> bool:
    return isinstance(exc, ChurnConnectorError)


def _formats(args: argparse.Namespace) -> str:
    """Split ``--format``'s values into the input's (``args.format``) and the report's."""
    given = args.formats or []
    for kinds, what in ((FORMATS, "report"), (INPUT_FORMATS, "input")):
        found = [v for v in given if v in kinds]
        if len(set(found)) > 1:
            raise ConfigurationError(
                f"--format names two {what} formats ({' and '.join(found)}): give one"
            )
    args.format = next((v for v in given if v in INPUT_FORMATS), None)
    return next((v for v in given if v in FORMATS), "text")


def _run(args: argparse.Namespace) -> int:
    args.output = _formats(args)
    given = _given(args, options_of(GateOptions))
    if args.history is not None:  # the run history's flag (SendOptions' declaration)
        given["history"] = args.history
    gate = GateOptions(**given)
    _check_paths(args)
    validate = validate_events if args.kind == "events" else validate_identities
    # the rows that passed are kept only for --passed: without it, memory stays flat
    with nullcontext() if args.passed is not None else without_valid_rows():
        report: ValidationReport = validate(input_of(args), **data_options(args))
    verdict = report.judged(gate)
    quiet = args.quiet
    say = print if args.output == "text" else _to_stderr
    if not quiet:
        say(report.summary())
        if report.n_rows == 0:
            say("the input holds no rows: nothing to validate")
        say(f"gate: {verdict.status}" + "".join(f"; {r}" for r in verdict.reasons))
    text = None
    if args.output == "json" or args.json is not None:
        text = dumps(report_document(report, verdict, first=max(args.first, 0)))
        if args.output == "json":
            sys.stdout.write(text)
    if args.output == "github":
        print("\n".join(github_lines(report, verdict, cap=GITHUB_CAP)))
    _write_files(args, report, verdict, text)
    if not quiet:
        written = [
            f"{what} {path}"
            for what, path in (
                ("JSON report", args.json),
                ("JUnit report", args.junit),
                ("failures", args.report),
                ("passed rows", args.passed),
                ("quarantined rows", args.quarantine),
            )
            if path is not None
        ]
        if written:
            say("written: " + ", ".join(written))
    return verdict.exit_code


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr)


def _check_paths(args: argparse.Namespace) -> None:
    """Every result file checked before anything is read: writable, and neither the input
    nor another result file of this run."""
    for path in (args.report, args.passed, args.quarantine):
        check_result_path(path)
    check_report_path(args.json, "the JSON report")
    check_report_path(args.junit, "the JUnit report")
    refuse_clashes(inputs_of(args), _results_of(args))


def _results_of(args: argparse.Namespace) -> list[tuple[str, Path | None]]:
    return [
        ("--json", args.json),
        ("--junit", args.junit),
        ("--report", args.report),
        ("--passed", args.passed),
        ("--quarantine", args.quarantine),
    ]


def _write_files(
    args: argparse.Namespace, report: ValidationReport, verdict: Any, text: str | None
) -> None:
    """The result files, each written whole (a temporary name, synced, renamed); a first
    SIGINT or SIGTERM meanwhile waits until they are, then ends the program (130 / 143)."""
    with signals_held() as held:
        if args.json is not None and text is not None:
            write_text(text, args.json, "the JSON report")
        if args.junit is not None:
            write_text(junit_xml(report, verdict), args.junit, "the JUnit report")
        if args.report is not None:
            failures = report.failures
            # a CSV opened in a spreadsheet runs no formula of the input's (OWASP's rule)
            csv = args.report.suffix.lower() == ".csv"
            write_frame(csv_safe(failures) if csv else failures, args.report)
        if args.passed is not None:
            write_rows(report.valid, args.passed, labels=False)
        if args.quarantine is not None:
            report.quarantine(args.quarantine)
    if held:
        raise Signalled(held[0])
