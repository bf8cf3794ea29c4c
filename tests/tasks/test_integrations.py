"""Task wrappers for orchestrators: JSON-able summaries, result files, failing tasks."""

from __future__ import annotations

import json
import pickle
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc
from tests.conftest import MakeEvents
from tests.ledger.servers import PG_PASSWORD


def test_task_returns_a_json_serialisable_summary(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    summary = cc.send_events_task(
        events, base_url=sandbox.base_url, api_key=sandbox.api_key, now=now, batch_size=4
    )
    assert json.loads(json.dumps(summary))["counts"]["sent"] == len(events)
    assert summary["requests"] == 3


def test_task_writes_result_frames(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp, tmp_path: Path
) -> None:
    cc.send_events_task(
        events, base_url=sandbox.base_url, api_key=sandbox.api_key, now=now, results_dir=tmp_path
    )
    assert len(pd.read_parquet(tmp_path / "events_rows.parquet")) == len(events)
    assert pd.read_csv(tmp_path / "events_chunks.csv")["status"].tolist() == ["sent"]


def test_task_fails_with_a_picklable_error_when_rows_are_not_delivered(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    sandbox.set_faults(error_rate=1.0)
    config = cc.ClientConfig.create(
        sandbox.base_url, sandbox.api_key, retry=cc.RetryPolicy(max_attempts=2)
    )
    with pytest.raises(cc.DeliveryError) as info:
        cc.send_events_task(events, config=config, now=now)
    assert pickle.loads(pickle.dumps(info.value)).counts["failed"] == len(events)


def test_invalid_rows_fail_the_task_unless_allowed(
    sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    events.loc[0, "event_type"] = "BAD"
    with pytest.raises(cc.DeliveryError, match="invalid 1"):
        cc.send_events_task(events, base_url=sandbox.base_url, api_key=sandbox.api_key, now=now)
    summary = cc.send_events_task(
        events, base_url=sandbox.base_url, api_key=sandbox.api_key, now=now, allow_invalid=True
    )
    assert summary["exit_code"] == 1


def test_a_task_stopped_part_way_still_writes_its_result_files(
    make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    port_of_nothing = socket.socket()
    port_of_nothing.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{port_of_nothing.getsockname()[1]}"
    port_of_nothing.close()
    events = make_events(now, n=10)
    with pytest.raises(cc.TransportError, match="connection refused"):
        cc.send_events_task(events, base_url=url, api_key="k", now=now, results_dir=tmp_path)
    rows = pd.read_parquet(tmp_path / "events_rows.parquet")
    assert len(rows) == len(events)
    assert set(rows["status"]) == {"failed"}


def test_send_partition_returns_a_result_row_per_row_on_the_partitions_index(
    sandbox: cc.Sandbox, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    # a Dask partition keeps its slice of the whole frame's index
    part = make_events(now, n=6).set_axis(pd.RangeIndex(100, 106))
    part.loc[101, "event_type"] = "Bad Type"
    send = pickle.loads(pickle.dumps(cc.send_partition))  # what a scheduler ships
    res = send(
        part,
        base_url=sandbox.base_url,
        api_key=sandbox.api_key,
        now=now,
        batch_size=2,  # the send's options and the client's side by side
        max_requests_per_second=100,
    )
    assert list(res.columns) == ["status", "message_id", "chunk", "error"]
    assert res.index.equals(part.index)
    assert res["status"].tolist() == ["sent", "invalid", "sent", "sent", "sent", "sent"]
    assert res["chunk"].max() == 3  # 5 valid rows, 2 per request
    assert "event_type_pattern" in res.at[101, "error"] and pd.isna(res.at[101, "message_id"])
    assert set(res["message_id"].dropna()) == set(sandbox.events()["message_id"])


def test_send_partition_takes_arrow_batches_and_identities(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    users = pa.table({"external_user_id": ["u1", "u2"], "traits.plan": ["pro", "free"]})
    res = cc.send_partition(
        users, kind="identities", base_url=sandbox.base_url, api_key=sandbox.api_key
    )
    assert res["status"].tolist() == ["sent", "sent"] and list(res.index) == [0, 1]
    assert sorted(sandbox.users()["external_user_id"]) == ["u1", "u2"]
    with pytest.raises(cc.ConfigurationError, match="kind"):
        cc.send_partition(users, kind="users")  # type: ignore[arg-type]


def test_send_partition_of_an_empty_frame_needs_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # what Dask passes to learn the result's columns (meta): no URL, no key, no request
    monkeypatch.delenv("CHURN_BASE_URL", raising=False)
    meta = cc.send_partition(pd.DataFrame(columns=["external_user_id"]))
    assert meta.empty and meta.dtypes.astype(str).to_dict() == cc.PARTITION_RESULT_META


@pytest.mark.e2e
def test_tasks_take_a_postgres_ledger_url_and_keep_its_password_out_of_their_files(
    sandbox: cc.Sandbox,
    events: pd.DataFrame,
    now: pd.Timestamp,
    pg_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def task(ledger: str, folder: str) -> dict[str, Any]:
        return cc.send_events_task(
            events,
            base_url=sandbox.base_url,
            api_key=sandbox.api_key,
            now=now,
            ledger=ledger,
            results_dir=tmp_path / folder,
        )

    first = task(pg_url, "1")
    again = task(pg_url, "2")
    assert (first["counts"]["sent"], again["counts"]["skipped"]) == (len(events), len(events))
    assert again["requests"] == 0
    wrong = pg_url.replace(PG_PASSWORD, "pg_CANARY_refused_31c7")
    with caplog.at_level("DEBUG"), pytest.raises(cc.LedgerError) as info:
        task(wrong, "3")
    shown = [json.dumps(first), json.dumps(again), str(info.value), caplog.text]
    shown += [p.read_bytes().decode(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert not any(s in text for text in shown for s in (PG_PASSWORD, "pg_CANARY_refused"))
