"""``churn-connector track`` in a subprocess against the sandbox: one event, NDJSON through a
tracker, the exit codes of ``send``, and the key in no output."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e

CANARY = "canary-key-7e41"


def run(args: list[str], sandbox: cc.Sandbox | None, key: str = CANARY, stdin: str = "") -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHURN_")}
    if sandbox is not None:
        env["CHURN_BASE_URL"] = sandbox.base_url
    if key:
        env["CHURN_API_KEY"] = key
    done = subprocess.run(
        [sys.executable, "-m", "churn_connector._cli", "track", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert CANARY not in done.stdout + done.stderr
    return done


@pytest.fixture
def canary_sandbox() -> Any:
    with cc.Sandbox(api_keys=[CANARY]) as sandbox:
        yield sandbox


def test_one_event_is_sent_and_its_id_printed(canary_sandbox: cc.Sandbox) -> None:
    args = ["invoice_paid", "--user", "cus_1", "--property", "plan=pro"]
    args += ["--property", "amount:=19.9", "--message-id", "evt_1"]
    done = run(args, canary_sandbox)
    assert (done.returncode, done.stdout) == (0, "evt_1\n"), done.stderr
    (event,) = canary_sandbox.events().to_dict("records")
    assert event["properties"] == {"plan": "pro", "amount": 19.9}


def test_an_invalid_event_exits_1_with_the_reason_and_sends_nothing(
    canary_sandbox: cc.Sandbox,
) -> None:
    done = run(["Invoice Paid", "--user", "cus_1"], canary_sandbox)
    assert done.returncode == 1
    assert "event_type_pattern" in done.stderr
    assert canary_sandbox.requests_log().empty


@pytest.mark.parametrize("key", ["", "not-the-key"])
def test_no_key_or_a_refused_key_exits_3(canary_sandbox: cc.Sandbox, key: str) -> None:
    done = run(["signup", "--user", "u1"], canary_sandbox, key=key)
    assert done.returncode == 3
    assert "CHURN_API_KEY" in done.stderr


def test_ndjson_goes_through_a_tracker_and_reports_each_line(canary_sandbox: cc.Sandbox) -> None:
    lines = [
        {"external_user_id": "u1", "event_type": "signup", "message_id": "m1"},
        {
            "external_user_id": "u2",
            "event_type": "login",
            "properties": {"n": 1},
            "message_id": "m2",
        },
        {"external_user_id": "u3", "event_type": "Bad Type"},
        {"external_user_id": "u4", "event_type": "login", "colour": "red"},
    ]
    stdin = "\n".join(orjson.dumps(line).decode() for line in lines) + "\n"
    done = run(["--ndjson", "-"], canary_sandbox, stdin=stdin)
    assert done.returncode == 1, done.stderr
    assert done.stdout.split() == ["m1", "m2"]
    assert (
        "line 3: invalid" in done.stderr
        and "line 4: invalid: unknown key(s) ['colour']" in done.stderr
    )
    assert sorted(canary_sandbox.events()["message_id"]) == ["m1", "m2"]


def test_an_event_the_api_rejects_exits_2() -> None:
    def later() -> dt.datetime:  # a server whose clock is 40 days ahead: out of its window
        return dt.datetime.now(dt.UTC) + dt.timedelta(days=40)

    with cc.Sandbox(api_keys=[CANARY], clock=later) as ahead:
        done = run(["signup", "--user", "u1", "--message-id", "m1"], ahead)
    assert done.returncode == 2
    assert "not delivered: the API refused event m1: HTTP 400" in done.stderr


def test_a_missing_ndjson_file_exits_3_with_one_line(
    canary_sandbox: cc.Sandbox, tmp_path: Any
) -> None:
    missing = tmp_path / "nowhere.ndjson"
    done = run(["--ndjson", str(missing)], canary_sandbox)
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        f"error: cannot read --ndjson {missing}: No such file or directory"
    ]
    assert len(canary_sandbox.events()) == 0
