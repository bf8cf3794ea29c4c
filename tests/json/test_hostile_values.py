"""Hostile values: deep nesting, control characters in ids, and events that age out of the
API's window while a long run is under way. Each is one row's problem, never a crash."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._json.values import MAX_DEPTH
from churn_connector._ledger.sqlite import SqliteLedger
from tests.conftest import MakeEvents


def nested(levels: int) -> dict[str, Any]:
    """An object ``levels`` deep (the outermost counts as one)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def with_properties(events: pd.DataFrame, cell: object, row: int = 0) -> pd.DataFrame:
    cells: list[object] = [{}] * len(events)
    cells[row] = cell
    return events.assign(properties=pd.Series(cells, index=events.index, dtype=object))


@pytest.mark.parametrize("extra", [1, 10, 5000])
def test_a_value_nested_too_deep_makes_only_its_row_invalid(
    extra: int, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    # the event is level 1 and properties level 2: MAX_DEPTH - 1 levels fit in properties
    report = cc.validate_events(with_properties(events, nested(MAX_DEPTH - 1 + extra)), now=now)
    assert report.n_invalid == 1
    failure = report.failures.iloc[0]
    assert (failure["row"], failure["check"]) == (0, "properties_json")
    assert f"nested deeper than {MAX_DEPTH} levels" in failure["message"]


def test_the_deepest_allowed_value_is_sent_exactly(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    df = with_properties(events, nested(MAX_DEPTH - 1))
    result = client.send_events(df, now=now)
    assert result.ok and result.counts["sent"] == len(events)
    stored = sandbox.events().set_index("message_id")
    deepest = stored.loc[result.rows["message_id"][0], "properties"]
    assert deepest["a"] == nested(MAX_DEPTH - 1)["a"]


def test_deep_json_text_is_reported_like_a_deep_dict(
    events: pd.DataFrame, now: pd.Timestamp
) -> None:
    text = '{"a":' * 3000 + "1" + "}" * 3000
    report = cc.validate_events(with_properties(events, text), now=now)
    assert report.n_invalid == 1
    assert "nested deeper than" in report.failures.iloc[0]["message"]


@pytest.mark.parametrize("mid", ["abc\x00", "\x00abc", "a\x01b\x1fc", "tab\tand\nnewline"])
def test_message_ids_with_control_characters_come_back_exactly(
    mid: str, client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    df = events.assign(message_id=[f"{mid}-{i}" for i in range(len(events))])
    result = client.send_events(df, now=now)
    assert result.ok
    assert result.rows["message_id"].tolist() == df["message_id"].tolist()
    assert set(sandbox.events()["message_id"]) == set(df["message_id"])


def test_an_event_aging_out_before_its_request_is_expired_and_never_sent(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, now: pd.Timestamp
) -> None:
    # inside the window when validated, but less than a minute from its end when sent
    df = events.copy()
    df.loc[3, "occurred_at"] = now - pd.Timedelta(days=30) + pd.Timedelta(seconds=20)
    assert cc.validate_events(df, now=now).ok
    result = client.send_events(df, now=now)
    assert result.counts["expired"] == 1 and result.counts["sent"] == len(df) - 1
    assert result.rows["status"][3] == "expired"
    assert "30-day window" in result.rows["error"][3]
    assert result.exit_code == 1
    assert not result.ok
    assert "expired 1" in result.summary()
    assert result.rows["message_id"][3] not in set(sandbox.events()["message_id"])
    assert result.chunks["events"].tolist() == [len(df) - 1]  # the batch was not spoiled


def test_ledger_writes_acknowledgements_in_groups_the_first_at_once(
    client: cc.Client, make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    ledger = cc.Ledger(tmp_path / "ledger.sqlite")
    assert isinstance(ledger, SqliteLedger)  # a path opens the SQLite backend
    statements: list[str] = []
    ledger._db.set_trace_callback(statements.append)
    result = client.send_events(make_events(now, n=120), now=now, ledger=ledger, batch_size=10)
    assert result.counts["sent"] == 120
    commits = [s for s in statements if s.strip().upper() == "COMMIT"]
    # the first acknowledgement (a ledger that cannot be written stops the run early),
    # then what was buffered, at the end of the run: not one transaction per request
    assert 2 <= len(commits) < len(result.chunks) == 12
    with sqlite3.connect(tmp_path / "ledger.sqlite") as db:  # written before any close
        assert db.execute("SELECT COUNT(*) FROM acknowledged WHERE kind = 'events'").fetchone() == (
            120,
        )
    ledger.close()


def test_two_processes_may_share_a_ledger_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with cc.Ledger(path) as one, cc.Ledger(path) as two:
        one.record("scope", "events", [("a", "1")])
        two.record("scope", "events", [("b", "2")])
        assert one.known("scope", "events", ["a", "b"]) == {"a": "1", "b": "2"}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM acknowledged").fetchone() == (2,)
