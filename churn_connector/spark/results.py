"""Per-row results as a DataFrame (``mapInArrow``), and identities partitioned by user.

:func:`send_events` and :func:`identify` return a DataFrame with one row per input row:
the columns asked for in ``keep``, then ``partition``, ``row`` (the row's place in its
partition), ``status``, ``message_id``, ``chunk`` (the request, numbered per partition) and
``error``. It is **lazy**, like every DataFrame: nothing is sent until an action runs, and
every action (``count()``, ``show()``, a write) runs the sends again. That is harmless (the
same message ids; the API drops what it already holds) but costs requests: write the result
once (``.write.saveAsTable(...)``) or ``persist()`` it and run one action, then read that.

PySpark 4.3's ``mapInArrow`` hands its input over by column name, which Spark parses: a flat
``properties.plan`` column is taken for field ``plan`` of a ``properties`` column (an error,
or with a ``properties`` map beside it, the flat columns are dropped: their values would be
sent without them, under other ids). So the columns travel under positional names
(``toDF``, which does not parse) and get their own back inside the task.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from .._core import ConfigurationError
from .partition import PartitionInput, Where, send
from .settings import ORDER_COLUMN, SparkSettings, refuse_token_on_connect

RESULT_FIELDS = (
    StructField("partition", IntegerType(), nullable=False),
    StructField("row", LongType(), nullable=False),
    StructField("status", StringType(), nullable=False),
    StructField("message_id", StringType()),
    StructField("chunk", LongType()),
    StructField("error", StringType()),
)
_BATCH_ROWS = 10_000  # Spark's own Arrow batch size (spark.sql.execution.arrow.maxRecordsPerBatch)


def task_parallelism(df: DataFrame) -> int | None:
    """How many of ``df``'s tasks can run at once: its partitions, at most the cluster's
    default parallelism (its cores). Classic Spark only: None on Spark Connect, which has no
    ``df.rdd`` (pass ``parallelism`` there)."""
    try:
        partitions = df.rdd.getNumPartitions()
        slots = df.sparkSession.sparkContext.defaultParallelism
    except (PySparkException, AttributeError):
        return None
    return max(1, min(partitions, slots))


def partition_by_user(
    df: DataFrame, num_partitions: int | None = None, *, order_by: str | None = None
) -> DataFrame:
    """``df`` with every row of a user in one partition, a user's rows in their order.

    A shuffle keeps no row order, so each row's place is taken first (the DataFrame's order,
    or the column ``order_by``), and each partition sorted by it after the shuffle. Then one
    task holds all of a user's rows, so no two requests for one user are ever in flight
    across the cluster, and ``duplicates="in_order"`` sends them in order. The ordering
    column (``__churn_order``) is dropped before sending.
    """
    if ORDER_COLUMN in df.columns:
        return df
    place = "monotonically_increasing_id()" if order_by is None else _quoted(order_by)
    ordered = df.selectExpr("*", f"{place} AS {ORDER_COLUMN}")
    if num_partitions is None:
        shuffled = ordered.repartition("external_user_id")
    else:
        shuffled = ordered.repartition(num_partitions, "external_user_id")
    return shuffled.sortWithinPartitions(ORDER_COLUMN)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _ResultsTask:
    """The function each task runs: send the partition, yield one result row per row."""

    def __init__(self, settings: SparkSettings, names: Sequence[str], keep: Sequence[str]):
        self.settings = settings
        self.names = list(names)
        self.keep = list(keep)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        where = Where.here()
        source = PartitionInput(self.names, self.keep)
        reader = source.reader(batches, self.settings.slice_rows)
        if reader is None:
            return
        recorded = send(self.settings, reader)
        if recorded.error is not None:
            raise recorded.error  # the task fails; Spark retries it
        assert recorded.result is not None
        rows = recorded.result.rows
        n = len(rows)
        kept = source.kept_table().combine_chunks()
        columns: dict[str, Any] = {name: kept.column(name) for name in self.keep}
        columns["partition"] = pa.array(np.full(n, where.partition, dtype=np.int32))
        columns["row"] = pa.array(np.arange(n, dtype=np.int64))  # the rows, in input order
        columns["status"] = pa.array(rows["status"].astype(str).to_numpy(), pa.string())
        columns["message_id"] = pa.array(rows["message_id"], pa.string(), from_pandas=True)
        columns["chunk"] = pa.array(rows["chunk"], pa.int64(), from_pandas=True)
        columns["error"] = pa.array(rows["error"], pa.string(), from_pandas=True)
        yield from pa.table(columns).to_batches(max_chunksize=_BATCH_ROWS)


def _results(df: DataFrame, settings: SparkSettings, keep: Sequence[str]) -> DataFrame:
    names = list(df.columns)
    keep = list(keep)
    missing = [name for name in keep if name not in names]
    if missing:
        raise ConfigurationError(f"keep: no column(s) {missing} in the DataFrame")
    clash = sorted(set(keep) & {f.name for f in RESULT_FIELDS})
    if clash:
        raise ConfigurationError(f"keep: {clash} clash with result columns; rename them first")
    fields = {f.name: f for f in df.schema.fields}
    schema = StructType([fields[name] for name in keep] + list(RESULT_FIELDS))
    positional = df.toDF(*[f"_{i}" for i in range(len(names))])
    with warnings.catch_warnings():
        # mapInArrow builds an Arrow UDF; PySpark 4.3 warns about pandas 3 there, though no
        # pandas runs on the driver (under -W error, the warning would be an error)
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        return positional.mapInArrow(_ResultsTask(settings, names, keep), schema)


def _settings(
    kind: str, df: DataFrame, base_url: str | None, parallelism: int | None, options: Any
) -> SparkSettings:
    refuse_token_on_connect(df, options)
    parallelism = parallelism or task_parallelism(df)
    given = {**options, "kind": kind, "base_url": base_url, "parallelism": parallelism}
    return SparkSettings.from_options(given)


def send_events(
    df: DataFrame,
    base_url: str | None = None,
    *,
    keep: Sequence[str] = (),
    parallelism: int | None = None,
    **options: Any,
) -> DataFrame:
    """Per-row results of sending ``df``'s events, as a **lazy** DataFrame (module docstring):
    each action sends again, so write it once. ``keep``: input columns to carry into the
    result (to join it back); ``options``: those of the data source and of
    ``cc.send_events`` (``api_token``, ``max_concurrency``, ``namespace``, ...)."""
    settings = _settings("events", df, base_url, parallelism, options)
    return _results(df, settings, keep)


def identify(
    df: DataFrame,
    base_url: str | None = None,
    *,
    keep: Sequence[str] = ("external_user_id",),
    num_partitions: int | None = None,
    order_by: str | None = None,
    parallelism: int | None = None,
    **options: Any,
) -> DataFrame:
    """Per-row identify results, as a **lazy** DataFrame; the rows are first partitioned by
    user (:func:`partition_by_user`), so no user is identified by two tasks at once and a
    user's rows keep their order. ``options``: those of ``cc.identify`` (``duplicates``,
    ``phone_region``, ...) and of the data source."""
    prepared = partition_by_user(df, num_partitions, order_by=order_by)
    settings = _settings("identities", prepared, base_url, parallelism, options)
    return _results(prepared, settings, keep)
