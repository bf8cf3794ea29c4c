"""``churn-connector demo``: the whole job offline against a local sandbox.

Writes a realistic sample export (events and users, with a handful of bad rows of different
kinds), validates it, sends it, prints the per-chunk result frame and the failure report,
re-sends it to show that nothing is stored twice, and shows what the sandbox stored.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

EVENT_TYPES = ["login", "page_view", "feature_used", "invoice_paid", "support_ticket", "logout"]
PLANS = ["free", "starter", "pro", "enterprise"]


def sample_events(
    now: pd.Timestamp, n_events: int = 3000, n_users: int = 300, seed: int = 7
) -> pd.DataFrame:
    """A warehouse-like events export with a handful of bad rows (labelled by position)."""
    rng = np.random.default_rng(seed)
    users = rng.integers(1, n_users + 1, n_events)
    ages = pd.to_timedelta(rng.integers(60, 20 * 86_400, n_events), unit="s")
    # exports mix offsets; each value still names its own, so nothing is guessed
    zones = rng.choice([0, 60, -300, 330], n_events)
    occurred = [
        t.tz_convert(dt.timezone(dt.timedelta(minutes=int(z)))).isoformat(timespec="milliseconds")
        for t, z in zip(now - ages, zones, strict=True)
    ]
    props = [
        orjson.dumps({"session_s": int(s), "screen": f"s{int(k)}"}).decode()
        for s, k in zip(rng.integers(1, 3600, n_events), rng.integers(1, 40, n_events), strict=True)
    ]
    df = pd.DataFrame(
        {
            "external_user_id": [f"cust_{u:05d}" for u in users],
            "event_type": rng.choice(EVENT_TYPES, n_events),
            "occurred_at": occurred,
            "properties": props,
            "properties.plan": rng.choice(PLANS, n_events),
            "properties.amount_eur": np.where(
                rng.random(n_events) < 0.2, rng.random(n_events) * 100, np.nan
            ),
        }
    )
    bad = {
        11: ("event_type", "Add To Cart"),
        57: ("event_type", "login\n"),
        123: ("occurred_at", (now - pd.Timedelta(days=2)).tz_localize(None).isoformat()),
        456: ("occurred_at", (now - pd.Timedelta(days=45)).isoformat()),
        789: ("properties", "[1, 2]"),
        1011: ("properties", '{"score": NaN}'),
        1213: ("external_user_id", " "),
    }
    for row, (column, value) in bad.items():
        if row < n_events:
            df.loc[row, column] = value
    # the same event exported twice: sent once, reported as skipped
    return pd.concat([df, df.iloc[[5]]], ignore_index=True)


def sample_users(n_users: int = 300, seed: int = 11) -> pd.DataFrame:
    """A users export (one row per user) with opt-outs, a few preferred channels and bad rows."""
    rng = np.random.default_rng(seed)
    ids = [f"cust_{u:05d}" for u in range(1, n_users + 1)]
    has_phone = rng.random(n_users) < 0.4
    has_push = rng.random(n_users) < 0.3
    df = pd.DataFrame(
        {
            "external_user_id": ids,
            "email": [f"{u}@example.com" for u in ids],
            "email_opted_in": pd.array(rng.random(n_users) > 0.1, dtype="boolean"),
            "email_verified": pd.array(rng.random(n_users) > 0.5, dtype="boolean"),
            "phone": [f"+1415555{i:04d}" if p else None for i, p in enumerate(has_phone)],
            "sms_opted_in": pd.array(
                [
                    bool(x) if p else None
                    for x, p in zip(rng.random(n_users) > 0.3, has_phone, strict=True)
                ],
                dtype="boolean",
            ),
            "push_token": [f"tok_{i:06x}" if p else None for i, p in enumerate(has_push)],
            "preferred_channel": [None] * n_users,
            "traits.plan": rng.choice(PLANS, n_users),
            "traits.seats": pd.array(rng.integers(1, 50, n_users), dtype="Int64"),
        }
    )
    df.loc[[3, 8], "preferred_channel"] = ["email", "sms"]
    df.loc[8, "phone"] = "+14155550199"
    bad = {
        21: ("email", "not-an-email"),
        42: ("phone", "(415) 555-0100"),  # a national number: not E.164 without phone_region
        77: ("preferred_channel", "pigeon"),
    }
    for row, (column, value) in bad.items():
        if row < n_users:
            df.loc[row, column] = value
    return df


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def run_demo(out: Path) -> int:
    """Run the demo; return 0 when every step behaved as expected."""
    from ._client import Client
    from ._events import validate_events
    from ._identities import validate_identities
    from ._sandbox import Sandbox

    pd.set_option("display.width", 160)
    pd.set_option("display.max_columns", 20)
    pd.set_option("display.max_colwidth", 60)
    out.mkdir(parents=True, exist_ok=True)
    now = pd.Timestamp.now(tz="UTC")
    events_path = out / "events.parquet"
    sample_events(now).to_parquet(events_path, index=False)
    print(f"wrote a sample export to {events_path}")

    with Sandbox() as sb:
        print(f"sandbox (a local test double of the API) listening on {sb.base_url}")
        _section("1. validate events")
        report = validate_events(events_path, now=now)
        print(report.summary())
        print(report.failures[["row", "column", "check", "message"]].to_string(index=False))

        _section("2. send events")
        client = Client(sb.base_url, sb.api_key, max_concurrency=4)
        result = client.send_events(events_path, progress=False)
        print(result.summary())
        print(result.chunks.drop(columns=["endpoint", "parent_chunk"]).to_string(index=False))
        print("\nrows not delivered:")
        print(result.failures[["row", "status", "error"]].head(10).to_string(index=False))

        _section("3. send the same export again (idempotent)")
        again = client.send_events(events_path, progress=False)
        print(again.summary())
        stats = sb.stats()
        print(f"sandbox: {stats['stored']} events stored, {stats['duplicates']} duplicates ignored")

        _section("4. what the sandbox stored")
        stored = sb.events()
        print(
            stored[["external_user_id", "event_type", "occurred_at", "properties"]]
            .head(5)
            .to_string(index=False)
        )
        print(f"... {len(stored)} events for {stored['external_user_id'].nunique()} users")

        _section("5. identify users (one request per user)")
        users_path = out / "users.parquet"
        sample_users().to_parquet(users_path, index=False)
        users_report = validate_identities(users_path)
        print(users_report.summary())
        print(users_report.failures[["row", "column", "check", "message"]].to_string(index=False))
        ident = client.identify(users_path, progress=False)
        print(ident.summary())
        print(
            ident.chunks.drop(columns=["endpoint", "parent_chunk"]).head(5).to_string(index=False)
        )
        print(sb.users().head(4).to_string(index=False))

        expected_sent = report.n_valid - report.duplicates
        ok = (
            len(stored) == expected_sent == result.counts["sent"]
            and again.counts["sent"] == expected_sent
            and len(sb.users()) == users_report.n_valid == ident.counts["sent"]
        )
    print("\ndemo finished:", "all rows accounted for" if ok else "MISMATCH")
    return 0 if ok else 2
