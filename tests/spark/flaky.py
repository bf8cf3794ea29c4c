"""A churn data source whose first attempt at partition 1 dies part way (imported by Spark's
Python workers: the repo is on their PYTHONPATH)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa

from churn_connector._delivery.transport import HttpPoster, Outcome
from churn_connector.spark import ChurnCommitMessage, ChurnDataSource, ChurnWriter
from churn_connector.spark.partition import Where

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
