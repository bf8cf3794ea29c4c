"""Dagster metadata never holds a canary key or canary personal data: a send's
materialization, a refused key's failure and a check's evaluation, with personal data in
valid rows' properties and as invalid rows' bad values; everything Dagster keeps of the run
(its record and event log) is searched. Real Dagster, real HTTP to a sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from dagster import DagsterInstance, EnvVar, MaterializeResult, asset, materialize
from dagster._serdes import serialize_value

import churn_connector as cc
from churn_connector.dagster import ChurnResource, churn_check
from tests.dagster.conftest import BAD_KEY, GOOD_KEY, KEY_ENV

PERSONAL = ["canary.jane.doe@example.com", "+1 555 0100 CANARY", "CANARY-bad-time-jane"]


def _table() -> pd.DataFrame:
    now = str(pd.Timestamp.now(tz="UTC").floor("s"))
    return pd.DataFrame(
        {
            "external_user_id": ["user_0", "user_1", PERSONAL[0]],
            "event_type": ["login"] * 3,
            "occurred_at": [now, now, PERSONAL[2]],  # the last row is invalid: its value is PII
            "properties": [{"email": PERSONAL[0], "phone": PERSONAL[1]}] * 3,
        }
    )


def _kept(key: str, sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a table, its check and its send with ``key``; all Dagster kept of the run."""
    monkeypatch.setenv(KEY_ENV, key)

    @asset
    def events() -> pd.DataFrame:
        return _table()

    @asset
    def delivered(churn: ChurnResource, events: pd.DataFrame) -> MaterializeResult:  # type: ignore[type-arg]
        return churn.send_events(events, results_dir=tmp_path)

    assets: list[Any] = [events, delivered, churn_check(events, max_invalid="50%")]
    churn = ChurnResource(base_url=sandbox.base_url, api_key=EnvVar(KEY_ENV))
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            assets, resources={"churn": churn}, instance=instance, raise_on_error=False
        )
        [evaluation] = result.get_asset_check_evaluations()
        assert evaluation.metadata["churn/invalid"].value == 1  # the PII row was counted
        run = instance.get_run_by_id(result.run_id)
        return serialize_value(run) + "".join(
            serialize_value(entry) for entry in instance.all_logs(result.run_id)
        )


@pytest.mark.parametrize("key", [GOOD_KEY, BAD_KEY], ids=["delivered", "refused"])
def test_dagster_keeps_no_personal_data_and_no_key(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sandbox:
        kept = _kept(key, sandbox, tmp_path, monkeypatch)
    assert "churn/invalid" in kept
    assert key not in kept
    assert [p for p in PERSONAL if p in kept] == []
