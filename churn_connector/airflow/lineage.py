"""OpenLineage facets of a churn task: what it read, what it delivered, how many rows of each.

Imported only by the operators' ``get_openlineage_facets_on_complete`` / ``_on_failure``,
which Airflow's OpenLineage provider (``apache-airflow-providers-openlineage``) calls; this
module imports it, so nothing else here depends on it.

* **Input**: the source as datasets by OpenLineage's naming: a local path is namespace
  ``file``, name its absolute path; a URI ``s3://bucket/key`` is namespace ``s3://bucket``,
  name ``key``; a list, one dataset each. An upstream task's output (a DataFrame in XCom) is
  the upstream task's outlets when it declares any, else namespace ``airflow-xcom://<dag
  id>``, name ``<task id>``. A query (``sql=``): each table it reads, parsed by
  OpenLineage's SQL parser, namespace the database's (``postgres://host:port``,
  ``sqlite://<path>``, ``duckdb://<path>``), name ``database.schema.table`` (PostgreSQL) or
  ``schema.table``. Facets: ``dataQualityMetrics`` (rows read) and
  ``dataQualityAssertions`` (the API contract: how many rows were invalid; per check when
  the task knows them).
* **Output** (a send): namespace the API's base URL, name ``events`` or ``identities``,
  with ``outputStatistics`` (rows delivered) and the run facet ``churn`` (counts per state,
  requests, dry run).

Never a row value, never the key: counts, names and locations only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import attrs
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    RunFacet,
    data_quality_assertions_dataset,
    data_quality_metrics_input_dataset,
    output_statistics_output_dataset,
)

__all__ = [
    "ChurnRunFacet",
    "api_namespace",
    "input_datasets",
    "operator_lineage",
    "query_datasets",
]

XCOM_NAMESPACE = "airflow-xcom"
CONTRACT_ASSERTION = "churn_api_contract"


@attrs.define
class ChurnRunFacet(RunFacet):
    """The run's counts per row state, requests and whether it was a dry run."""

    kind: str
    rows: int
    counts: dict[str, int]
    requests: int
    dry_run: bool
    _additional_skip_redact: ClassVar[list[str]] = ["kind", "rows", "counts", "requests"]

    @staticmethod
    def _get_schema() -> str:
        return "https://churn-connector.invalid/spec/facets/ChurnRunFacet.json"


def api_namespace(base_url: str) -> str:
    """The output's namespace: the base URL without credentials, query or trailing slash."""
    parts = urlsplit(base_url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path.rstrip('/')}"


def _location(location: str) -> tuple[str, str]:
    parts = urlsplit(location)
    if parts.scheme == "file":
        return "file", parts.path
    if len(parts.scheme) > 1 and parts.netloc:  # a URI (a one-letter scheme: a Windows drive)
        # never its credentials (user:password@, an access key's secret), nor its query (a
        # presigned URL's signature): lineage is read by everyone who reads the catalog
        host = parts.netloc.rpartition("@")[2]
        return f"{parts.scheme}://{host}", parts.path.lstrip("/") or "/"
    return "file", os.path.abspath(location)


def input_datasets(
    source: Any, upstream: tuple[str, str, Sequence[str]] | None
) -> list[tuple[str, str]]:
    """(namespace, name) of each input: the rendered source, or an upstream task's output
    given as (dag id, task id, the URIs of its outlets)."""
    if upstream is not None:
        dag_id, task_id, outlets = upstream
        if outlets:
            return [_location(uri) for uri in outlets]
        return [(f"{XCOM_NAMESPACE}://{dag_id}", task_id)]
    if isinstance(source, str | os.PathLike):
        return [_location(os.fspath(source))]
    if isinstance(source, list | tuple):
        return [_location(os.fspath(item)) for item in source]
    return []


def query_datasets(
    sql: str,
    *,
    namespace: str,
    database: str | None,
    dialect: str,
    default_schema: str | None,
) -> list[tuple[str, str]]:
    """(namespace, name) of each table ``sql`` reads (see the module); a query the parser
    cannot read is named ``query`` in the database's namespace."""
    try:
        import openlineage_sql  # type: ignore[import-untyped]  # noqa: PLC0415

        parsed = openlineage_sql.parse([sql], dialect=dialect, default_schema=default_schema)
    except Exception:  # lineage only: an unparsed query still names its database
        return [(namespace, "query")]
    found = []
    for table in parsed.in_tables:
        parts = [table.database or database, table.schema, table.name]
        found.append((namespace, ".".join(p for p in parts if p)))
    return found or [(namespace, "query")]


def _assertions(
    summary: Mapping[str, Any], checks: Mapping[str, int], severity: str
) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    invalid = int(summary["counts"].get("invalid", 0))
    found = [
        data_quality_assertions_dataset.Assertion(
            assertion=CONTRACT_ASSERTION,
            success=invalid == 0,
            severity=severity,
            description="every row meets the ingestion API's contract",
            expected="0",
            actual=str(invalid),
        )
    ]
    found += [
        data_quality_assertions_dataset.Assertion(
            assertion=check, success=n == 0, severity=severity, expected="0", actual=str(n)
        )
        for check, n in sorted(checks.items())
    ]
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(assertions=found)


def operator_lineage(
    *,
    inputs: list[tuple[str, str]],
    output: tuple[str, str] | None,
    summary: Mapping[str, Any] | None,
    checks: Mapping[str, int] | None = None,
    severity: str = "warn",
) -> OperatorLineage:  # type: ignore[type-arg]
    """The task's lineage; without a summary (the task failed before it read), the datasets
    alone; without an output (a gate, which sends nothing), the input's facets alone."""
    input_facets: dict[str, Any] = {}
    output_facets: dict[str, Any] = {}
    run_facets: dict[str, Any] = {}
    if summary is not None:
        # a send's summary has rows beside its counts; a gate's (ValidateOperator) among them
        rows = int(summary.get("rows", summary["counts"].get("rows", 0)))
        input_facets = {
            "dataQualityMetrics": (
                data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
                    columnMetrics={}, rowCount=rows
                )
            ),
            "dataQualityAssertions": _assertions(summary, checks or {}, severity),
        }
    if summary is not None and output is not None:
        delivered = int(summary["counts"].get("sent", 0))
        output_facets = {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=delivered
            )
        }
        run_facets = {
            "churn": ChurnRunFacet(
                kind=str(summary["kind"]),
                rows=rows,
                counts={k: int(v) for k, v in summary["counts"].items()},
                requests=int(summary["requests"]),
                dry_run=bool(summary.get("dry_run", False)),
            )
        }
    return OperatorLineage(
        inputs=[
            InputDataset(namespace=ns, name=name, inputFacets=input_facets) for ns, name in inputs
        ],
        outputs=[]
        if output is None
        else [OutputDataset(namespace=output[0], name=output[1], outputFacets=output_facets)],
        run_facets=run_facets,
    )
