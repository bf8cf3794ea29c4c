"""OpenLineage facets never hold a canary key or canary personal data: not from a source's
URL (credentials, a presigned signature), an upstream task's outlets, or the rows themselves
(valid rows' properties, invalid rows' bad values), in a real DAG run with OpenLineage's
provider and its file transport."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.airflow.conftest import GOOD_KEY, OPENLINEAGE_FILE, leaks, run_dag, use_connection

PASSWORD = "CANARY-pw-5d1e9a"
PERSONAL = ["canary.jane.doe@example.com", "+1 555 0100 CANARY", "CANARY-bad-time-jane"]


@pytest.mark.parametrize(
    "source",
    [
        f"https://bob:{PASSWORD}@files.example.com/e.csv",
        f"s3://AKIAEXAMPLE:{PASSWORD}@bucket/day/",
        f"https://files.example.com/e.csv?sig={PASSWORD}&se=2026",
        [f"gs://u:{PASSWORD}@b/a.parquet"],
    ],
)
def test_a_sources_credentials_never_reach_its_dataset(source: object) -> None:
    from churn_connector.airflow.lineage import input_datasets  # noqa: PLC0415

    found = input_datasets(source, None)
    assert found and PASSWORD not in repr(found)
    assert all("@" not in namespace for namespace, _ in found)


def test_an_upstream_outlets_credentials_never_reach_the_dataset() -> None:
    from churn_connector.airflow.lineage import input_datasets  # noqa: PLC0415

    found = input_datasets(None, ("d", "extract", [f"s3://k:{PASSWORD}@lake/users/"]))
    assert found == [("s3://lake", "users/")]


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


def test_the_facets_of_a_send_hold_no_personal_data_and_no_key(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = pd.DataFrame(
        {
            "external_user_id": ["user_0", "user_1", "user_2", PERSONAL[0]],
            "event_type": ["login"] * 4,
            # the last row's bad value is personal data: an invalid row, counted in facets
            "occurred_at": [str(now), str(now), str(now), PERSONAL[2]],
            "properties": [{"email": PERSONAL[0], "phone": PERSONAL[1]}] * 4,
        }
    )
    path = tmp_path / "events.parquet"
    events.to_parquet(path)
    OPENLINEAGE_FILE.unlink(missing_ok=True)
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    inputs = {"events": str(path), "users": str(path), "ledger": ""}
    state, tis, _ = run_dag("churn_send", inputs)
    assert tis["send_events"][0] == "success", state
    emitted = OPENLINEAGE_FILE.read_bytes()
    assert b"dataQualityAssertions" in emitted  # the invalid row was reported, by count
    assert leaks(emitted) == []
    assert [p for p in PERSONAL if p.encode() in emitted] == []
