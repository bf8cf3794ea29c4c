"""identify over real HTTP against the sandbox: exact bodies, merges, opt-outs, per-user order."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from tests.conftest import MakeEvents

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def users_table(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "email": [f"u{i}@example.com" for i in range(n)],
            "traits.plan": ["pro"] * n,
        }
    )


def stored(sb: cc.Sandbox) -> dict[str, dict[Hashable, Any]]:
    return {r["external_user_id"]: r for r in sb.users().to_dict("records")}


def test_each_valid_row_is_one_identify_with_the_exact_body(
    client: cc.Client, sandbox: cc.Sandbox
) -> None:
    users = users_table(3)
    result = client.identify(users)
    assert result.ok
    assert list(result.chunks["endpoint"]) == ["/v1/identify"] * 3
    bodies = sorted(sandbox.identify_log()["body"], key=lambda b: b["external_user_id"])
    assert bodies == cc.identities_to_wire(users)


def test_convenience_columns_become_channel_items_and_opt_outs_are_recorded(
    client: cc.Client, sandbox: cc.Sandbox
) -> None:
    users = pd.DataFrame(
        {
            "external_user_id": ["a"],
            "email": ["a@example.com"],
            "email_opted_in": [False],
            "phone": ["+14155550100"],
            "pushToken": ["tok-1"],
            "push_verified": [True],
            "preferred_channel": ["sms"],
        }
    )
    assert client.identify(users).ok
    user = stored(sandbox)["a"]
    assert user["preferred_channel"] == "sms"
    assert user["channels"] == [
        {"channel": "email", "address": "a@example.com", "opted_in": False},
        {"channel": "sms", "address": "+14155550100", "opted_in": True},
        {"channel": "push", "address": "tok-1", "opted_in": True, "verified": True},
    ]


def test_traits_merge_across_two_sends(client: cc.Client, sandbox: cc.Sandbox) -> None:
    client.identify(pd.DataFrame({"external_user_id": ["a"], "traits.plan": ["pro"]}))
    client.identify(pd.DataFrame({"external_user_id": ["a"], "traits.seats": [5]}))
    assert stored(sandbox)["a"]["traits"] == {"plan": "pro", "seats": 5}


def test_invalid_rows_are_never_sent(client: cc.Client, sandbox: cc.Sandbox) -> None:
    users = users_table(4)
    users.loc[1, "email"] = "not-an-email"
    result = client.identify(users)
    assert result.counts["invalid"] == 1
    assert result.counts["sent"] == 3
    assert "u1" not in stored(sandbox)
    assert len(sandbox.requests_log()) == 3
    assert result.exit_code == 1


def test_one_users_rows_go_one_at_a_time_in_row_order(make_events: MakeEvents) -> None:
    steps = 4
    rows = [
        {"external_user_id": f"user{u}", "traits.step": s} for s in range(steps) for u in range(10)
    ]
    with cc.Sandbox(latency=0.005) as sb:
        client = cc.Client(sb.base_url, sb.api_key, identify_concurrency=16)
        result = client.identify(pd.DataFrame(rows), duplicates="in_order", slice_rows=7)
        assert result.counts["sent"] == len(rows)
        assert sb.stats()["max_concurrent_identify_same_user"] == 1
        log = sb.identify_log()
        for _, group in log.groupby("external_user_id"):
            assert [b["traits"]["step"] for b in group.sort_values("seq")["body"]] == list(
                range(steps)
            )
        assert {u["traits"]["step"] for u in stored(sb).values()} == {steps - 1}


def test_keep_last_sends_only_the_last_row_of_a_user(
    client: cc.Client, sandbox: cc.Sandbox
) -> None:
    users = pd.DataFrame({"external_user_id": ["a", "b", "a"], "traits.v": [1, 2, 3]})
    result = client.identify(users, duplicates="keep_last")
    assert list(result.rows["status"]) == ["skipped", "sent", "sent"]
    assert stored(sandbox)["a"]["traits"] == {"v": 3}


def test_duplicate_users_are_invalid_by_default(client: cc.Client, sandbox: cc.Sandbox) -> None:
    users = pd.DataFrame({"external_user_id": ["a", "b", "a"], "traits.v": [1, 2, 3]})
    result = client.identify(users)
    assert list(result.rows["status"]) == ["invalid", "sent", "invalid"]
    assert set(stored(sandbox)) == {"b"}


def test_identify_retries_server_errors(client: cc.Client, sandbox: cc.Sandbox) -> None:
    sandbox.script_faults([cc.Fault("5xx"), cc.Fault("drop")])
    result = client.identify(users_table(1))
    assert result.ok
    # the drop ends a kept-alive connection without a byte of an answer: what the stale
    # keep-alive race looks like, so it is sent again at once, not counted as an attempt
    assert result.chunks.iloc[0]["attempts"] == 2
    assert sandbox.stats()["identifies"] == 2  # the dropped one was applied; idempotent


def test_identify_stops_on_a_refused_key(sandbox: cc.Sandbox) -> None:
    client = cc.Client(sandbox.base_url, "sk_test_nope_nope_nope", identify_concurrency=1)
    with pytest.raises(cc.AuthenticationError):
        client.identify(users_table(50))
    assert len(sandbox.requests_log()) == 1


def test_identify_dry_run_sends_nothing(client: cc.Client, sandbox: cc.Sandbox) -> None:
    result = client.identify(users_table(3), dry_run=True)
    assert result.counts["would_send"] == 3
    assert sandbox.requests_log().empty


def test_one_shot_iterables_are_accepted(client: cc.Client, sandbox: cc.Sandbox) -> None:
    users = users_table(4)
    result = client.identify(iter([users.iloc[:2], users.iloc[2:]]))
    assert result.counts["sent"] == 4


def test_cli_sends_identities_from_csv(
    sandbox: cc.Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    path = tmp_path / "users.csv"
    users_table(3).assign(email_opted_in=["true", "false", "true"]).to_csv(path, index=False)
    assert main(["send", "identities", str(path)]) == 0
    assert stored(sandbox)["u1"]["channels"][0]["opted_in"] is False


def test_cli_validates_identities(tmp_path: Path) -> None:
    path = tmp_path / "users.parquet"
    preferred_channel: list[Any] = ["email", "fax", None]  # stubs: no None in assign() lists
    users_table(3).assign(preferred_channel=preferred_channel).to_parquet(path)
    assert main(["validate", "identities", str(path)]) == 1
