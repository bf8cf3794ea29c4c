"""``churn-connector track`` never stores an event twice by a command line or a file that
leaves it open: a property given twice is refused by name, and an NDJSON line that a re-run
would send under a new id (no ``occurred_at``, no ``message_id``) is refused with its fix."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pandas as pd
import pytest

import churn_connector as cc

from .test_track_cli import CANARY, run

pytestmark = pytest.mark.e2e


@pytest.fixture
def canary_sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[CANARY]) as sandbox:
        yield sandbox


@pytest.mark.parametrize(
    "options",
    [
        ["--property", "plan=pro", "--properties", '{"plan":"max"}'],
        ["--properties", '{"plan":"max"}', "--property", "plan=pro"],
        ["--property", "plan=pro", "--property", "plan=max"],
        ["--property", "plan=pro", "--property", 'plan:="max"'],
    ],
    ids=["--property then --properties", "--properties then --property", "two --property", "typed"],
)
def test_a_property_given_twice_exits_1_naming_the_key_and_sends_nothing(
    canary_sandbox: cc.Sandbox, options: list[str]
) -> None:
    done = run(["signup", "--user", "u1", *options], canary_sandbox)
    assert done.returncode == 1, done.stderr
    assert "repeated_key: properties: the key 'plan' is given twice" in done.stderr
    assert "Traceback" not in done.stderr
    assert canary_sandbox.requests_log().empty


def test_distinct_properties_from_both_options_are_sent_together(
    canary_sandbox: cc.Sandbox,
) -> None:
    args = ["signup", "--user", "u1", "--message-id", "m1", "--property", "seats:=3"]
    done = run([*args, "--properties", '{"plan":"max"}'], canary_sandbox)
    assert done.returncode == 0, done.stderr
    (event,) = canary_sandbox.events().to_dict("records")
    assert event["properties"] == {"plan": "max", "seats": 3}


def test_an_ndjson_line_without_time_or_id_is_refused_so_a_rerun_stores_nothing_twice(
    canary_sandbox: cc.Sandbox,
) -> None:
    at = (pd.Timestamp.now(tz="UTC") - pd.Timedelta(hours=1)).isoformat()
    lines = [
        {"external_user_id": "u1", "event_type": "signup", "occurred_at": at},
        {"external_user_id": "u2", "event_type": "signup"},
        {"external_user_id": "u3", "event_type": "signup", "message_id": "m3"},
        {"external_user_id": "u4", "event_type": "signup", "occurred_at": None, "message_id": None},
        {"external_user_id": "u5", "event_type": "Bad Type", "occurred_at": at},
    ]
    stdin = "".join(orjson.dumps(line).decode() + "\n" for line in lines)
    for _ in range(2):  # the file exits 1 (a bad line), so its job runs it again
        done = run(["--ndjson", "-"], canary_sandbox, stdin=stdin)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        for number in (2, 4):
            assert (
                f"line {number}: invalid: the line has neither occurred_at nor message_id"
            ) in done.stderr
        assert "give the line an occurred_at (when it happened) or a message_id" in done.stderr
    stored = canary_sandbox.events()
    assert sorted(stored["external_user_id"]) == ["u1", "u3"]
