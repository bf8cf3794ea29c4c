"""The data-quality gate on a Spark DataFrame: per-check counts computed by Spark.

Each task validates its partition with the package's validation (Arrow batches in, as
``mapInArrow`` hands them over) and yields a few rows of counts: its rows, invalid rows,
rows per check and per column. Spark adds them up (``groupBy().sum()``); only those sums,
a few dozen rows, reach the driver, never the data. The driver judges them with the same
thresholds as ``report.gate()``.

What a partition cannot see: a repeat of an event, or a second row for a user, in another
partition (``message_id_conflict``, ``external_user_id_duplicate``); partition identities by
user first (:func:`~churn_connector.spark.partition_by_user`) to check those.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .._core import KINDS, ConfigurationError, Kind
from .._events import validate_events
from .._identities import validate_identities
from .._options import EventOptions, IdentityOptions
from .._validate import (
    CHECKS,
    GateOptions,
    ThresholdArg,
    check_counts,
    check_of_kind,
    column_counts,
    counted_rows,
    judge,
    warns,
)
from .partition import PartitionInput
from .settings import ORDER_COLUMN

COUNT_SCHEMA = StructType(
    [
        StructField("what", StringType(), nullable=False),  # "total", "check" or "column"
        StructField("name", StringType()),  # the count's, check's or column's name
        StructField("rows", LongType(), nullable=False),
        StructField("failures", LongType(), nullable=False),
    ]
)
_TOTALS = ("rows", "invalid", "counted", "warned", "duplicates")


class _CountTask:
    """What each task runs: validate its partition, yield its counts."""

    def __init__(
        self,
        kind: Kind,
        table: EventOptions | IdentityOptions,
        names: Sequence[str],
        warn_on: Sequence[str],
    ) -> None:
        self.kind = kind
        self.table = table
        self.names = list(names)
        self.warn_on = tuple(warn_on)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = PartitionInput(self.names)
        reader = source.reader(batches, self.table.slice_rows)
        if reader is None:
            return
        if isinstance(self.table, EventOptions):
            report = validate_events(reader, options=self.table)
        else:
            report = validate_identities(reader, options=self.table)
        counted, warned = counted_rows(report, self.warn_on)
        totals = {
            "rows": report.n_rows,
            "invalid": report.n_invalid,
            "counted": counted,
            "warned": warned,
            "duplicates": report.duplicates,
        }
        what = ["total"] * len(totals)
        name: list[str | None] = list(totals)
        rows = list(totals.values())
        failures = [0] * len(totals)
        for entry in check_counts(report.failures, report.table_rows, self.warn_on):
            what.append("check")
            name.append(entry["check"])
            rows.append(entry["rows"])
            failures.append(entry["failures"])
        for entry in column_counts(report.failures, report.table_rows):
            what.append("column")
            name.append(entry["column"])
            rows.append(entry["rows"])
            failures.append(entry["failures"])
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(what, pa.string()),
                pa.array(name, pa.string()),
                pa.array(rows, pa.int64()),
                pa.array(failures, pa.int64()),
            ],
            names=["what", "name", "rows", "failures"],
        )


def validate(
    df: DataFrame,
    kind: Kind = "events",
    *,
    max_invalid: ThresholdArg = None,
    warn_invalid: ThresholdArg = None,
    warn_on: Sequence[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The gate's verdict on ``df``, from counts Spark computes (the module's docstring).

    ``kind``: ``"events"`` or ``"identities"``; ``options``: the keywords of
    :func:`~churn_connector.validate_events` / :func:`~churn_connector.validate_identities`
    (``naive_timezone``, ``now``, ``namespace``, ...). Returns a JSON-ready summary:
    ``verdict`` (as :meth:`GateVerdict.to_dict`), ``counts`` (rows, valid, invalid,
    duplicates), ``checks`` and ``columns`` (rows and failures each, summed over the
    partitions). Runs one Spark job; raises nothing for invalid rows (check
    ``summary["verdict"]["status"]``), :class:`ConfigurationError` for bad options.
    """
    if kind not in KINDS:
        raise ConfigurationError(f"kind must be one of {KINDS}, not {kind!r}")
    gate = GateOptions(max_invalid=max_invalid, warn_invalid=warn_invalid, warn_on=warn_on)
    warned_checks = tuple(gate.warn_on or ())
    for check in warned_checks:
        check_of_kind(check, kind)
    table = (EventOptions if kind == "events" else IdentityOptions).given(options)
    names = [c for c in df.columns if c != ORDER_COLUMN]
    # each column by its own name: unquoted, `properties.plan` would be the field plan of the
    # column properties (null in a map without that key), not the flat column of that name
    quoted = [F.col("`" + name.replace("`", "``") + "`") for name in names]
    positional = df.select(*quoted).toDF(*[f"_{i}" for i in range(len(names))])
    task = _CountTask(kind, table, names, warned_checks)
    with warnings.catch_warnings():
        # mapInArrow builds an Arrow UDF; PySpark 4.3 warns about pandas 3 there
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        counts = positional.mapInArrow(task, COUNT_SCHEMA)
    summed = (
        counts.groupBy("what", "name")
        .agg(F.sum("rows").alias("rows"), F.sum("failures").alias("failures"))
        .collect()
    )
    totals = dict.fromkeys(_TOTALS, 0)
    checks: list[dict[str, Any]] = []
    columns: list[dict[str, Any]] = []
    for row in summed:
        if row["what"] == "total":
            totals[row["name"]] = int(row["rows"])
        elif row["what"] == "check":
            checks.append(
                {
                    "check": row["name"],
                    "severity": "warning" if warns(row["name"], warned_checks) else "error",
                    "rows": int(row["rows"]),
                    "failures": int(row["failures"]),
                }
            )
        else:
            columns.append(
                {"column": row["name"], "rows": int(row["rows"]), "failures": int(row["failures"])}
            )
    order = {name: k for k, name in enumerate(CHECKS)}
    checks.sort(key=lambda c: order.get(c["check"], len(order)))
    columns.sort(key=lambda c: (c["column"] is None, c["column"] or ""))
    verdict = judge(totals["rows"], totals["counted"], totals["warned"], gate)
    return {
        "kind": kind,
        "verdict": verdict.to_dict(),
        "counts": {
            "rows": totals["rows"],
            "valid": totals["rows"] - totals["invalid"],
            "invalid": totals["invalid"],
            "duplicates": totals["duplicates"],
        },
        "checks": checks,
        "columns": columns,
    }
