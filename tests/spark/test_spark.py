"""The Spark integration in real Spark (local[2,4]) against the sandbox on 127.0.0.1."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

import churn_connector as cc
import churn_connector.spark as churn_spark
from tests.ledger.servers import PG_PASSWORD, PostgresServer
from tests.spark.conftest import (
    CONNECT_KEY,
    ENV_KEY,
    TIMINGS,
    TOKEN_KEY,
    events_df,
    identities_df,
)
from tests.spark.flaky import AFTER, FlakyDataSource


def _timed(name: str, started: float) -> None:
    TIMINGS[name] = time.perf_counter() - started


def _write(df: DataFrame, source: str = "churn", /, **options: object) -> None:
    writer = df.write.format(source).mode("append")
    for name, value in options.items():
        writer = writer.option(name, str(value))
    writer.save()


def test_a_write_sends_every_valid_event_once_and_counts_the_bad_rows(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    started = time.perf_counter()
    df = events_df(spark, n=3000, partitions=3, invalid=10)
    summary_file = tmp_path / "summary.json"
    # no register(): Spark found the data source in module pyspark_churn by itself
    _write(df, base_url=sandbox.base_url, parallelism=2, summary_path=summary_file)
    _timed("first write (3,000 events)", started)
    stored = sandbox.events()
    assert len(stored) == 2990 and stored["message_id"].is_unique
    assert sandbox.stats()["requests"] == {"POST /v1/events/batch 200": 6}  # ≤ 500 each
    newest = stored.sort_values("occurred_at").iloc[-1]  # id 10: ids 0-9 are invalid
    # the map and the flat columns merged; the null bigint omitted, not sent as null
    assert newest["properties"] == {"src": "spark", "plan": "pro", "seq": 10}
    summary = json.loads(summary_file.read_text())
    assert summary["counts"] == {
        "sent": 2990,
        "invalid": 10,
        "rejected": 0,
        "failed": 0,
        "skipped": 0,
        "expired": 0,
        "held": 0,
    }
    assert (summary["rows"], summary["tasks"], summary["requests"]) == (3000, 3, 6)
    assert summary["exit_code"] == 1 and not summary["aborted"]

    # invalid rows fail the write on request; the package's own error, with its counts
    with pytest.raises(cc.DeliveryError, match="rows not delivered") as info:
        churn_spark.save(df, sandbox.base_url, fail_on_invalid=True)
    assert info.value.counts["invalid"] == 10 and info.value.counts["sent"] == 2990
    assert sandbox.stats()["stored"] == 2990  # the second write's events were duplicates


def test_the_plainest_write_works_and_its_summary_says_the_budget_each_task_kept(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    df = events_df(spark, n=20, partitions=2)
    summary_file = tmp_path / "summary.json"
    df.write.format("churn").option("base_url", sandbox.base_url).option(
        "summary_path", str(summary_file)
    ).mode("append").save()
    assert len(sandbox.events()) == 20
    budget = json.loads(summary_file.read_text())["request_budget"]
    assert budget == {
        "max_requests_per_second": 200.0,
        "parallelism": None,
        "assumed_parallelism": churn_spark.ASSUMED_PARALLELISM,
        "per_task": 200.0 / churn_spark.ASSUMED_PARALLELISM,
    }


def _sql_plans(spark: SparkSession) -> str:
    """What the SQL tab and the history server show: each query's description and plans."""
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    texts = []
    for i in range(executions.size()):
        execution = executions.apply(i)
        texts += [execution.description(), execution.details(), execution.physicalPlanDescription()]
    return "\n".join(str(text) for text in texts)


def test_the_key_never_shows_in_plans_logs_or_the_event_log(
    spark: SparkSession, sandbox: cc.Sandbox, eventlog_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    df = events_df(spark, n=200, partitions=2)
    _write(df, base_url=sandbox.base_url, api_token=TOKEN_KEY, parallelism=2)
    assert len(sandbox.events(TOKEN_KEY)) == 200  # the option's key was the one used
    # an option Spark would not redact is refused on the driver, without echoing the value
    with pytest.raises(Exception, match="use option 'api_token'") as info:
        _write(df, base_url=sandbox.base_url, api_key=TOKEN_KEY, parallelism=2)
    assert TOKEN_KEY not in str(info.value)
    time.sleep(1)
    eventlog = "\n".join(
        p.read_text(errors="replace") for p in eventlog_dir.rglob("*") if p.is_file()
    )
    plans = _sql_plans(spark)
    output = "".join(capfd.readouterr())
    for where, text in {"event log": eventlog, "plans": plans, "output": output}.items():
        assert TOKEN_KEY not in text and ENV_KEY not in text, where
    # the checks looked where the write shows: its plan, and its events in the log
    assert "AppendData" in plans and "SparkListenerSQLExecutionEnd" in eventlog


def test_per_row_results_are_a_lazy_dataframe_that_each_action_sends_again(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    started = time.perf_counter()
    df = events_df(spark, n=2000, partitions=2, invalid=3)
    keep = ["external_user_id", "properties.plan"]
    res = churn_spark.send_events(df, sandbox.base_url, keep=keep, batch_size=250)
    assert res.columns == [*keep, "partition", "row", "status", "message_id", "chunk", "error"]
    assert sandbox.stats()["requests"] == {}  # lazy: nothing sent yet
    res.write.parquet(str(tmp_path / "results"))  # the way to keep it: write it once
    rows = pd.read_parquet(tmp_path / "results")
    assert rows["status"].value_counts().to_dict() == {"sent": 1997, "invalid": 3}
    bad = rows[rows["status"] == "invalid"]
    assert bad["error"].str.contains("event_type_pattern").all() and bad["message_id"].isna().all()
    assert set(rows["properties.plan"]) == {"free", "pro"}  # a flat dotted column, kept
    assert set(rows["message_id"].dropna()) == set(sandbox.events()["message_id"])
    assert sorted(zip(rows["partition"], rows["row"], strict=True)) == [
        (p, i) for p in (0, 1) for i in range(1000)
    ]
    assert rows["chunk"].max() == 4  # 250 per request, numbered per partition
    # every action runs the sends again: the same ids, so the API drops them all
    assert res.count() == 2000
    assert sandbox.stats()["duplicates"] == 1997 and sandbox.stats()["stored"] == 1997
    # the session's time zone changes the Arrow type Spark hands over, not the instants
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        again = churn_spark.send_events(df, sandbox.base_url).select("message_id").collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert {r.message_id for r in again} - {None} == set(rows["message_id"].dropna())
    assert sandbox.stats()["conflicts"] == 0
    _timed("per-row results", started)


def _in_order(sb: cc.Sandbox, after: int = 0) -> tuple[int, bool]:
    """(identifies received after the first ``after``, whether each user's arrived in input
    order)."""
    log = sb.identify_log().sort_values("seq").iloc[after:]
    seq = log.assign(seq=[body["traits"]["seq"] for body in log["body"]])
    ordered = all(s.is_monotonic_increasing for _, s in seq.groupby("external_user_id")["seq"])
    return len(log), ordered


def test_identify_sends_a_users_rows_in_order_from_one_task(
    spark: SparkSession, sandbox: cc.Sandbox
) -> None:
    started = time.perf_counter()
    df = identities_df(spark, users=200, per_user=3)  # a user's rows in 3 input partitions
    res = churn_spark.identify(
        df, sandbox.base_url, num_partitions=4, duplicates="in_order", keep=["external_user_id"]
    )
    rows = res.collect()
    assert len(rows) == 600 and {r.status for r in rows} == {"sent"}
    partitions = pd.DataFrame([(r.external_user_id, r.partition) for r in rows])
    assert partitions.groupby(0)[1].nunique().max() == 1  # no user split across tasks
    assert _in_order(sandbox) == (600, True)
    assert sandbox.stats()["max_concurrent_identify_same_user"] == 1
    users = sandbox.users().set_index("external_user_id")
    assert users.at["u7", "traits"] == {"seq": 407, "plan": "pro"}  # the last row, sent last
    _timed("identify (600 rows)", started)

    # the data source: only for rows partitioned by user; save() partitions them itself
    with pytest.raises(Exception, match="partition_by_user"):
        _write(df, kind="identities", base_url=sandbox.base_url, parallelism=2)
    summary = churn_spark.save(df, sandbox.base_url, kind="identities", duplicates="in_order")
    assert summary is not None and summary["counts"]["sent"] == 600
    assert _in_order(sandbox, after=600) == (600, True)


def test_a_task_retried_after_some_acknowledged_requests_stores_every_event_once(
    spark: SparkSession, sandbox: cc.Sandbox, tmp_path: Path
) -> None:
    started = time.perf_counter()
    spark.dataSource.register(FlakyDataSource)
    df = events_df(spark, n=4000, partitions=4)
    summary_file = tmp_path / "summary.json"
    _write(
        df,
        "churn_flaky",  # partition 1's first attempt dies after 3 acknowledged requests
        base_url=sandbox.base_url,
        batch_size=100,
        max_concurrency=2,
        parallelism=2,
        summary_path=summary_file,
    )
    stored, stats = sandbox.events(), sandbox.stats()
    assert len(stored) == 4000 and stored["message_id"].is_unique
    assert stats["duplicates"] >= AFTER * 100 and stats["conflicts"] == 0
    summary = json.loads(summary_file.read_text())
    assert summary["counts"]["sent"] == 4000 and summary["retried_partitions"] == [1]
    # what the retried attempt re-sent, the API answered as held already
    assert AFTER * 100 <= summary["duplicates_reported"] <= stats["duplicates"]
    _timed("retried task (4,000 events)", started)


def _busiest_second(times: pd.Series) -> int:
    seconds = sorted((times - times.min()).dt.total_seconds())
    best = lo = 0
    for hi, t in enumerate(seconds):
        while t - seconds[lo] >= 1.0:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def test_the_request_budget_is_split_across_the_tasks_that_run_at_once(
    spark: SparkSession, sandbox: cc.Sandbox
) -> None:
    started = time.perf_counter()
    df = events_df(spark, n=4000, partitions=4)
    assert churn_spark.task_parallelism(df) == 2  # 4 partitions, 2 task slots
    churn_spark.save(df, sandbox.base_url, batch_size=100, max_requests_per_second=20)
    log = sandbox.requests_log()
    assert len(log) == 40 and sandbox.stats()["stored"] == 4000
    assert _busiest_second(log["received_at"]) <= 20 + 2  # each task may start at once
    span = (log["received_at"].max() - log["received_at"].min()).total_seconds()
    assert span >= 38 / 20 * 0.9
    _timed("rate-limited write (40 requests at 20/s)", started)


def test_options_are_checked_on_the_driver_before_any_task_starts(
    spark: SparkSession, sandbox: cc.Sandbox
) -> None:
    df = events_df(spark, n=10, partitions=1)
    url = sandbox.base_url
    refused: dict[str, tuple[dict[str, object], str]] = {
        "unknown option": ({"base_url": url, "parallelism": 1, "batchsize": 5}, "batchsize"),
        "a bad value": ({"base_url": url, "parallelism": 1, "max_concurrency": "many"}, "many"),
        "plain http": ({"base_url": "http://example.com", "parallelism": 1}, "plain http"),
        "a bad zone": ({"base_url": url, "parallelism": 1, "naive_timezone": "Mars/X"}, "Mars"),
    }
    for case, (options, message) in refused.items():
        with pytest.raises(Exception, match=message):
            _write(df, **options)
        assert sandbox.stats()["requests"] == {}, case
    with pytest.raises(Exception, match=r"mode\('append'\)"):
        df.write.format("churn").option("base_url", url).mode("overwrite").save()


def test_spark_connect_writes_and_returns_per_row_results(
    connect: SparkSession, sandbox: cc.Sandbox, eventlog_dir: Path
) -> None:
    started = time.perf_counter()
    url = sandbox.base_url
    df = events_df(connect, n=1000, partitions=2)
    assert churn_spark.task_parallelism(df) is None  # no df.rdd on Spark Connect
    # the executors' CHURN_API_KEY: the key is nowhere in the plan
    _write(df, base_url=url, parallelism=2)
    assert len(sandbox.events(ENV_KEY)) == 1000
    # the helpers refuse the key as an option here: Connect logs every option's value
    with pytest.raises(cc.ConfigurationError, match="Spark Connect"):
        churn_spark.save(df, url, parallelism=2, api_token=CONNECT_KEY)
    # written by hand it works, hidden only because this server's string regex matches it
    _write(df, base_url=url, parallelism=2, api_token=CONNECT_KEY)
    assert len(sandbox.events(CONNECT_KEY)) == 1000
    res = churn_spark.send_events(df, url)  # parallelism unknown here: the assumed share
    assert {r.status for r in res.select("status").collect()} == {"sent"}
    assert sandbox.stats(ENV_KEY)["duplicates"] == 1000
    summary = churn_spark.save(df, url, parallelism=2)  # a local server: its files are ours
    assert summary is not None and summary["counts"]["sent"] == 1000
    _timed("Spark Connect", started)
    time.sleep(1)
    eventlog = "\n".join(
        p.read_text(errors="replace") for p in eventlog_dir.rglob("*") if p.is_file()
    )
    assert ENV_KEY not in eventlog and CONNECT_KEY not in eventlog
    assert "api_token" in eventlog  # the option's name shows: the check looked at the plans


@pytest.mark.parametrize("backend", ["postgres", "file"])
def test_tasks_share_a_ledger_by_url_and_a_rerun_sends_nothing(
    backend: str,
    spark: SparkSession,
    sandbox: cc.Sandbox,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if backend == "postgres":  # its password from PGPASSWORD in the executors' environment
        server: PostgresServer = request.getfixturevalue("postgres")
        url = server.url(server.fresh_schema(), password=False)
    else:
        url = (tmp_path / "segments").as_uri() + "/"
    df = events_df(spark, n=1200, partitions=3)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    _write(df, base_url=sandbox.base_url, parallelism=2, ledger=url, summary_path=first)
    requests = sandbox.stats()["requests"]
    _write(df, base_url=sandbox.base_url, parallelism=2, ledger=url, summary_path=second)
    assert json.loads(first.read_text())["counts"]["sent"] == 1200
    summary = json.loads(second.read_text())
    assert (summary["counts"]["skipped"], summary["requests"]) == (1200, 0)
    assert sandbox.stats()["requests"] == requests  # the second write sent nothing
    with cc.Ledger(url) as ledger:
        assert ledger.count("events") == 1200


def test_a_password_in_the_ledger_option_is_refused_on_the_driver(
    spark: SparkSession, sandbox: cc.Sandbox, eventlog_dir: Path
) -> None:
    url = f"postgresql://churn:{PG_PASSWORD}@127.0.0.1:5432/ledger"
    df = events_df(spark, n=10, partitions=1)
    with pytest.raises(Exception, match="PGPASSWORD") as info:
        _write(df, base_url=sandbox.base_url, ledger=url, parallelism=1)
    assert PG_PASSWORD not in str(info.value)
    assert len(sandbox.requests_log()) == 0
    time.sleep(1)
    eventlog = "\n".join(
        p.read_text(errors="replace") for p in eventlog_dir.rglob("*") if p.is_file()
    )
    # refused before the write ran: its plan, with the option's value, was never recorded
    assert PG_PASSWORD not in _sql_plans(spark) and PG_PASSWORD not in eventlog
