"""A churn data source whose first attempt at partition 1 dies part way, and a streaming sink
whose first commit of micro-batch 1 is lost (imported by Spark's Python workers: the repo is
on their PYTHONPATH)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from churn_connector._delivery.answers import Outcome
from churn_connector._delivery.transport import HttpPoster
from churn_connector.spark import ChurnCommitMessage, ChurnDataSource, ChurnWriter
from churn_connector.spark.partition import Where
from churn_connector.spark.streaming import ChurnStreamWriter

FLAKY_DIR = "CHURN_TEST_FLAKY_DIR"  # set by conftest before the JVM starts: workers see it

FAILING = Where(partition=1, attempt=0)
AFTER = 3  # acknowledged requests before the task dies


class TaskDied(RuntimeError):
    """The injected failure: a task lost after some of its requests were acknowledged."""


class FlakyWriter(ChurnWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> ChurnCommitMessage:
        if Where.here() != FAILING:
            return super().write(iterator)
        post = HttpPoster.post
        acknowledged = itertools.count(1)

        def dying_post(poster: HttpPoster, path: str, body: bytes) -> Outcome:
            outcome = post(poster, path, body)
            if outcome.status == "sent" and next(acknowledged) >= AFTER:
                raise TaskDied(f"injected: the task dies after {AFTER} acknowledged requests")
            return outcome

        HttpPoster.post = dying_post  # type: ignore[method-assign, assignment]
        try:
            return super().write(iterator)
        finally:
            HttpPoster.post = post  # type: ignore[method-assign]


class FlakyDataSource(ChurnDataSource):
    writer_class = FlakyWriter

    @classmethod
    def name(cls) -> str:
        return "churn_flaky"


class CommitLost(RuntimeError):
    """The injected failure: the driver lost a micro-batch's commit after every task sent."""


class FlakyStreamWriter(ChurnStreamWriter):
    """Fails the commit of micro-batch 1 once (a marker file in ``FLAKY_DIR`` remembers),
    after its tasks delivered everything: the query stops, and a restart replays the batch."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        marker = Path(os.environ[FLAKY_DIR]) / "commit-lost"
        if batchId == 1 and not marker.exists():
            marker.touch()
            raise CommitLost("injected: the commit of micro-batch 1 is lost")
        super().commit(messages, batchId)


class FlakyStreamSource(ChurnDataSource):
    @classmethod
    def name(cls) -> str:
        return "churn_flaky_stream"

    def streamWriter(self, schema: StructType, overwrite: bool) -> FlakyStreamWriter:  # noqa: FBT001
        return FlakyStreamWriter(self._settings(schema, overwrite, "outputMode('append')"))
