"""Re-sending what a run left undelivered: exactly the missing events, once, with the same
message ids; a changed input, an old rows file or other id options are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._results.result import write_frame, write_frames
from churn_connector._results.runs import HEADER

RETRY_ONCE = cc.RetryPolicy(max_attempts=2)


def _events(now: pd.Timestamp, n: int = 15) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": [now - pd.Timedelta(seconds=i) for i in range(n)],
        }
    )


@pytest.fixture
def export(now: pd.Timestamp, tmp_path: Path) -> Path:
    path = tmp_path / "events.csv"
    events = _events(now)
    events.loc[7, "event_type"] = "Not Snake"  # invalid: never sent, never re-sent
    events.to_csv(path, index=False)
    return path


def _faulty_send(sandbox: cc.Sandbox, data: object) -> cc.SendResult:
    """Three requests of five: the first stored but never answered, the second refused with
    503 on both attempts, the third delivered."""
    sandbox.script_faults([cc.Fault("drop"), cc.Fault("drop"), cc.Fault("5xx"), cc.Fault("5xx")])
    client = cc.Client(
        sandbox.base_url, sandbox.api_key, batch_size=5, max_concurrency=1, retry=RETRY_ONCE
    )
    return client.send_events(data, progress=False)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_resend_after_faults_stores_exactly_the_missing_events_once(
    sandbox: cc.Sandbox, export: Path, tmp_path: Path, suffix: str
) -> None:
    first = _faulty_send(sandbox, export)
    assert first.counts["failed"] == 10 and first.counts["invalid"] == 1
    assert len(sandbox.events()) == 9  # the dropped chunk's five were stored all the same
    rows = tmp_path / f"rows{suffix}"
    write_frames(first.row_frames(), rows)

    again = cc.resend(rows, export, sandbox.base_url, sandbox.api_key, progress=False)

    assert again.counts == {
        "sent": 10,
        "invalid": 0,
        "rejected": 0,
        "failed": 0,
        "skipped": 0,
        "expired": 0,
        "held": 0,
    }
    failed = first.rows[first.rows["status"] == "failed"]
    assert list(again.rows.index) == list(failed.index)  # the same rows, by label
    assert list(again.rows["message_id"]) == list(failed["message_id"])  # the same ids
    stored = sandbox.events()
    assert len(stored) == 14  # every valid row once
    assert stored["message_id"].is_unique
    assert set(stored["message_id"]) == set(first.rows["message_id"].dropna())
    # the dropped chunk arrived three times (first try, retry, re-send): stored once
    assert sandbox.stats()["duplicates"] == 10


def test_resend_refuses_an_input_that_changed(
    sandbox: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    first = _faulty_send(sandbox, export)
    rows = tmp_path / "rows.parquet"
    write_frame(first.rows, rows)
    export.write_text(export.read_text().replace("u3,", "u33,"))
    with pytest.raises(cc.InputError, match="the input no longer matches"):
        cc.resend(rows, export, sandbox.base_url, sandbox.api_key)
    assert len(sandbox.events()) == 9  # nothing more was sent


def test_resend_refuses_a_rows_file_without_a_fingerprint(
    sandbox: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    first = _faulty_send(sandbox, export)
    old = tmp_path / "old.parquet"
    plain = first.rows.copy()
    plain.attrs.clear()  # as the rows files of earlier versions were written
    write_frame(plain, old)
    assert HEADER.encode() not in (pq.read_schema(old).metadata or {})
    with pytest.raises(cc.InputError, match="records no fingerprint of its input"):
        cc.resend(old, export, sandbox.base_url, sandbox.api_key)


def test_resend_refuses_other_id_options(sandbox: cc.Sandbox, export: Path, tmp_path: Path) -> None:
    first = _faulty_send(sandbox, export)
    with pytest.raises(cc.InputError, match="give the same id options"):
        cc.resend(first.rows, export, sandbox.base_url, sandbox.api_key, namespace="other")


def test_the_csv_rows_files_header_is_beside_it(
    sandbox: cc.Sandbox, export: Path, tmp_path: Path
) -> None:
    first = _faulty_send(sandbox, export)
    rows = tmp_path / "rows.csv"
    write_frames(first.row_frames(), rows)
    header = json.loads((tmp_path / "rows.csv.run.json").read_text())
    assert header["input"] == first.fingerprint
    assert header["kind"] == "events" and header["complete"] is True
    assert list(pd.read_csv(rows).columns) == ["row", "status", "message_id", "chunk", "error"]


def test_resend_includes_rejected_rows_only_when_asked(sandbox: cc.Sandbox, export: Path) -> None:
    first = _faulty_send(sandbox, export)
    rows = first.rows.copy()
    rows.loc[rows.index[-1], "status"] = "rejected"  # as if the API had refused it
    plain = cc.resend(rows, export, sandbox.base_url, sandbox.api_key, progress=False)
    both = cc.resend(
        rows, export, sandbox.base_url, sandbox.api_key, include_rejected=True, progress=False
    )
    assert (plain.n_rows, both.n_rows) == (10, 11)


def test_resend_after_a_run_that_stopped_sends_the_failed_and_the_unread_rows(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    events = _events(now, 30)
    parts = [events.iloc[0:10], events.iloc[10:20], events.iloc[20:30]]

    def breaking() -> Iterator[pd.DataFrame]:
        yield parts[0]
        yield parts[1]
        raise OSError("the warehouse cursor broke")

    client = cc.Client(sandbox.base_url, sandbox.api_key)
    with pytest.raises(cc.InputError) as stopped:
        client.send_events(breaking(), progress=False)
    rows = stopped.value.rows
    assert rows is not None and rows.attrs[HEADER]["complete"] is False
    delivered = int((rows["status"] == "sent").sum())

    again = cc.resend(rows, parts, sandbox.base_url, sandbox.api_key, progress=False)

    assert again.counts["sent"] == 30 - delivered
    assert len(sandbox.events()) == 30
    assert sandbox.stats()["duplicates"] == 0


def test_the_rows_of_a_resend_are_not_a_rows_file_of_the_input(
    sandbox: cc.Sandbox, export: Path
) -> None:
    first = _faulty_send(sandbox, export)
    again = cc.resend(first.rows, export, sandbox.base_url, sandbox.api_key, progress=False)
    with pytest.raises(cc.InputError, match="holds the rows of a re-send"):
        cc.resend(again.rows, export, sandbox.base_url, sandbox.api_key)


def test_a_receipt_holds_counts_and_ids_never_data_or_the_key(
    sandbox: cc.Sandbox, export: Path
) -> None:
    first = _faulty_send(sandbox, export)
    receipt = first.receipt()
    text = json.dumps(receipt)
    assert sandbox.api_key not in text
    assert "u3" not in text and "login" not in text  # no cell of the input
    assert receipt["counts"]["failed"] == 10
    assert receipt["requests"] == 3 and receipt["retries"] == 2
    assert receipt["exit_code"] == 2
    assert receipt["input"] == first.fingerprint
    assert receipt["run_id"] == first.header["run_id"]
    assert receipt["started_at"] <= receipt["finished_at"]
