"""The Dagster integration in real Dagster: assets materialized in process, over real HTTP to
the sandbox, the event log searched for the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from dagster import (
    AssetCheckSeverity,
    DagsterInstance,
    EnvVar,
    ExecuteInProcessResult,
    HourlyPartitionsDefinition,
    MaterializeResult,
    asset,
    materialize,
)
from dagster._serdes import serialize_value

import churn_connector as cc
from churn_connector._core import read_runs
from churn_connector._core.declarations import options_of
from churn_connector.dagster import ChurnResource, churn_check, invalid_limit
from tests.dagster.conftest import BAD_KEY, GOOD_KEY, KEY_ENV

USERS = ["user_0", "user_1", "user_2"]


def _events(invalid: int, n: int = 10) -> pd.DataFrame:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    return pd.DataFrame(
        {
            "external_user_id": [USERS[i % 3] for i in range(n - invalid)] + [""] * invalid,
            "event_type": ["login"] * n,
            "occurred_at": [now - pd.Timedelta(minutes=i) for i in range(n)],
        }
    )


def _assets(invalid: int, results_dir: Path) -> list[Any]:
    @asset
    def events() -> pd.DataFrame:
        return _events(invalid)

    @asset
    def events_delivered(churn: ChurnResource, events: pd.DataFrame) -> MaterializeResult:  # type: ignore[type-arg]
        return churn.send_events(events, results_dir=results_dir)

    return [events, events_delivered]


def _run(
    assets: list[Any], sandbox: cc.Sandbox, instance: DagsterInstance
) -> ExecuteInProcessResult:
    churn = ChurnResource(base_url=sandbox.base_url, api_key=EnvVar(KEY_ENV))
    return materialize(assets, resources={"churn": churn}, instance=instance, raise_on_error=False)


def _event_log(instance: DagsterInstance, run_id: str) -> str:
    """Everything Dagster keeps of the run: its record (config included) and event log."""
    run = instance.get_run_by_id(run_id)
    return serialize_value(run) + "".join(
        serialize_value(entry) for entry in instance.all_logs(run_id)
    )


def test_an_assets_table_is_sent_with_its_counts_as_materialization_metadata(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, GOOD_KEY)
    with DagsterInstance.ephemeral() as instance:
        result = _run(_assets(invalid=2, results_dir=tmp_path), sandbox, instance)
        assert result.success
        [materialization] = result.asset_materializations_for_node("events_delivered")
        metadata = {k: v.value for k, v in materialization.metadata.items()}
        assert {k: metadata[f"churn/{k}"] for k in ("rows", "sent", "invalid", "requests")} == {
            "rows": 10,
            "sent": 8,
            "invalid": 2,
            "requests": 1,
        }
        assert metadata["churn/rows_file"] == str(tmp_path / "events_rows.parquet")
        assert Path(str(metadata["churn/chunks_file"])).exists()
        assert len(sandbox.events(GOOD_KEY)) == 8
        assert GOOD_KEY not in _event_log(instance, result.run_id)


def test_a_refused_key_fails_the_asset_without_showing_the_key(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, BAD_KEY)
    with DagsterInstance.ephemeral() as instance:
        result = _run(_assets(invalid=0, results_dir=tmp_path), sandbox, instance)
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        assert failure.step_key == "events_delivered"
        assert "refused" in str(failure.event_specific_data)
        assert BAD_KEY not in _event_log(instance, result.run_id)
    assert sandbox.events().empty


@pytest.mark.parametrize(
    ("max_invalid", "severity", "delivered"),
    [
        (1, AssetCheckSeverity.ERROR, 0),  # 3 invalid > 1: blocks the send downstream
        ("50%", AssetCheckSeverity.WARN, 7),  # within the threshold: warns, the send runs
    ],
)
def test_a_blocking_check_keeps_the_send_from_running_above_its_threshold(
    sandbox: cc.Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    max_invalid: int | str,
    severity: AssetCheckSeverity,
    delivered: int,
) -> None:
    monkeypatch.setenv(KEY_ENV, GOOD_KEY)
    events, send = _assets(invalid=3, results_dir=tmp_path)
    check = churn_check(events, max_invalid=max_invalid)
    with DagsterInstance.ephemeral() as instance:
        result = _run([events, send, check], sandbox, instance)
        [evaluation] = result.get_asset_check_evaluations()
        assert not evaluation.passed and evaluation.severity == severity
        metadata = {k: v.value for k, v in evaluation.metadata.items()}
        assert (metadata["churn/rows"], metadata["churn/invalid"]) == (10, 3)
        assert metadata["churn/check/external_user_id_not_blank"] == 3
        sent = result.asset_materializations_for_node("events_delivered")
        assert len(sent) == (1 if delivered else 0)
        assert GOOD_KEY not in _event_log(instance, result.run_id)
    assert len(sandbox.events()) == delivered


def test_thresholds_are_counts_or_shares_of_the_rows() -> None:
    assert invalid_limit(5, 1000) == 5
    assert invalid_limit("0.5%", 1000) == 5
    with pytest.raises(cc.ConfigurationError, match="0% to 100%"):
        invalid_limit("150%", 10)
    with pytest.raises(cc.ConfigurationError, match="at least 0"):
        churn_check("events", max_invalid=-1)


def test_the_resources_fields_are_declared_client_options_with_their_defaults() -> None:
    # spelled out for Dagster's UI (a pydantic model needs static fields); kept one here
    declared = {o.name: o for o in options_of(cc.ClientConfig)}
    own = set(ChurnResource.model_fields) - {"base_url", "api_key"}
    assert own
    for name in own:
        option = declared[name]  # a KeyError: a field no client option declares
        default = ChurnResource.model_fields[name].default
        # None: the client's own default applies, whatever it is
        assert default is None or default == option.default, name


def test_a_checks_tracking_plan_blocks_the_send_of_a_table_that_breaks_it(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, GOOD_KEY)
    events, send = _assets(invalid=0, results_dir=tmp_path)
    # every row meets the contract; the plan knows no login (unknown_events: refuse)
    plan = cc.TrackingPlan(events={"signup": {}}, unknown_events="refuse")
    check = churn_check(events, plan=plan)
    with DagsterInstance.ephemeral() as instance:
        result = _run([events, send, check], sandbox, instance)
        [evaluation] = result.get_asset_check_evaluations()
        assert not evaluation.passed and evaluation.severity == AssetCheckSeverity.ERROR
        metadata = {k: v.value for k, v in evaluation.metadata.items()}
        assert metadata["churn/check/plan.unknown_event"] == 10
        assert result.asset_materializations_for_node("events_delivered") == []
    assert len(sandbox.events()) == 0


def test_a_checks_plan_is_read_when_the_definitions_load(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text('{"events": {"login": {"anyOf": []}}}')
    with pytest.raises(cc.PlanError, match="'anyOf'"):
        churn_check("events", plan=bad)


def test_each_partition_sends_the_rows_of_its_time_window_from_a_query(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb  # noqa: PLC0415 - the sql extra

    monkeypatch.setenv(KEY_ENV, GOOD_KEY)
    start = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=5)
    path = tmp_path / "source.duckdb"
    stamps = [start - pd.Timedelta(hours=1) + pd.Timedelta(minutes=10 * i) for i in range(30)]
    with duckdb.connect(str(path)) as db:
        db.execute("CREATE TABLE events (uid TEXT, loaded_at TIMESTAMPTZ)")
        db.executemany(
            "INSERT INTO events VALUES (?, ?)",
            [(f"user_{i}", s.to_pydatetime()) for i, s in enumerate(stamps)],
        )
    query = (
        "SELECT uid AS external_user_id, 'login' AS event_type, loaded_at AS occurred_at, "
        "loaded_at FROM events"
    )
    hourly = HourlyPartitionsDefinition(start_date=start.strftime("%Y-%m-%d-%H:%M"))

    @asset(partitions_def=hourly)
    # context unannotated: Dagster reads the annotation, which this module's future import
    # leaves as a string it does not resolve
    def events_delivered(context, churn: ChurnResource) -> MaterializeResult:  # type: ignore[no-untyped-def,type-arg]
        return churn.send_events(
            cc.sql(query, path),
            cursor="loaded_at",
            time_window=context.partition_time_window,
            results_dir=tmp_path / context.partition_key.replace(":", "_"),
        )

    churn = ChurnResource(base_url=sandbox.base_url, api_key=EnvVar(KEY_ENV))
    sent: set[str] = set()
    with DagsterInstance.ephemeral() as instance:
        for hour in (1, 2):
            key = (start + pd.Timedelta(hours=hour)).strftime("%Y-%m-%d-%H:%M")
            result = materialize(
                [events_delivered], resources={"churn": churn}, instance=instance, partition_key=key
            )
            assert result.success
            window = (start + pd.Timedelta(hours=hour), start + pd.Timedelta(hours=hour + 1))
            expected = {f"user_{i}" for i, s in enumerate(stamps) if window[0] <= s < window[1]}
            stored = set(sandbox.events()["external_user_id"])
            assert len(expected) == 6
            assert stored - sent == expected
            sent = stored
    assert len(sandbox.events()) == 12


def test_a_checks_description_writes_its_threshold_as_given_with_separators() -> None:
    [count] = churn_check("events", max_invalid=1500).check_specs
    assert "(ERROR above 1,500 invalid rows, WARN at or below)" in (count.description or "")
    [share] = churn_check("events", max_invalid="0.5%").check_specs
    assert "(ERROR above 0.5% invalid rows, WARN at or below)" in (share.description or "")


def test_the_resources_sends_append_to_a_run_history(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, GOOD_KEY)
    history = f"duckdb://{tmp_path}/runs.duckdb"

    @asset
    def events_delivered(churn: ChurnResource) -> MaterializeResult:  # type: ignore[type-arg]
        return churn.send_events(_events(1), results_dir=tmp_path, history=history)

    with DagsterInstance.ephemeral() as instance:
        assert _run([events_delivered], sandbox, instance).success
    [run] = read_runs(history)
    assert (run["rows"], run["counts"]["sent"], run["exit_code"]) == (10, 9, 1)
