"""``id_format``: v2 by default; ``"v1"`` makes 0.1's ids, so a backfill begun with 0.1 can
be finished (or re-run) after the upgrade without storing its events twice. Every public
entry point takes it: validate_events, events_to_wire, Client.send_events, the one-call
form, the command line (``--id-format``), Spark and Airflow (options routed by name)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._options.events import EventOptions

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def backfill(now: pd.Timestamp) -> pd.DataFrame:
    """An export read by pandas: ``seats`` was an int column with a null, so it is float64."""
    n = 6
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["seat_added"] * n,
            "occurred_at": [now - pd.Timedelta(hours=1, minutes=i) for i in range(n)],
            "properties.seats": [float(i) if i else None for i in range(n)],
        }
    )


def ids_of(events: list[dict[str, object]]) -> list[object]:
    return [e["context"]["$message_id"] for e in events]  # type: ignore[index]


def test_v2_is_the_default_and_v1_gives_other_ids(now: pd.Timestamp) -> None:
    df = backfill(now)
    v2 = ids_of(cc.events_to_wire(df, now=now))
    assert ids_of(cc.events_to_wire(df, now=now, id_format="v2")) == v2
    v1 = ids_of(cc.events_to_wire(df, now=now, id_format="v1"))
    assert not set(v1) & set(v2)
    assert EventOptions().id_format == "v2"


def test_v1_sends_whole_floats_as_0_1_did(now: pd.Timestamp) -> None:
    seats = [e["properties"] for e in cc.events_to_wire(backfill(now), now=now, id_format="v1")]
    assert [type(p.get("seats")) for p in seats] == [type(None)] + [float] * 5


def test_validation_counts_an_integral_float_and_its_integer_as_one_event(
    now: pd.Timestamp,
) -> None:
    row = backfill(now).iloc[[1]].drop(columns="properties.seats")
    twice = pd.concat([row, row], ignore_index=True)
    twice["properties"] = pd.Series([{"seats": 3}, {"seats": 3.0}])
    assert cc.validate_events(twice, now=now).duplicates == 1
    assert cc.validate_events(twice, now=now, id_format="v1").duplicates == 0


def test_a_backfill_begun_with_v1_is_finished_without_duplicates(
    now: pd.Timestamp, sandbox: cc.Sandbox
) -> None:
    df = backfill(now)
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    # the first half went out before the upgrade (0.1's ids)
    assert client.send_events(df.iloc[:3], now=now, id_format="v1").ok
    # the whole re-run after it, keeping the format: each event once
    assert cc.send_events(df, sandbox.base_url, sandbox.api_key, now=now, id_format="v1").ok
    assert sandbox.stats()["stored"] == 6
    assert sandbox.events()["message_id"].tolist() == ids_of(
        cc.events_to_wire(df, now=now, id_format="v1")
    )
    # without it, the re-run's new ids store the sent half again
    assert client.send_events(df, now=now).ok
    assert sandbox.stats()["stored"] == 12


def test_the_command_line_takes_id_format(
    now: pd.Timestamp, tmp_path: Path, sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "export.parquet"
    pq.write_table(pa.Table.from_pandas(backfill(now), preserve_index=False), path)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    argv = ["send", "events", str(path), "--base-url", sandbox.base_url, "-q"]
    assert main([*argv, "--id-format", "v1"]) == 0
    expected = ids_of(cc.events_to_wire(str(path), now=now, id_format="v1"))
    assert sandbox.events()["message_id"].tolist() == expected
    assert main(["validate", "events", str(path), "--id-format", "v2", "-q"]) == 0


def test_id_format_on_identities_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("external_user_id\nu1\n")
    assert main(["validate", "identities", str(path), "--id-format", "v1", "-q"]) == 3


def test_an_unknown_id_format_is_refused_before_sending(client: cc.Client) -> None:
    with pytest.raises(cc.ConfigurationError, match="id_format"):
        client.send_events(pd.DataFrame(), id_format="v0")  # type: ignore[arg-type]
