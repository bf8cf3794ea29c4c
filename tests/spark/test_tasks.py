"""What runs inside Spark's tasks and on its driver, run here directly (no SparkSession):
options read from text, a partition's send, the summary a commit adds up."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import churn_connector as cc
from churn_connector._client import send_keywords
from churn_connector._core.text_options import CLIENT_FIELDS
from churn_connector._core.types import Kind
from churn_connector.spark import (
    ASSUMED_PARALLELISM,
    ChurnCommitMessage,
    ChurnDataSource,
    ChurnWriter,
    SparkSettings,
)
from churn_connector.spark.partition import coalesce, reported_duplicates
from churn_connector.spark.results import _ResultsTask
from churn_connector.spark.settings import ORDER_COLUMN, SEND_OPTIONS
from churn_connector.spark.source import _text, _typed
from tests.spark.conftest import ENV_KEY, TOKEN_KEY


def test_options_arrive_as_text_and_are_read_as_the_python_api_types() -> None:
    settings = SparkSettings.from_options(
        {
            "KIND": "events",  # Spark's option names are case-insensitive
            "base_url": "https://api.example.com",
            "Max_Concurrency": "4",
            "max_attempts": "3",
            "deadline": "none",
            "id_columns": "event_type, external_user_id",
            "rename": '{"user": "external_user_id"}',
            "dry_run": "true",
            "parallelism": "4",
            "max_requests_per_second": "100",
            "fail_on_invalid": "yes",
        }
    )
    assert settings.client_options == {
        "max_concurrency": 4,
        "deadline": None,
        "retry": cc.RetryPolicy(max_attempts=3),
    }
    assert settings.send_options == {
        "id_columns": ["event_type", "external_user_id"],
        "rename": {"user": "external_user_id"},
        "dry_run": True,
    }
    assert settings.fail_on_invalid and settings.task_rate() == 25.0
    json_list = SparkSettings.from_options({"id_columns": '["event_type"]', "parallelism": 1})
    assert json_list.send_options == {"id_columns": ["event_type"]}
    assert SparkSettings.from_options({"max_requests_per_second": "off"}).task_rate() is None


def test_consent_options_are_read_by_name_for_identities_and_checked_on_the_driver() -> None:
    settings = SparkSettings.from_options(
        {
            "kind": "identities",
            "blank_consent": "omit_channel",
            "require_consent": "true",
            "parallelism": "1",
        }
    )
    assert settings.send_options == {"blank_consent": "omit_channel", "require_consent": True}
    with pytest.raises(cc.ConfigurationError, match="blank_consent must be one of"):
        SparkSettings.from_options({"kind": "identities", "blank_consent": "yes", "parallelism": 1})
    with pytest.raises(cc.ConfigurationError, match="unknown option"):
        SparkSettings.from_options({"kind": "events", "require_consent": "true", "parallelism": 1})


@pytest.mark.parametrize("kind", ["events", "identities"])
def test_spark_takes_the_declared_send_options_that_mean_something_for_a_frame(kind: Kind) -> None:
    declared = {o.name: o for o in send_keywords(kind) if o.declared.spark}
    assert set(SEND_OPTIONS[kind]) == set(declared) - CLIENT_FIELDS
    assert not {"dtypes", "delimiter", "now", "progress"} & set(SEND_OPTIONS[kind])
    # each one's default, written as text, reads back as that default
    for name in SEND_OPTIONS[kind]:
        default = declared[name].default
        if default is None:
            continue
        text = str(default).lower() if isinstance(default, bool) else str(default)
        settings = SparkSettings.from_options({"kind": kind, name: text, "parallelism": 1})
        assert settings.send_options == {name: default}, name


def test_the_key_travels_to_the_tasks_but_never_shows() -> None:
    settings = SparkSettings.from_options({"api_token": TOKEN_KEY, "parallelism": 2})
    assert TOKEN_KEY not in repr(settings) and TOKEN_KEY not in repr(ChurnWriter(settings))
    shipped = pickle.loads(pickle.dumps(settings))
    assert shipped.api_token is not None and shipped.api_token.reveal() == TOKEN_KEY


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"api_key": TOKEN_KEY}, "use option 'api_token'"),
        ({"kind": "users"}, "kind must be one of"),
        ({"duplicates": "in_order"}, r"unknown option\(s\) \['duplicates'\] for kind=events"),
        ({"parallelism": "0"}, "at least 1"),
        ({"max_requests_per_second": "-5", "parallelism": 1}, "positive number or 'off'"),
        ({"api_token": "key with spaces", "parallelism": 1}, "white space"),
        ({"batch_size": "501", "parallelism": 1}, "batch_size"),
        ({"kind": "identities", "duplicates": "sometimes", "parallelism": 1}, "duplicates"),
        ({"id_columns": "{}", "parallelism": 1}, "id_columns"),
        ({"id_format": "v3", "parallelism": 1}, "id_format"),
        ({"kind": "identities", "id_format": "v1"}, r"unknown option\(s\) \['id_format'\]"),
    ],
)
def test_bad_options_are_refused_without_echoing_a_key(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(cc.ConfigurationError, match=message) as info:
        SparkSettings.from_options(options)
    assert TOKEN_KEY not in str(info.value)


def _batches(now: pd.Timestamp, n: int, *, bad: int = 0, size: int = 100) -> list[pa.RecordBatch]:
    """Events as Spark hands them over: Arrow batches, a session time zone on the stamps."""
    table = pa.table(
        {
            "external_user_id": [f"u{i % 7}" for i in range(n)],
            "event_type": ["Bad Type" if i < bad else "login" for i in range(n)],
            "occurred_at": pa.array(
                [now - pd.Timedelta(minutes=i) for i in range(n)], pa.timestamp("us", "UTC")
            ).cast(pa.timestamp("us", "Etc/UTC")),
            "properties.seq": pa.array(range(n), pa.int64()),
            ORDER_COLUMN: pa.array(range(n), pa.int64()),  # as partition_by_user adds it
        }
    )
    batches: list[pa.RecordBatch] = table.to_batches(max_chunksize=size)
    return batches


@pytest.mark.parametrize(
    ("options", "per_task"),
    [
        ({}, 200 / ASSUMED_PARALLELISM),  # not said: the assumed share
        ({"parallelism": "4"}, 50.0),  # said: the budget split that many ways
        ({"max_requests_per_second": "80", "parallelism": "2"}, 40.0),
        ({"max_requests_per_second": "off"}, None),
    ],
)
def test_each_task_keeps_to_its_share_of_the_jobs_request_budget(
    options: dict[str, str], per_task: float | None
) -> None:
    given = {"base_url": "https://api.example.com", "api_token": TOKEN_KEY, **options}
    settings = SparkSettings.from_options(given)
    assert settings.task_rate() == per_task
    assert settings.client().config.max_requests_per_second == per_task
    assert settings.budget()["per_task"] == per_task


def test_a_task_sends_its_partition_and_the_commit_adds_the_tasks_up(
    sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary_path = tmp_path / "summary.json"
    settings = SparkSettings.from_options(
        {"base_url": sandbox.base_url, "parallelism": 2, "summary_path": str(summary_path)}
    )
    writer = ChurnWriter(settings)
    first = writer.write(iter(_batches(now, 300, bad=2)))
    empty = writer.write(iter([]))
    assert (first.partition, first.attempt) == (-1, 0)  # outside Spark
    assert first.summary["counts"]["sent"] == 298 and first.duplicates_reported == 0
    assert empty.summary["rows"] == 0
    retried = ChurnCommitMessage(3, 1, first.summary, 298)
    writer.commit([first, empty, retried])
    assert "no task" not in capsys.readouterr().out
    summary = json.loads(summary_path.read_text())
    assert summary["counts"]["sent"] == 596 and summary["tasks"] == 3
    assert summary["retried_partitions"] == [3] and summary["duplicates_reported"] == 298
    assert sandbox.stats()["stored"] == 298

    strict = ChurnWriter(SparkSettings.from_options({"fail_on_invalid": "true", "parallelism": 2}))
    with pytest.raises(cc.DeliveryError, match="rows not delivered") as info:
        strict.commit([first])
    # Spark shows the commit's error as text; save() turns that text into the error again
    again = _typed(RuntimeError(f"[PYTHON_DATA_SOURCE_ERROR] ...: {info.value}"))
    assert isinstance(again, cc.DeliveryError) and again.counts["invalid"] == 2
    unrelated = RuntimeError("something else")
    assert _typed(unrelated) is unrelated

    writer.abort([first, None])  # None: a task that failed
    assert json.loads(summary_path.read_text())["aborted"] is True
    assert "running it again is safe" in capsys.readouterr().out


def test_a_task_sends_the_id_format_it_is_given(sandbox: cc.Sandbox, now: pd.Timestamp) -> None:
    # a backfill begun with 0.1 is finished in Spark with its ids (option id_format)
    settings = SparkSettings.from_options(
        {"base_url": sandbox.base_url, "parallelism": 1, "id_format": "v1"}
    )
    batches = _batches(now, 20)
    ChurnWriter(settings).write(iter(batches))
    table = pa.Table.from_batches(batches).drop_columns([ORDER_COLUMN])
    expected = [e["context"]["$message_id"] for e in cc.events_to_wire(table, id_format="v1")]
    assert sorted(sandbox.events()["message_id"]) == sorted(expected)


def test_a_task_that_cannot_send_fails_so_spark_retries_it(now: pd.Timestamp) -> None:
    settings = SparkSettings.from_options({"base_url": "http://127.0.0.1:9", "parallelism": 1})
    with pytest.raises(cc.TransportError, match="cannot reach the API"):
        ChurnWriter(settings).write(iter(_batches(now, 10)))


def test_a_results_task_yields_one_row_per_row_with_the_kept_columns(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    settings = SparkSettings.from_options({"base_url": sandbox.base_url, "parallelism": 1})
    batches = _batches(now, 250, bad=1)
    names = batches[0].schema.names
    positional = [
        pa.RecordBatch.from_arrays(b.columns, names=[f"_{i}" for i in range(len(names))])
        for b in batches
    ]
    task = _ResultsTask(settings, names, ["external_user_id", "properties.seq"])
    out = pa.Table.from_batches(list(task(iter(positional)))).to_pandas()
    assert list(out.columns) == [
        "external_user_id",
        "properties.seq",
        "partition",
        "row",
        "status",
        "message_id",
        "chunk",
        "error",
    ]
    assert out["properties.seq"].tolist() == list(range(250)) == out["row"].tolist()
    assert out["status"].value_counts().to_dict() == {"sent": 249, "invalid": 1}
    assert list(task(iter([]))) == []  # an empty partition: no rows


def test_small_batches_are_combined_into_slices() -> None:
    batch = pa.record_batch({"x": [1, 2, 3]})
    assert [b.num_rows for b in coalesce([batch] * 5, rows=7)] == [9, 6]
    assert [b.num_rows for b in coalesce([batch], rows=7)] == [3]


def test_re_sends_are_counted_from_the_apis_answers_when_it_reports_them() -> None:
    chunks = pd.DataFrame(
        {
            "status": ["sent", "sent", "sent", "failed"],
            "response": ['{"duplicates": 3}', "not json", '{"accepted": 1}', '{"duplicates": 9}'],
        }
    )
    assert reported_duplicates(chunks) == 3
    assert reported_duplicates(chunks.iloc[1:3]) is None  # the API said nothing


def test_option_values_are_spelled_as_spark_carries_them() -> None:
    assert [_text(True), _text(4), _text(["a", "b"]), _text({"a": "b"})] == [
        "true",
        "4",
        '["a", "b"]',
        '{"a": "b"}',
    ]


def test_the_executors_key_is_read_from_their_environment(sandbox: cc.Sandbox) -> None:
    settings = SparkSettings.from_options({"base_url": sandbox.base_url, "parallelism": 1})
    assert settings.client().config.api_key.reveal() == ENV_KEY


def test_the_source_takes_identities_only_partitioned_by_user() -> None:
    schema = StructType([StructField("external_user_id", StringType())])
    options = {"kind": "identities", "parallelism": "2"}
    with pytest.raises(cc.ConfigurationError, match="partition_by_user"):
        ChurnDataSource(dict(options)).writer(schema, False)
    said = ChurnDataSource({**options, "partitioned_by_user": "true"}).writer(schema, False)
    assert said.settings.kind == "identities"
    prepared = schema.add(ORDER_COLUMN, LongType())  # what partition_by_user adds
    assert (
        ChurnDataSource(dict(options)).writer(prepared, False).settings.partitioned_by_user is False
    )
    with pytest.raises(cc.ConfigurationError, match="append"):
        ChurnDataSource({"parallelism": "2"}).writer(schema, True)
