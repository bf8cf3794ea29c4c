"""The data-quality gate on a Spark DataFrame, in local Spark: per-check counts computed by
Spark equal the package's own report on the same rows."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import SparkSession

import churn_connector as cc
from churn_connector import spark as ccs


def _events(n: int) -> pd.DataFrame:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    return pd.DataFrame(
        {
            "external_user_id": [" " if i % 50 == 7 else f"u{i}" for i in range(n)],
            "event_type": ["Bad Type" if i % 10 == 3 else "login" for i in range(n)],
            "occurred_at": [now - pd.Timedelta(seconds=i) for i in range(n)],
        }
    )


def test_the_spark_gate_counts_what_the_report_counts(spark: SparkSession) -> None:
    events = _events(400)
    df = spark.createDataFrame(events).repartition(4)
    summary = ccs.validate(df, max_invalid="10%")
    report = cc.validate_events(events)
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
    df = spark.createDataFrame(_events(200)).repartition(3)
    summary = ccs.validate(df, max_invalid=5, warn_on=["event_type_pattern"])
    assert summary["verdict"]["invalid_rows"] == 4  # the blank ids only
    assert summary["verdict"]["warned_rows"] == 20
    assert summary["verdict"]["status"] == "warn"


def test_the_spark_gate_refuses_an_unknown_check_before_any_job(spark: SparkSession) -> None:
    df = spark.createDataFrame(_events(10))
    with pytest.raises(cc.ConfigurationError, match="did you mean event_type_pattern"):
        ccs.validate(df, warn_on=["event_type_patern"])
