"""A tracking plan on Spark, in local Spark over HTTP to the sandbox: the gate counts the
plan's rules as Spark computes them, the writer never sends a row that breaks the plan, and
the plan reaches the executors as its mapping (read once on the driver's side), never as a
path they would have to see."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import churn_connector as cc
from churn_connector import spark as ccs
from churn_connector.spark.settings import SparkSettings, plan_text
from tests.spark.conftest import events_df

# page views must be on the pro plan: of events_df's rows, ids 0, 6, 12, ... break it
PLAN = {"events": {"page_view": {"properties": {"plan": {"enum": ["pro"]}}}}}


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    return path


def test_the_spark_gate_counts_a_plans_rules(spark: SparkSession, plan_file: Path) -> None:
    df = events_df(spark, n=60, partitions=2)
    summary = ccs.validate(df, max_invalid=0, plan=plan_file)
    assert summary["counts"]["invalid"] == 10
    assert summary["checks"] == [
        {"check": "plan.page_view.plan.enum", "severity": "error", "rows": 10, "failures": 10}
    ]
    assert summary["verdict"]["status"] == "fail"


def test_the_writer_never_sends_a_row_that_breaks_the_plan(
    spark: SparkSession, sandbox: cc.Sandbox, plan_file: Path
) -> None:
    df = events_df(spark, n=60, partitions=2)
    summary = ccs.save(df, sandbox.base_url, plan=plan_file)
    assert summary is not None
    assert summary["counts"]["sent"] == 50 and summary["counts"]["invalid"] == 10
    stored = sandbox.events()
    assert len(stored) == 50
    assert not any(
        p.get("plan") == "free"
        for p, t in zip(stored["properties"], stored["event_type"], strict=True)
        if t == "page_view"
    )


def test_the_plan_option_is_loaded_on_the_driver_and_carried_as_its_mapping(
    plan_file: Path,
) -> None:
    # save() writes the option as the plan's JSON; a path given by hand is read here
    assert json.loads(plan_text(plan_file))["events"] == PLAN["events"]
    for given in (str(plan_file), plan_text(plan_file)):
        settings = SparkSettings.from_options({"plan": given})
        plan = settings.send_options["plan"]
        assert isinstance(plan, cc.TrackingPlan)
        assert plan.events == PLAN["events"]
    shipped = pickle.dumps(settings)
    plan_file.unlink()  # the executors never need the file
    assert pickle.loads(shipped).send_options["plan"] == plan
    with pytest.raises(cc.PlanError, match="'oneOf'"):
        SparkSettings.from_options({"plan": '{"events": {"e": {"oneOf": []}}}'})
