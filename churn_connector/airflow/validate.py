"""ValidateOperator: the data-quality gate as an Airflow task; nothing is sent.

It validates ``source`` (a path, folder or URI, templated, or an upstream task's output) as
``churn-connector validate`` does, judges the report with the gate's thresholds
(``max_invalid``, ``warn_invalid``, ``warn_on``), writes the reports beside the send
operators' result files (``<kind>_validation.json``, the JSON report of contract ``v1``;
``<kind>_validation.xml``, JUnit; ``<kind>_quarantine.parquet``, the invalid rows with their
reasons, when there are any), and pushes a JSON summary as its XCom: the verdict, counts per
state and per check, the input's fingerprint, file paths. Never a row's values (those stay in
the files): Airflow keeps XComs in its database.

Above ``max_invalid`` the task fails without retrying (``AirflowFailException``): the data
must change, not the attempt. A gate that cannot run (the input unreadable, a bad option)
fails too: a check that did not complete never passes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import XComArg
from airflow.sdk.exceptions import AirflowFailException

from .._core import KINDS, ChurnConnectorError, Kind, keyword_from_text
from .._events import validate_events
from .._identities import validate_identities
from .._options import EventOptions, IdentityOptions
from .._results import write_text
from .._validate import (
    GateOptions,
    ThresholdArg,
    TrackingPlan,
    ValidationReport,
    check_counts,
    dumps,
    junit_xml,
    report_document,
)
from .arguments import plan_argument
from .operators import DEFAULT_RESULTS_DIR, _ChurnSendOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["ValidateOperator"]


class ValidateOperator(_ChurnSendOperator):
    """Validate a table and judge it by the gate's thresholds; send nothing.

    ``kind``: ``"events"`` or ``"identities"``. ``validate_options`` are the keywords of
    :func:`~churn_connector.validate_events` / :func:`~churn_connector.validate_identities`
    (templated; ``naive_timezone``, ``rename``, ``dtypes``, ...). ``max_invalid``,
    ``warn_invalid`` and ``warn_on`` are :meth:`ValidationReport.gate`'s (templated
    thresholds: ``"0.5%"`` or ``"10"``). ``plan``: a tracking plan, as the send operators
    take it (a :class:`~churn_connector.TrackingPlan`, or its file's path, templated): rows
    that break it are invalid, by the checks ``plan.<event type>.<property>.<keyword>``.
    Volume and freshness (templated), as :meth:`ValidationReport.gate` takes them:
    ``expect_rows`` (``"1000..50000"``), ``max_change`` (``"50%"``, against the median of
    the last ``history_runs`` runs in the receipts at ``history``: the send operators'
    ``receipts.jsonl``), ``max_lag`` (``"6h"``).
    The task fails above ``max_invalid`` (without it, on any invalid row); its XCom is the
    summary (see the module).
    """

    template_fields: Sequence[str] = (
        "source",
        "results_dir",
        "validate_options",
        "max_invalid",
        "warn_invalid",
        "plan",
        "expect_rows",
        "max_change",
        "history",
        "max_lag",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"validate_options": "json"}
    ui_color = "#eef6e8"

    def __init__(
        self,
        *,
        source: str | os.PathLike[str] | Sequence[str] | XComArg,
        kind: Kind = "events",
        validate_options: dict[str, Any] | None = None,
        max_invalid: ThresholdArg = None,
        warn_invalid: ThresholdArg = None,
        warn_on: Sequence[str] = (),
        expect_rows: str | None = None,
        max_change: str | None = None,
        history: str | None = None,
        history_runs: int = 10,
        max_lag: str | None = None,
        results_dir: str | None = DEFAULT_RESULTS_DIR,
        results_base: str | None = None,
        plan: TrackingPlan | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            source=source, results_dir=results_dir, results_base=results_base, **kwargs
        )
        if kind not in KINDS:
            raise TypeError(f"ValidateOperator: kind must be one of {KINDS}, not {kind!r}")
        self.kind: Kind = kind
        self.validate_options = dict(validate_options or {})
        self.plan, self.plan_document = plan_argument(
            "ValidateOperator", plan, self.validate_options
        )
        self.max_invalid = max_invalid
        self.warn_invalid = warn_invalid
        self.warn_on = list(warn_on)
        self.expect_rows = expect_rows
        self.max_change = max_change
        self.history = history
        self.history_runs = history_runs
        self.max_lag = max_lag

    def execute(self, context: Context) -> dict[str, Any]:
        data = self._input(context)
        try:
            gate = GateOptions(
                max_invalid=self.max_invalid or None,  # a template left empty: unset
                warn_invalid=self.warn_invalid or None,
                warn_on=self.warn_on,
                expect_rows=self.expect_rows or None,
                max_change=self.max_change or None,
                history=self.history or None,
                history_runs=self.history_runs,
                max_lag=self.max_lag or None,
            )
            report = self._validate(data)
            verdict = report.judged(gate)
        except ChurnConnectorError as exc:  # the gate could not run: it does not pass
            raise AirflowFailException(f"churn validate {self.kind}: {exc}") from None
        files = self._write(report, verdict) if self.results_dir else {}
        summary = {
            "kind": self.kind,
            "verdict": verdict.to_dict(),
            "counts": {
                "rows": report.n_rows,
                "valid": report.n_valid,
                "invalid": report.n_invalid,
                "duplicates": report.duplicates,
            },
            "checks": check_counts(report.failures, report.table_rows, verdict.warn_on),
            "fingerprint": dict(report.fingerprint),
            "notes": [dict(note) for note in report.notes],
            "files": files,
            "results_dir": self.results_dir or None,
        }
        self._lineage_summary = summary  # the input's facets (operators.py, lineage.py)
        for reason in verdict.reasons:
            self.log.info("churn validate %s: %s", self.kind, reason)
        if not verdict.passed:
            context["ti"].xcom_push(key="churn_summary", value=summary)
            where = f" (reports: {self.results_dir})" if files else ""
            raise AirflowFailException(
                f"churn validate {self.kind}: the gate fails: {'; '.join(verdict.reasons)}{where}"
            )
        return summary

    def _lineage_quality(self) -> tuple[dict[str, int], str]:
        checks = (self._lineage_summary or {}).get("checks", [])
        return {c["check"]: int(c["rows"]) for c in checks}, "error"

    def _validate(self, data: Any) -> ValidationReport:
        table = EventOptions if self.kind == "events" else IdentityOptions
        declared = {o.name: o for o in table.keywords()}
        if unknown := sorted(set(self.validate_options) - set(declared) - {"options"}):
            raise AirflowFailException(
                f"churn validate {self.kind}: unknown validate_options {unknown}; known: "
                f"{sorted(declared)}"
            )
        options = {
            name: keyword_from_text(name, value, declared[name].hint, "validate_options")
            if name in declared
            else value
            for name, value in self.validate_options.items()
        }
        plan = self._plan(f"churn validate {self.kind}")
        if plan is not None:
            options["plan"] = plan
        validate = validate_events if self.kind == "events" else validate_identities
        return validate(data, **options)

    def _write(self, report: ValidationReport, verdict: Any) -> dict[str, str]:
        assert self.results_dir
        folder = Path(self.results_dir)
        paths = {
            "json": folder / f"{self.kind}_validation.json",
            "junit": folder / f"{self.kind}_validation.xml",
        }
        write_text(dumps(report_document(report, verdict)), paths["json"])
        write_text(junit_xml(report, verdict), paths["junit"])
        if report.n_invalid:
            paths["quarantine"] = folder / f"{self.kind}_quarantine.parquet"
            report.quarantine(paths["quarantine"])
        return {name: str(path) for name, path in paths.items()}
