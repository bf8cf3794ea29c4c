"""``churn-connector demo``: the whole job offline against a local sandbox.

Writes a realistic sample export (events and users, with a handful of bad rows of different
kinds), validates it, sends it, shows the per-chunk result frame, re-sends it to show that
nothing is stored twice, shows what the sandbox stored, and ends with what to try next.
Each failure is printed once, and every table fits the terminal.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pandas as pd

from .._client import Client
from .._core import text_table
from .._events import validate_events
from .._identities import validate_identities
from .._notebook import plural
from .._results import SendResult
from .._sandbox import Sandbox
from .._validate import ValidationReport
from ..samples import sample_events, sample_users

_CHUNK_COLUMNS = ["chunk", "events", "first_row", "last_row", "status", "http_status", "attempts"]


def _width() -> int:
    return max(60, shutil.get_terminal_size().columns - 1)


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, min(_width(), 78) - len(title) - 5))


def _table(frame: pd.DataFrame, wrap: str | None = None) -> None:
    print(text_table(frame, _width(), wrap=wrap))


def _say(text: str) -> None:
    print(
        "\n".join(
            textwrap.fill(
                line,
                _width(),
                subsequent_indent="    ",
                break_on_hyphens=False,
                break_long_words=False,
            )
            for line in text.splitlines()
        )
    )


def _report(report: ValidationReport) -> None:
    """The counts, then each failure once: row, column, check and message."""
    _say(report.summary().splitlines()[0])
    if not report.failures.empty:
        _table(report.failures[["row", "column", "check", "message"]], wrap="message")


def _undelivered(result: SendResult, report: ValidationReport) -> None:
    """What was not delivered, without repeating the validation failures shown above."""
    counts = result.counts
    invalid, skipped = counts["invalid"], counts["skipped"]
    if invalid:
        print(
            "the invalid row above was not sent"
            if invalid == 1
            else f"the {invalid:,} invalid rows above were not sent"
        )
    if skipped:
        print(f"{plural(skipped, 'exact duplicate row')} skipped: each event is sent once")
    others = result.failures[result.failures["status"] != "invalid"]
    others = others[others["status"] != "skipped"]
    if not others.empty:
        _table(others.reset_index()[["row", "status", "error"]], wrap="error")


def _next_steps(out: Path) -> None:
    events = out / "events.parquet"
    _section("what to try next")
    lines = [
        (
            "the failure report as a file:",
            f"churn-connector validate events {events} --report {out / 'failures.csv'}",
        ),
        (
            "fix 'Add To Cart'-style event types:",
            f"churn-connector validate events {events} --event-type-style snake",
        ),
        (
            "every request built, none sent:",
            f"churn-connector send events {events} --dry-run --rows {out / 'rows.csv'}",
        ),
        ("a local API to send to:", "churn-connector sandbox --port 8080"),
        (
            "step by step in Jupyter:",
            "the notebooks in notebooks/ (quickstart, data_quality, "
            "backfill, identities): jupyter lab notebooks/",
        ),
    ]
    for what, command in lines:
        print(f"  {what}\n      {command}")


def run_demo(out: Path) -> int:
    """Run the demo; return 0 when every step behaved as expected."""
    out.mkdir(parents=True, exist_ok=True)
    now = pd.Timestamp.now(tz="UTC")
    events_path = out / "events.parquet"
    sample_events(now).to_parquet(events_path, index=False)
    _say(f"wrote a sample export to {events_path}")

    with Sandbox() as sb:
        _say(f"sandbox (a local test double of the API) listening on {sb.base_url}")
        _section("1. validate events")
        report = validate_events(events_path, now=now)
        _report(report)

        _section("2. send events")
        client = Client(sb.base_url, sb.api_key, max_concurrency=4)
        result = client.send_events(events_path, progress=False)
        _say(result.summary())
        _table(result.chunks[_CHUNK_COLUMNS])
        _undelivered(result, report)

        _section("3. send the same export again (idempotent)")
        again = client.send_events(events_path, progress=False)
        _say(again.summary())
        stats = sb.stats()
        print(
            f"sandbox: {plural(stats['stored'], 'event')} stored, "
            f"{plural(stats['duplicates'], 'duplicate')} ignored"
        )

        _section("4. what the sandbox stored")
        stored = sb.events()
        _table(stored[["external_user_id", "event_type", "occurred_at", "properties"]].head(5))
        users = stored["external_user_id"].nunique()
        print(f"... {plural(len(stored), 'event')} for {plural(users, 'user')}")

        _section("5. identify users (one request per user)")
        users_path = out / "users.parquet"
        sample_users().to_parquet(users_path, index=False)
        users_report = validate_identities(users_path)
        _report(users_report)
        ident = client.identify(users_path, progress=False)
        _say(ident.summary())
        _undelivered(ident, users_report)
        _table(sb.users().head(4))

        expected_sent = report.n_valid - report.duplicates
        ok = (
            len(stored) == expected_sent == result.counts["sent"]
            and again.counts["sent"] == expected_sent
            and len(sb.users()) == users_report.n_valid == ident.counts["sent"]
        )
    _next_steps(out)
    print("\ndemo finished:", "all rows accounted for" if ok else "MISMATCH")
    return 0 if ok else 2
