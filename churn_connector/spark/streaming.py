"""The ``churn`` streaming sink: ``df.writeStream.format("churn")...start()`` (Spark 4.1+).

Each micro-batch is sent like a batch write (:class:`~churn_connector.spark.ChurnWriter`):
every task sends its partition with the package's validation, wire format and retries, and
on the driver ``commit`` adds the tasks' summaries up. Then:

* the micro-batch's summary (its ``batch_id``, rows, counts per state, requests, tasks,
  retried partitions, re-sends the API reported) is printed to the driver's log and, with
  option ``summary_path``, appended to that file as one JSON line per micro-batch;
* valid rows that were not delivered (``rejected``, ``failed``; with ``fail_on_invalid``
  also ``invalid``, ``expired`` and ``held``) raise :class:`~churn_connector.DeliveryError`, which
  fails the query before Spark records the micro-batch as committed.

Exactly once at the API, with no state of ours: Spark replays a micro-batch that did not
commit (a task retried, or the query restarted from its checkpoint) with the same rows, and
the same rows have the same message ids, so the API stores each event once and answers the
replays as duplicates (``duplicates_reported``). No ledger is needed, nor wanted across
executors: the checkpoint says which micro-batches are done, the ids make a replay harmless.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .._core import DeliveryError
from .._tasks import describe, undelivered
from .settings import SparkSettings
from .source import ChurnCommitMessage, ChurnWriter, retries_said


class ChurnStreamWriter(DataSourceStreamArrowWriter):
    """Sends each micro-batch; fails the query when valid rows were not delivered."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings
        self._batch = ChurnWriter(settings)  # what a micro-batch's tasks do is a batch write

    def __repr__(self) -> str:
        return f"ChurnStreamWriter(kind={self.settings.kind!r})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ChurnCommitMessage:
        return self._batch.write(iterator)

    def summary(self, messages: list[WriterCommitMessage | None], batch_id: int) -> dict[str, Any]:
        """One micro-batch's summary: the batch write's, with its id first."""
        return {"batch_id": batch_id, **self._batch.job_summary(messages)}

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        summary = self.summary(messages, batchId)
        failure = undelivered(summary, allow_invalid=not self.settings.fail_on_invalid)
        if failure is not None:
            # Spark aborts the batch next: abort keeps its summary, as not committed
            raise DeliveryError(
                f"churn micro-batch {batchId}: {failure}; the query stops before the batch is "
                "committed: restarted from its checkpoint, it sends the batch again, and the "
                "API drops what it already holds",
                counts=failure.counts,
            )
        self._keep(summary, committed=True)
        print(f"churn micro-batch {batchId}: {describe(summary)}; {retries_said(summary)}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        summary = self.summary(messages, batchId)
        self._keep(summary, committed=False)
        print(
            f"churn micro-batch {batchId} was aborted after "
            f"{summary['counts'].get('sent', 0):,} rows were delivered by tasks that finished; "
            "Spark sends it again from the checkpoint (the API drops what it already holds)"
        )

    def _keep(self, summary: dict[str, Any], *, committed: bool) -> None:
        """Append the micro-batch's summary to ``summary_path`` (a file on the driver)."""
        path = self.settings.summary_path
        if path is None:
            return
        with Path(path).open("a", encoding="utf-8") as sink:
            sink.write(json.dumps({**summary, "committed": committed}) + "\n")
