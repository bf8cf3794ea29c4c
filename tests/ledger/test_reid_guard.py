"""The re-id guard: with a ledger, an event delivered before under another message id (its
export gained a column, its rename, namespace or id format changed) is ``held``, never
stored twice, unless the caller says the new ids are meant (``new_ids``). Over real HTTP,
in every ledger backend, and across a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._core.book import RowBook
from churn_connector._core.types import RowState
from churn_connector._ledger import NATURAL_KIND, Guard, LedgerStage, ScopedLedger
from churn_connector._validate.failure_log import FailureLog
from churn_connector._wire.batch import WireBatch
from churn_connector._wire.natural_keys import natural_keys_of
from tests.ledger.conftest import location

ROOT = Path(__file__).parents[2]


def export(now: pd.Timestamp, n: int = 40) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"user_{i % 7}" for i in range(n)],
            "event_type": ["page_view" if i % 2 else "login" for i in range(n)],
            "occurred_at": [
                now - pd.Timedelta(hours=2) + pd.Timedelta(seconds=i) for i in range(n)
            ],
            "properties.seq": list(range(n)),
        }
    )


def stored_once(sandbox: cc.Sandbox) -> bool:
    """No (user, event type, time) is stored twice."""
    events = sandbox.events()
    keys = events[["external_user_id", "event_type", "occurred_at"]]
    return not keys.duplicated().any()


def test_an_export_that_gained_a_column_is_held_in_every_backend(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, ledger_url: str
) -> None:
    events = export(now)
    assert client.send_events(events, now=now, ledger=ledger_url).counts["sent"] == len(events)
    again = client.send_events(
        events.assign(**{"properties.plan": "pro"}), now=now, ledger=ledger_url
    )
    assert again.counts["held"] == len(events)
    assert again.counts["sent"] == 0
    assert again.exit_code == 1 and not again.ok
    assert len(sandbox.events()) == len(events)
    reason = again.rows["error"].iloc[0]
    first_ids = set(client.send_events(events, now=now, dry_run=True).rows["message_id"])
    named = reason.split("message id ")[1].split(" ")[0].rstrip(";")
    assert named in first_ids  # the earlier id, by name
    assert "properties/context columns changed" in reason
    assert "new_ids=True" in reason


def test_an_unchanged_rerun_skips_and_holds_nothing(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    client.send_events(events, now=now, ledger=ledger)
    again = client.send_events(events, now=now, ledger=ledger)
    assert again.counts["skipped"] == len(events) and again.counts["held"] == 0


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        ({}, {"namespace": "shop"}, "the namespace changed"),
        ({"id_format": "v1"}, {}, "the id format changed (v1 -> v2)"),
        ({"rename": {"seq": "properties.seq"}}, {"rename": {"seq": "properties.n"}}, "columns"),
    ],
    ids=["namespace", "id_format", "rename"],
)
def test_changed_id_settings_are_held_naming_what_changed(
    client: cc.Client,
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    first: dict[str, object],
    second: dict[str, object],
    said: str,
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    if "rename" in first:
        events = events.rename(columns={"properties.seq": "seq"})
    client.send_events(events, now=now, ledger=ledger, **first)  # type: ignore[arg-type]
    again = client.send_events(events, now=now, ledger=ledger, **second)  # type: ignore[arg-type]
    assert again.counts["held"] == len(events)
    assert said in again.rows["error"].iloc[0]
    assert len(sandbox.events()) == len(events)


def test_new_ids_sends_them_and_a_later_run_of_the_new_export_skips(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    client.send_events(events, now=now, ledger=ledger)
    changed = events.assign(**{"properties.plan": "pro"})
    meant = client.send_events(changed, now=now, ledger=ledger, new_ids=True)
    assert meant.counts["sent"] == len(events) and meant.exit_code == 0
    later = client.send_events(changed, now=now, ledger=ledger)
    assert later.counts["skipped"] == len(events) and later.counts["held"] == 0
    assert len(sandbox.events()) == 2 * len(events)  # what the caller asked for


def test_a_dry_run_counts_the_rows_it_would_hold(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    client.send_events(events, now=now, ledger=ledger)
    dry = client.send_events(
        events.assign(**{"properties.plan": "pro"}), now=now, ledger=ledger, dry_run=True
    )
    assert dry.counts["held"] == len(events) and dry.counts["would_send"] == 0
    assert "held 40" in dry.summary()


def test_a_message_id_column_is_the_callers_own_and_never_held(
    client: cc.Client, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    client.send_events(events, now=now, ledger=ledger)
    given = events.assign(message_id=[f"order-{i}" for i in range(len(events))])
    result = client.send_events(given, now=now, ledger=ledger)
    assert result.counts["sent"] == len(events) and result.counts["held"] == 0


def test_two_events_of_one_moment_in_one_run_are_both_sent_and_both_skipped_later(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    at = now - pd.Timedelta(hours=1)
    events = pd.DataFrame(
        {
            "external_user_id": ["u1"] * 4,
            "event_type": ["item_added"] * 4,
            "occurred_at": [at] * 4,  # second-precision exports often share a moment
            "properties.item": ["a", "b", "c", "d"],
        }
    )
    # two slices: the second's natural keys meet the first's records of this same run
    first = client.send_events(events, now=now, ledger=ledger, slice_rows=2)
    assert first.counts["sent"] == 4
    again = client.send_events(events, now=now, ledger=ledger, slice_rows=2)
    assert again.counts["skipped"] == 4
    assert len(sandbox.events()) == 4


def test_id_columns_guard_by_the_id_columns_values(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    columns = ["external_user_id", "properties.seq"]
    client.send_events(events, now=now, ledger=ledger, id_columns=columns)
    again = client.send_events(events, now=now, ledger=ledger, id_columns=columns, namespace="x")
    assert again.counts["held"] == len(events)
    assert "its id columns' values" in again.rows["error"].iloc[0]


def test_the_cli_exits_1_with_held_rows_and_0_with_new_ids(
    sandbox: cc.Sandbox,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    ledger = str(tmp_path / "ledger.sqlite")
    path, changed = tmp_path / "events.parquet", tmp_path / "changed.parquet"
    export(now).to_parquet(path)
    export(now).assign(**{"properties.plan": "pro"}).to_parquet(changed)
    assert main(["send", "events", str(path), "--ledger", ledger]) == 0
    receipts = tmp_path / "receipts.jsonl"
    code = main(["send", "events", str(changed), "--ledger", ledger, "--receipts", str(receipts)])
    assert code == 1
    out = capsys.readouterr().out
    assert "held 40" in out
    (receipt,) = [json.loads(line) for line in receipts.read_text().splitlines()]
    assert receipt["counts"]["held"] == 40
    assert main(["send", "events", str(changed), "--ledger", ledger, "--new-ids"]) == 0
    assert len(sandbox.events()) == 80


def test_forgetting_a_scopes_events_forgets_their_natural_keys(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    events = export(now)
    client.send_events(events, now=now, ledger=ledger)
    with cc.Ledger(ledger) as book:
        (scope,) = set(book.stats()["scope"])
        book.drop(scope, kind="events")
        assert book.count(NATURAL_KIND) == 0


def test_compaction_drops_old_natural_keys_with_the_events(tmp_path: Path) -> None:
    with cc.Ledger(tmp_path / "ledger.sqlite") as book:
        book.record("s", NATURAL_KIND, [("k", "id|run|v2|0000|0000|0000")])
        book.flush()
    import sqlite3  # noqa: PLC0415 - the file, aged by hand

    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:
        db.execute("UPDATE acknowledged SET acknowledged_at = '2020-01-01T00:00:00.000+00:00'")
    with cc.Ledger(tmp_path / "ledger.sqlite") as book:
        book.compact()
        assert book.count(NATURAL_KIND) == 0


# ------------------------------------------------------------------------------------------
# Natural keys are recorded before their requests leave: a run killed after the API stored
# events still leaves their keys, and a changed export sent next stores nothing twice.

WRITER = """
import sys, pandas as pd, churn_connector as cc
sys.path.insert(0, {root!r})
from tests.ledger.test_reid_guard import export
now = pd.Timestamp({now!r})
client = cc.Client({url!r}, {key!r}, max_concurrency=2)
client.send_events(export(now, 3000), now=now, ledger={ledger!r}, batch_size=20, progress=False)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "file"])
def test_a_run_killed_mid_send_leaves_every_stored_event_held_for_a_changed_export(
    backend: str, now: pd.Timestamp, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    ledger = location(backend, request, tmp_path)
    with cc.Sandbox(latency=0.02) as sandbox:
        code = WRITER.format(
            root=str(ROOT), now=now.isoformat(), url=sandbox.base_url, key=sandbox.api_key,
            ledger=ledger,
        )  # fmt: skip
        writer = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ), stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120
        while sandbox.stats()["stored"] < 300:
            assert writer.poll() is None, writer.stderr.read() if writer.stderr else ""
            assert time.monotonic() < deadline, "the writer stored too little in 120 s"
            time.sleep(0.02)
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        stored = len(sandbox.events())
        assert stored < 3000  # killed part way
        sandbox.set_faults(latency=0.0)
        changed = export(now, 3000).assign(**{"properties.plan": "pro"})
        client = cc.Client(sandbox.base_url, sandbox.api_key)
        result = client.send_events(changed, now=now, ledger=ledger, progress=False)
        assert stored_once(sandbox)
        assert result.counts["held"] >= stored  # every stored event, and perhaps a few more
        assert result.counts["held"] + result.counts["sent"] == 3000
        rows = result.rows
        held = rows[rows["status"] == "held"]["error"]
        # a key recorded for a request whose answer never came is said to be perhaps stored
        assert held.str.contains("delivered before|may be stored", regex=True).all()


# ------------------------------------------------------------------------------------------
# A key recorded for an event the API refused is forgotten: a corrected row is not held.


def test_natural_keys_of_rejected_events_are_forgotten_and_failed_ones_kept(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    events = export(now, 3).reset_index(drop=True)
    book = RowBook()
    book.extend(events.index)
    ms = (events["occurred_at"].astype("int64") // 1_000_000).to_numpy()
    natural = natural_keys_of(events, ms, None)
    batch = WireBatch(
        [0, 1, 2],
        ["id-0", "id-1", "id-2"],
        [b"{}", b"{}", b"{}"],
        content=np.array([1, 2, 3], dtype=np.int64),
        natural=natural,
    )
    with cc.Ledger(tmp_path / "ledger.sqlite") as opened:
        ledger = ScopedLedger(opened, "scope")
        stage = LedgerStage(ledger, "events", FailureLog(book), Guard())
        stage.filter(batch)
        keys = natural.hex()
        assert set(ledger.known(NATURAL_KIND, keys)) == set(keys)  # before any request
        stage.acknowledged([0])
        book.set([0], RowState.SENT)
        book.set([1], RowState.REJECTED)
        book.set([2], RowState.FAILED)
        stage.finish()
        assert set(ledger.known(NATURAL_KIND, keys)) == {keys[0], keys[2]}
