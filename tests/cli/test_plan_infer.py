"""``churn-connector plan infer`` on the sample exports: the draft holds each event type's
properties with their types, enums for text with few values and required for what is always
there; and the same export passes it (no row is invalid by the plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

import churn_connector as cc
from churn_connector import samples
from churn_connector._cli import main

pytestmark = pytest.mark.e2e


def _infer(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["plan", "infer", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_sample_events_pass_the_plan_drafted_from_them(
    suffix: str, now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / f"events{suffix}"
    events = samples.sample_events(now)
    events.to_csv(export, index=False) if suffix == ".csv" else events.to_parquet(export)
    text = _infer([str(export)], capsys)
    assert text.startswith("# A tracking plan drafted by churn-connector plan infer")
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    plan = cc.TrackingPlan.load(path)
    assert sorted(plan.events) == sorted(samples.EVENT_TYPES)
    paid = plan.events["invoice_paid"]
    assert paid["required"] == ["plan", "screen", "session_s"]  # amount_eur: often missing
    assert paid["properties"]["plan"] == {"type": "string", "enum": sorted(samples.PLANS)}
    assert paid["properties"]["session_s"] == {"type": "integer"}
    assert "enum" not in paid["properties"]["screen"]  # 39 screens: more than 20
    amount = "string" if suffix == ".csv" else "number"  # CSV text stays text, as sent
    assert paid["properties"]["amount_eur"] == {"type": amount}
    without = cc.validate_events(export)
    report = cc.validate_events(export, plan=plan)
    assert report.n_invalid == without.n_invalid  # the bad sample rows, and nothing more
    assert not report.failures["check"].astype(str).str.startswith("plan.").any()
    # and a row that breaks the draft is caught by it
    broken = events.copy()
    broken.loc[0, "properties.plan"] = "platinum"
    again = tmp_path / f"broken{suffix}"
    broken.to_csv(again, index=False) if suffix == ".csv" else broken.to_parquet(again)
    assert cc.validate_events(again, plan=plan).n_invalid == without.n_invalid + 1


def test_the_sample_users_pass_the_traits_plan_drafted_from_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "users.parquet"
    samples.sample_users().to_parquet(export)
    found = json.loads(_infer([str(export), "--kind", "identities", "--output", "json"], capsys))
    assert set(found) == {"identities", "unknown_events"}
    plan = cc.TrackingPlan.from_dict(found)
    assert plan.identities is not None and plan.identities["required"] == ["plan", "seats"]
    report = cc.validate_identities(export, plan=plan)
    assert report.n_invalid == cc.validate_identities(export).n_invalid


def test_nested_objects_arrays_and_nulls_are_drafted_so_their_rows_pass(
    now: pd.Timestamp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "events.csv"
    at = (now - pd.Timedelta(hours=1)).isoformat()
    rows = [
        {"cart": {"items": [{"sku": "a", "qty": 1}], "coupon": None}, "total": 3},
        {"cart": {"items": [{"sku": "b", "qty": 2.5}, {"sku": "a"}], "coupon": "X"}, "total": 4.5},
    ]
    pd.DataFrame(
        {
            "external_user_id": ["u0", "u1"],
            "event_type": ["order", "order"],
            "occurred_at": [at, at],
            "properties": [json.dumps(p) for p in rows],  # JSON text: its nulls are values
        }
    ).to_csv(export, index=False)
    found = yaml.safe_load(_infer([str(export)], capsys))
    order = found["events"]["order"]
    assert order["required"] == ["cart", "total"]
    assert order["properties"]["total"] == {"type": "number"}
    cart = order["properties"]["cart"]
    assert cart["required"] == ["items"]  # coupon: null once
    assert cart["properties"]["coupon"] == {"type": ["string", "null"], "enum": ["X", None]}
    item = cart["properties"]["items"]["items"]
    assert item["required"] == ["sku"] and item["properties"]["qty"] == {"type": "number"}
    plan = cc.TrackingPlan.from_dict(found)
    assert cc.validate_events(export, plan=plan).n_invalid == 0
