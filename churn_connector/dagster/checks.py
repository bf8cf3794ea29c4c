"""An asset-check factory: the API contract as a Dagster asset check on a table asset.

``churn_check(asset, kind="events", max_invalid="0.5%")`` validates the asset's value with
:func:`churn_connector.validate_events` (or ``validate_identities``) and returns an
``AssetCheckResult`` (``plan=`` adds a tracking plan's rules): passed with no invalid row;
failed with severity WARN while the invalid rows stay within ``max_invalid``; failed with
ERROR above it, which, the check being blocking by default, keeps the assets downstream
from running (sending what failed). Its metadata: rows, valid and invalid rows, their
share, and the rows that failed each check by name (never a value).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetsDefinition,
    MetadataValue,
    asset_check,
)

from .._core import KINDS, ConfigurationError
from .._events import validate_events
from .._identities import validate_identities
from .._validate import PlanSource, ValidationReport, as_plan
from .._validate import check_counts as document_counts

__all__ = ["check_counts", "churn_check", "invalid_limit"]


def invalid_limit(max_invalid: int | str, rows: int) -> int:
    """The invalid rows allowed: a count (``10``) or a share of the rows (``"0.5%"``)."""
    if isinstance(max_invalid, str) and max_invalid.strip().endswith("%"):
        share = float(max_invalid.strip()[:-1])
        if not 0 <= share <= 100:
            raise ConfigurationError(f"max_invalid {max_invalid!r}: a share from 0% to 100%")
        return int(rows * share / 100)
    count = int(max_invalid)
    if count < 0:
        raise ConfigurationError(f"max_invalid must be at least 0, not {max_invalid!r}")
    return count


def check_counts(report: ValidationReport) -> dict[str, int]:
    """Rows that failed each check, by the check's name (a table's checks, such as a missing
    column, count every row), as the gate's JSON report counts them."""
    counts = document_counts(report.failures, report.table_rows)
    return {entry["check"]: int(entry["rows"]) for entry in counts}


def churn_check(
    asset: Any,
    *,
    kind: str = "events",
    max_invalid: int | str = 0,
    name: str | None = None,
    blocking: bool = True,
    validate_options: Mapping[str, Any] | None = None,
    plan: PlanSource | Mapping[str, Any] | None = None,
) -> AssetChecksDefinition:
    """An asset check that validates ``asset``'s value (any table the package reads) against
    the API contract; ``validate_options``: ``validate_events``' (or
    ``validate_identities``') keywords. ``plan``: a tracking plan (a
    :class:`~churn_connector.TrackingPlan`, its mapping or its file's path), loaded when the
    definitions load (a bad plan fails there): rows that break it are invalid, counted by
    their rules' names (``churn/check/plan.invoice_paid.amount.minimum``)."""
    if kind not in KINDS:
        raise ConfigurationError(f"churn_check: kind must be one of {KINDS}, not {kind!r}")
    invalid_limit(max_invalid, 0)  # a bad threshold fails when the definitions load
    options = dict(validate_options or {})
    if plan is not None:
        if options.get("plan") is not None:
            raise ConfigurationError(
                "churn_check: give the tracking plan once, as plan= or "
                "validate_options['plan'], not both"
            )
        options["plan"] = plan
    if options.get("plan") is not None:
        options["plan"] = as_plan(options["plan"])  # read now: a bad plan fails here
    planned = " and the tracking plan" if options.get("plan") is not None else ""
    validate = validate_events if kind == "events" else validate_identities
    key = asset.key if isinstance(asset, AssetsDefinition) else asset

    @asset_check(
        asset=key,
        name=name or f"churn_{kind}_contract",
        blocking=blocking,
        description=f"Every row meets the ingestion API's contract for {kind}{planned} "
        f"(ERROR above {max_invalid} invalid rows, WARN at or below).",
    )
    def _check(table: Any) -> AssetCheckResult:
        report = validate(table, **options)
        limit = invalid_limit(max_invalid, report.n_rows)
        invalid = report.n_invalid
        severity = AssetCheckSeverity.ERROR if invalid > limit else AssetCheckSeverity.WARN
        share = invalid / report.n_rows if report.n_rows else 0.0
        metadata: dict[str, Any] = {
            "churn/rows": MetadataValue.int(report.n_rows),
            "churn/valid": MetadataValue.int(report.n_valid),
            "churn/invalid": MetadataValue.int(invalid),
            "churn/invalid_share": MetadataValue.float(share),
            "churn/max_invalid": MetadataValue.int(limit),
            **{
                f"churn/check/{check}": MetadataValue.int(n)
                for check, n in sorted(check_counts(report).items())
            },
        }
        return AssetCheckResult(
            passed=invalid == 0,
            severity=severity,
            metadata=metadata,
            description=None
            if invalid == 0
            else f"{invalid:,} of {report.n_rows:,} rows are invalid (allowed: {limit:,})",
        )

    return _check
