"""``churn-connector demo``: the whole job offline against a local sandbox.

Writes a realistic sample export (events and users, with a handful of bad rows of different
kinds), validates it, sends it, prints the per-chunk result frame and the failure report,
re-sends it to show that nothing is stored twice, and shows what the sandbox stored.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ._client import Client
from ._events.api import validate_events
from ._identities.api import validate_identities
from ._sandbox import Sandbox
from .samples import sample_events, sample_users


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def run_demo(out: Path) -> int:
    """Run the demo; return 0 when every step behaved as expected."""
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
