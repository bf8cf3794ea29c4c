"""A tracking plan on one-off events: ``track()``, the thread and async trackers and the
``track`` command check an event that meets the contract against the plan, by the batch
path's own check (the same verdict, check names and messages as a one-row table), and send
nothing of an event that breaks it; over real HTTP to the sandbox."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._track import event_of

pytestmark = pytest.mark.e2e

PLAN: dict[str, Any] = {
    "events": {
        "invoice_paid": {
            "type": "object",
            "required": ["plan"],
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "plan": {"type": "string"},
            },
        }
    },
    "unknown_events": "refuse",
}
BROKEN = {"amount": -40, "currency": "usd "}
GOOD = {"amount": 40, "currency": "USD", "plan": "pro"}
BROKEN_CHECKS = (
    "plan.invoice_paid.plan.required",
    "plan.invoice_paid.amount.minimum",
    "plan.invoice_paid.currency.pattern",
)


@pytest.fixture
def plan() -> cc.TrackingPlan:
    return cc.TrackingPlan.from_dict(PLAN)


def test_track_refuses_an_event_that_breaks_the_plan_and_sends_nothing(
    client: cc.Client, sandbox: cc.Sandbox, plan: cc.TrackingPlan
) -> None:
    with pytest.raises(cc.DataValidationError) as caught:
        client.track("u1", "invoice_paid", properties=BROKEN, plan=plan)
    assert caught.value.checks == BROKEN_CHECKS
    assert "properties.amount -40 is below the minimum 0" in str(caught.value)
    assert sandbox.requests_log().empty


def test_track_sends_an_event_that_keeps_the_plan(
    client: cc.Client, sandbox: cc.Sandbox, plan: cc.TrackingPlan
) -> None:
    result = client.track("u1", "invoice_paid", properties=GOOD, plan=plan)
    assert result.status == 200
    assert len(sandbox.requests_log()) == 1


def test_track_reads_a_plan_file(client: cc.Client, sandbox: cc.Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    with pytest.raises(cc.DataValidationError) as caught:
        client.track("u1", "signup", plan=path)
    assert caught.value.checks == ("plan.unknown_event",)
    assert sandbox.requests_log().empty


def test_an_unknown_event_type_under_warn_is_sent_and_said(
    client: cc.Client, sandbox: cc.Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    warn = cc.TrackingPlan.from_dict({**PLAN, "unknown_events": "warn"})
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        client.track("u1", "signup", plan=warn)
    assert len(sandbox.requests_log()) == 1
    assert "'signup' is not in the tracking plan" in caplog.text


def test_a_trackers_plan_applies_to_each_event_and_a_calls_plan_overrides_it(
    client: cc.Client, sandbox: cc.Sandbox, plan: cc.TrackingPlan
) -> None:
    anything = cc.TrackingPlan.from_dict({"events": {}})
    with client.tracker(plan=plan) as tracker:
        with pytest.raises(cc.DataValidationError) as caught:
            tracker.track("u1", "invoice_paid", properties=BROKEN)
        assert caught.value.checks == BROKEN_CHECKS
        kept = tracker.track("u2", "invoice_paid", properties=BROKEN, plan=anything)
    assert kept.result(timeout=10).status == 200
    sent = sandbox.events()
    assert list(sent["external_user_id"]) == ["u2"]


def test_the_async_client_and_tracker_check_the_plan(
    sandbox: cc.Sandbox, plan: cc.TrackingPlan
) -> None:
    async def run() -> tuple[tuple[str, ...], tuple[str, ...]]:
        async with cc.AsyncClient(sandbox.base_url, sandbox.api_key) as client:
            with pytest.raises(cc.DataValidationError) as one:
                await client.track("u1", "invoice_paid", properties=BROKEN, plan=plan)
            async with client.tracker(plan=plan) as tracker:
                with pytest.raises(cc.DataValidationError) as queued:
                    await tracker.track("u1", "signup")
                handle = await tracker.track("u2", "invoice_paid", properties=GOOD)
            assert (await handle.result()).status == 200
        return one.value.checks, queued.value.checks

    checks = asyncio.run(run())
    assert checks == (BROKEN_CHECKS, ("plan.unknown_event",))
    assert list(sandbox.events()["external_user_id"]) == ["u2"]


def test_the_track_command_takes_plan_for_one_event_and_for_ndjson(
    sandbox: cc.Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    one = ["track", "invoice_paid", "--user", "u1", "--property", "amount:=-40"]
    assert main([*one, "--plan", str(plan)]) == 1
    assert "plan.invoice_paid.amount.minimum" in capsys.readouterr().err
    lines = tmp_path / "events.ndjson"
    lines.write_text(
        '{"external_user_id": "u1", "event_type": "signup", "message_id": "m-1"}\n'
        '{"external_user_id": "u2", "event_type": "invoice_paid", "message_id": "m-2", '
        '"properties": {"plan": "pro"}}\n'
    )
    assert main(["track", "--ndjson", str(lines), "--plan", str(plan)]) == 1
    assert "line 1: invalid:" in capsys.readouterr().err
    assert list(sandbox.events()["external_user_id"]) == ["u2"]


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from(["USD", "usd", "pro", ""]),
)


@settings(max_examples=60, deadline=None)
@given(
    event_type=st.sampled_from(["invoice_paid", "signup"]),
    properties=st.dictionaries(st.sampled_from(["amount", "currency", "plan"]), _VALUES),
)
def test_one_events_plan_verdict_is_a_one_row_tables(
    event_type: str, properties: dict[str, Any]
) -> None:
    plan = cc.TrackingPlan.from_dict(PLAN)
    now = pd.Timestamp("2026-11-20T12:00:00Z")
    at = now - pd.Timedelta(hours=1)
    table = pd.DataFrame(
        {
            "external_user_id": ["u1"],
            "event_type": [event_type],
            "occurred_at": [at],
            "properties": [properties],
        }
    )
    report = cc.validate_events(table, now=now, plan=plan)
    batch = set(report.failures["check"]) if report.n_invalid else set()
    try:
        event_of("u1", event_type, occurred_at=at, properties=properties, now=now, plan=plan)
        one: set[str] = set()
    except cc.DataValidationError as exc:
        one = set(exc.checks)
    assert one == batch
