"""The data-quality gate on a Spark DataFrame, in local Spark: per-check counts computed by
Spark equal the package's own report on the same rows."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

import churn_connector as cc
from churn_connector import spark as ccs
from tests.spark.conftest import BASE_EPOCH


def _events(spark: SparkSession, n: int, partitions: int) -> DataFrame:
    """``n`` events: every 50th from the 7th with a blank user id, every 10th from the 3rd
    with a bad event type (never both)."""
    return spark.range(0, n, 1, partitions).selectExpr(
        "CASE WHEN id % 50 = 7 THEN ' ' ELSE concat('u', CAST(id AS STRING)) END "
        "AS external_user_id",
        "CASE WHEN id % 10 = 3 THEN 'Bad Type' ELSE 'login' END AS event_type",
        f"timestamp_seconds({BASE_EPOCH} - id) AS occurred_at",
    )


def test_the_spark_gate_counts_what_the_report_counts(spark: SparkSession) -> None:
    df = _events(spark, 400, 4)
    summary = ccs.validate(df, max_invalid="10%")
    # the package's own report on the same rows, read through Arrow on the driver
    report = cc.validate_events(df.toArrow())
    assert summary["counts"] == {
        "rows": 400,
        "valid": report.n_valid,
        "invalid": report.n_invalid,
        "duplicates": 0,
    }
    by_check = {c["check"]: c["rows"] for c in summary["checks"]}
    assert by_check == {"external_user_id_not_blank": 8, "event_type_pattern": 40}
    assert {c["column"]: c["rows"] for c in summary["columns"]} == {
        "event_type": 40,
        "external_user_id": 8,
    }
    assert summary["verdict"]["status"] == "fail"  # 48 of 400 is 12%, above 10%
    assert summary["verdict"]["invalid_rows"] == report.n_invalid == 48


def test_the_spark_gate_honours_warn_only_checks(spark: SparkSession) -> None:
    df = _events(spark, 200, 3)
    summary = ccs.validate(df, max_invalid=5, warn_on=["event_type_pattern"])
    assert summary["verdict"]["invalid_rows"] == 4  # the blank ids only
    assert summary["verdict"]["warned_rows"] == 20
    assert summary["verdict"]["status"] == "warn"


def test_the_spark_gate_refuses_an_unknown_check_before_any_job(spark: SparkSession) -> None:
    df = _events(spark, 10, 1)
    with pytest.raises(cc.ConfigurationError, match="did you mean event_type_pattern"):
        ccs.validate(df, warn_on=["event_type_patern"])
