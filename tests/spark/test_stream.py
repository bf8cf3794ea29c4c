"""The streaming sink in real Spark (local mode): a file source, one file per micro-batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

import churn_connector as cc
from tests.spark.conftest import BASE_EPOCH, ENV_KEY
from tests.spark.flaky import FlakyStreamSource

PER_FILE = 100


def _export(spark: SparkSession, folder: Path, files: int, invalid: int = 0) -> StructType:
    """``files`` Parquet files of PER_FILE events (the first ``invalid`` have a bad type)."""
    df = spark.range(0, files * PER_FILE, 1, files).selectExpr(
        "concat('user_', CAST(id % 10 AS STRING)) AS external_user_id",
        f"CASE WHEN id < {invalid} THEN 'Bad Type' ELSE 'page_view' END AS event_type",
        f"timestamp_seconds({BASE_EPOCH} - id) AS occurred_at",
        "id AS `properties.seq`",
    )
    df.write.parquet(str(folder))
    return df.schema


def _stream(
    spark: SparkSession, folder: Path, schema: StructType, sink: str, **options: str
) -> StreamingQuery:
    writer = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)  # a micro-batch per file
        .parquet(str(folder))
        .writeStream.format(sink)
        .trigger(availableNow=True)
    )
    for name, value in options.items():
        writer = writer.option(name, value)
    return writer.start()


def test_a_replayed_micro_batch_stores_every_event_once(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    schema = _export(spark, tmp_path / "export", files=2)
    spark.dataSource.register(FlakyStreamSource)
    options = {
        "base_url": sandbox.base_url,
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "summary_path": str(tmp_path / "batches.jsonl"),
    }
    # micro-batch 1's commit is lost after its events were delivered: the query stops
    first = _stream(spark, tmp_path / "export", schema, "churn_flaky_stream", **options)
    with pytest.raises(StreamingQueryException, match="micro-batch 1 is lost"):
        first.awaitTermination(180)
    assert len(sandbox.events()) == 2 * PER_FILE  # both batches were delivered

    # restarted from its checkpoint, Spark replays micro-batch 1: the API drops the replay
    again = _stream(spark, tmp_path / "export", schema, "churn_flaky_stream", **options)
    assert again.awaitTermination(180) and again.exception() is None
    stored = sandbox.events()
    assert len(stored) == 2 * PER_FILE and stored["message_id"].is_unique
    assert sandbox.stats()["duplicates"] == PER_FILE

    batches = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    # Spark aborts the batch whose commit failed: its line says what its tasks delivered
    assert [(b["batch_id"], b["committed"]) for b in batches] == [
        (0, True),
        (1, False),
        (1, True),
    ]
    assert [b["counts"]["sent"] for b in batches] == [PER_FILE] * 3
    assert [b["duplicates_reported"] for b in batches] == [0, 0, PER_FILE]
    assert ENV_KEY not in (tmp_path / "batches.jsonl").read_text()


def test_rows_not_delivered_fail_the_query_before_the_batch_commits(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    schema = _export(spark, tmp_path / "export", files=1, invalid=5)
    # invalid rows are not delivered: counted by default, failing the query on request (the
    # same commit path as rejected or failed rows, which fail it always)
    strict = _stream(
        spark, tmp_path / "export", schema, "churn", base_url=sandbox.base_url,
        checkpointLocation=str(tmp_path / "checkpoint"), fail_on_invalid="true",
        summary_path=str(tmp_path / "batches.jsonl"),
    )  # fmt: skip
    with pytest.raises(StreamingQueryException, match="micro-batch 0: rows not delivered"):
        strict.awaitTermination(180)
    assert len(sandbox.events()) == PER_FILE - 5  # what was valid is delivered
    [batch] = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    assert batch["counts"]["invalid"] == 5 and not batch["committed"]
