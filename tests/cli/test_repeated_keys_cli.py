"""The command line refuses JSON text that names a key twice, by the check ``repeated_key``:
in a file's rows (``send``), in ``track``'s ``--properties``/``--property KEY:=JSON``
options and in its ``--ndjson`` lines; nothing of such an event is sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main

from .test_track_cli import CANARY, run

pytestmark = pytest.mark.e2e


@pytest.fixture
def canary_sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[CANARY]) as sandbox:
        yield sandbox


def test_send_exits_1_and_sends_every_row_but_the_one_repeating_a_key(
    sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = tmp_path / "events.csv"
    at = (now - pd.Timedelta(hours=1)).isoformat()
    pd.DataFrame(
        {
            "external_user_id": ["u1", "u2"],
            "event_type": ["login", "login"],
            "occurred_at": [at, at],
            "properties": ['{"plan":"a","plan":"b"}', '{"plan":"a"}'],
        }
    ).to_csv(path, index=False)
    rows = tmp_path / "rows.csv"
    assert main(["send", "events", str(path), "--rows", str(rows)]) == 1
    assert list(pd.read_csv(rows)["status"]) == ["invalid", "sent"]
    assert list(sandbox.events()["external_user_id"]) == ["u2"]


@pytest.mark.parametrize(
    "options",
    [
        ["--properties", '{"plan":"a","plan":"b"}'],
        ["--property", 'cart:={"sku":1,"sku":2}'],
        ["--context", '{"ip":"a","ip":"a"}'],
    ],
    ids=["--properties", "--property KEY:=JSON", "--context"],
)
def test_a_track_option_repeating_a_key_exits_1_and_sends_nothing(
    canary_sandbox: cc.Sandbox, options: list[str]
) -> None:
    done = run(["signup", "--user", "u1", *options], canary_sandbox)
    assert done.returncode == 1, done.stderr
    assert "invalid: the event is invalid and was not sent: repeated_key: --" in done.stderr
    assert "twice" in done.stderr
    assert canary_sandbox.requests_log().empty


def test_a_track_ndjson_line_repeating_a_key_is_invalid_and_the_others_go(
    canary_sandbox: cc.Sandbox,
) -> None:
    stdin = (
        '{"external_user_id":"u1","event_type":"signup","message_id":"m1"}\n'
        '{"external_user_id":"u2","event_type":"signup","event_type":"login"}\n'
        '{"external_user_id":"u3","event_type":"login","properties":{"a":1,"a":1}}\n'
    )
    done = run(["--ndjson", "-"], canary_sandbox, stdin=stdin)
    assert done.returncode == 1, done.stderr
    assert done.stdout.split() == ["m1"]
    assert "line 2: invalid: repeated_key: the line names the key 'event_type' twice" in done.stderr
    assert (
        "line 3: invalid: repeated_key: properties: the JSON text names the key 'a'" in done.stderr
    )
    assert list(canary_sandbox.events()["message_id"]) == ["m1"]
