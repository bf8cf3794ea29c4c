"""Send Spark DataFrames to the ingestion API, partition by partition (PySpark 4.0+).

``pip install "churn-connector[spark]"`` (or the package alone where Spark is installed,
as on Databricks, EMR or Dataproc). Three ways in, all Arrow-based, all sending each
partition from its own task with the package's validation, wire format and retries:

* the data source ``churn``: ``df.write.format("churn").option("kind", "events")
  .option("base_url", url).mode("append").save()``. Spark finds it
  by itself where the package is installed on the driver, or after :func:`register`;
  :func:`save` wraps it (parallelism filled in, identities partitioned by user, the
  package's :class:`~churn_connector.DeliveryError`, the summary returned);
* :func:`send_events` / :func:`identify`: per-row results as a lazy DataFrame;
* :func:`partition_by_user`: what identify needs before the data source;
* :func:`validate`: the data-quality gate, its per-check counts computed by Spark.

The key comes from ``CHURN_API_KEY`` in the executors' environment, or from the option
``api_token``, whose name Spark's redaction hides (docs/guides/spark.md: keeping the key out of
sight). A cluster-wide request budget (``max_requests_per_second``, 200 by default) is split
across the tasks that run at once (``parallelism``; when it is not given, each task takes
``1/ASSUMED_PARALLELISM`` of it).
"""

from __future__ import annotations

from .gate import validate
from .results import identify, partition_by_user, send_events, task_parallelism
from .settings import ASSUMED_PARALLELISM, DEFAULT_REQUESTS_PER_SECOND, NAME, SparkSettings
from .source import ChurnCommitMessage, ChurnDataSource, ChurnWriter, register, save

__all__ = [
    "ASSUMED_PARALLELISM",
    "DEFAULT_REQUESTS_PER_SECOND",
    "NAME",
    "ChurnCommitMessage",
    "ChurnDataSource",
    "ChurnWriter",
    "SparkSettings",
    "identify",
    "partition_by_user",
    "register",
    "save",
    "send_events",
    "task_parallelism",
    "validate",
]
