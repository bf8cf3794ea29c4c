"""The ``churn`` data source: ``df.write.format("churn")...save()`` sends partition by partition.

Spark creates the writer on the driver (``ChurnDataSource.writer``: every option is checked
there, before a task starts), pickles it to the tasks, and each task's ``write`` sends its
partition with the package's Arrow path and returns its summary (a commit message). When
every task has succeeded, ``commit`` (on the driver) adds the summaries up into one, logs it,
and raises :class:`DeliveryError` when valid rows were not delivered; Spark reports that as
``AnalysisException [PYTHON_DATA_SOURCE_ERROR]`` with the error's text, which carries the
summary between markers, so :func:`save` can raise the package's own error again.

A failed task is retried by Spark (``spark.task.maxFailures``) and sends its whole partition
again: message ids are content hashes, so the API stores each event once, and the summary
counts the re-sends it absorbed (``duplicates_reported``, when its answers say so). There is
nothing to roll back in ``abort``: the API has no transactions, and re-running the job is safe.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .._core import ConfigurationError, DeliveryError
from .._tasks import combine, describe, undelivered
from .partition import PartitionInput, Where, reported_duplicates, send
from .results import partition_by_user, task_parallelism
from .settings import NAME, ORDER_COLUMN, SparkSettings, plan_text, refuse_token_on_connect

_OPEN, _CLOSE = "[churn-summary]", "[/churn-summary]"


@dataclass
class ChurnCommitMessage(WriterCommitMessage):
    """What one task reports to the driver: its partition's summary (never rows or keys)."""

    partition: int
    attempt: int
    summary: dict[str, Any]
    duplicates_reported: int | None


class ChurnWriter(DataSourceArrowWriter):
    """Sends a partition per task; adds the tasks' summaries up on the driver."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings

    def __repr__(self) -> str:
        return f"ChurnWriter(kind={self.settings.kind!r})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ChurnCommitMessage:
        where = Where.here()
        reader = PartitionInput().reader(iterator, self.settings.slice_rows)
        if reader is None:  # an empty partition
            empty = combine(self.settings.kind, [])
            return ChurnCommitMessage(where.partition, where.attempt, empty, None)
        recorded = send(self.settings, reader)
        if recorded.error is not None:
            # the key refused, the API unreachable: the task fails, and Spark retries it
            raise recorded.error
        assert recorded.result is not None
        duplicates = reported_duplicates(recorded.result.chunks)
        return ChurnCommitMessage(where.partition, where.attempt, recorded.summary(), duplicates)

    def job_summary(self, messages: Sequence[WriterCommitMessage | None]) -> dict[str, Any]:
        """The summary of the whole write: the tasks' added up, the retries they took."""
        ours = [m for m in messages if isinstance(m, ChurnCommitMessage)]
        summary = combine(self.settings.kind, [m.summary for m in ours])
        reported = [m.duplicates_reported for m in ours if m.duplicates_reported is not None]
        summary.pop("elapsed_s")  # the longest task says little about a job
        summary["tasks"] = len(ours)
        summary["retried_partitions"] = sorted(m.partition for m in ours if m.attempt > 0)
        summary["duplicates_reported"] = sum(reported) if reported else None
        summary["request_budget"] = self.settings.budget()
        return summary

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        summary = self.job_summary(messages)
        self._keep(summary, aborted=False)
        failure = undelivered(summary, allow_invalid=not self.settings.fail_on_invalid)
        if failure is not None:
            raise DeliveryError(
                f"churn {failure}; every delivered row stays delivered, and running the job "
                f"again re-sends only duplicates the API drops "
                f"{_OPEN}{json.dumps(summary)}{_CLOSE}",
                counts=failure.counts,
            )
        # the commit runs on the driver: its output reaches the driver's log
        print(f"churn {describe(summary)}; {retries_said(summary)}; {_budget(summary)}")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        summary = self.job_summary(messages)
        self._keep(summary, aborted=True)
        print(
            f"churn {self.settings.kind}: the write was aborted after "
            f"{summary['counts'].get('sent', 0):,} rows were delivered by tasks that "
            "finished; running it again is safe (the API drops what it already holds)"
        )

    def _keep(self, summary: dict[str, Any], *, aborted: bool) -> None:
        """Write the summary where option summary_path says (a file on the driver)."""
        path = self.settings.summary_path
        if path is None:
            return
        target = Path(path)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps({**summary, "aborted": aborted}))
        os.replace(partial, target)


def retries_said(summary: dict[str, Any]) -> str:
    """The retries a summary counts, in words."""
    retried = summary["retried_partitions"]
    if not retried:
        return "no task was retried"
    absorbed = summary["duplicates_reported"]
    said = "" if absorbed is None else f", and the API dropped {absorbed:,} re-sent events"
    return f"partitions {retried} were retried{said}"


def _budget(summary: dict[str, Any]) -> str:
    budget = summary["request_budget"]
    if budget["per_task"] is None:
        return "no request budget"
    said = f"each task kept to {budget['per_task']:g} requests/s"
    if budget["parallelism"] is not None:
        return said
    return (
        f"{said} ({budget['max_requests_per_second']:g}/s split {budget['assumed_parallelism']}"
        " ways: option parallelism, the tasks that run at once, raises it)"
    )


class ChurnDataSource(DataSource):
    """``df.write.format("churn")``: send a DataFrame to the ingestion API (write only)."""

    writer_class = ChurnWriter

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: StructType, overwrite: bool) -> ChurnWriter:  # noqa: FBT001
        return self.writer_class(self._settings(schema, overwrite, "mode('append')"))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: FBT001
        """``df.writeStream.format("churn")``: each micro-batch sent (stream.py)."""
        settings = self._settings(schema, overwrite, "outputMode('append')")
        try:
            # Spark 4.0 has no Arrow stream writer, which the sink is (module stream.py)
            from .streaming import ChurnStreamWriter  # noqa: PLC0415
        except ImportError as exc:
            raise ConfigurationError(
                f"the churn streaming sink needs Spark 4.1 or later ({exc})"
            ) from None
        return ChurnStreamWriter(settings)

    def _settings(self, schema: StructType, overwrite: bool, append: str) -> SparkSettings:  # noqa: FBT001
        if overwrite:
            raise ConfigurationError(
                f"the churn API cannot be overwritten, only added to: use {append}"
            )
        settings = SparkSettings.from_options(self.options)
        partitioned = settings.partitioned_by_user or ORDER_COLUMN in schema.fieldNames()
        if settings.kind == "identities" and not partitioned:
            raise ConfigurationError(
                "kind=identities needs every row of a user in one partition (else two "
                "tasks could identify one user at once, and the order of a user's rows "
                "is lost): write churn_connector.spark.partition_by_user(df), use "
                "churn_connector.spark.save(df, kind='identities'), or, if the DataFrame "
                "is already partitioned by external_user_id, say so with "
                "option('partitioned_by_user', 'true')"
            )
        return settings


def register(spark: SparkSession) -> None:
    """Make ``df.write.format("churn")`` known to this session. Spark 4 also finds it by
    itself where the package is installed on the driver (module ``pyspark_churn``); Spark
    4.0 then refuses to register it again, which changes nothing, so that is let pass."""
    try:
        spark.dataSource.register(ChurnDataSource)
    except PySparkException as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise


def save(
    df: DataFrame,
    base_url: str | None = None,
    *,
    kind: str = "events",
    parallelism: int | None = None,
    **options: Any,
) -> dict[str, Any] | None:
    """``df.write.format("churn")...save()`` with what a caller wants around it.

    Registers the data source, partitions identities by user (:func:`partition_by_user`),
    fills in ``parallelism`` on classic Spark (:func:`task_parallelism`), and raises the
    package's :class:`DeliveryError` (with ``counts``) instead of Spark's
    ``AnalysisException`` when valid rows were not delivered. Returns the job's summary
    (rows, counts, requests, tasks, retried partitions, re-sends the API reported) when this
    process can read the driver's files (classic Spark; Spark Connect with a local server),
    else None. ``options``: as for the data source (``api_token``, ``max_concurrency``,
    ``namespace``, ``duplicates``, ...), typed or text.
    """
    refuse_token_on_connect(df, options)
    if kind == "identities" and ORDER_COLUMN not in df.columns:
        df = partition_by_user(df)
    parallelism = parallelism or task_parallelism(df)
    register(df.sparkSession)
    with tempfile.TemporaryDirectory(prefix="churn-spark-") as folder:
        path = str(options.pop("summary_path", None) or os.path.join(folder, "summary.json"))
        given = {**options, "kind": kind, "base_url": base_url, "parallelism": parallelism}
        writer = df.write.format(NAME).mode("append").option("summary_path", path)
        for name, value in given.items():
            if value is not None:
                text = plan_text(value) if name == "plan" else _text(value)
                writer = writer.option(name, text)
        try:
            writer.save()
        except Exception as exc:
            typed = _typed(exc)
            if typed is exc:
                raise
            raise typed from None
        if not os.path.exists(path):
            return None
        summary: dict[str, Any] = json.loads(Path(path).read_text())
        summary.pop("aborted", None)
        return summary


def _text(value: Any) -> str:
    """An option value as the text Spark carries (JSON for lists and mappings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | dict):
        return json.dumps(value)
    return str(value)


def _typed(exc: Exception) -> Exception:
    """Spark's error for a commit that raised DeliveryError, as that DeliveryError again."""
    found = re.search(re.escape(_OPEN) + r"(\{.*?\})" + re.escape(_CLOSE), str(exc))
    if found is None:
        return exc
    summary = json.loads(found.group(1))
    return DeliveryError(
        f"churn rows not delivered: {describe(summary)}", counts=dict(summary["counts"])
    )
