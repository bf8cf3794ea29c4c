"""How reports and results look in a notebook: compact HTML, bounded, never technical or secret."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector import samples
from churn_connector._core.book import RowBook
from churn_connector._core.types import RowState
from churn_connector._results.result import SendResult
from tests.conftest import MakeEvents

KEY = "sk_test_CANARY_never_in_a_repr_0451"
SIZE_BOUND = 8_000  # characters: "a few KB", whatever the input


@pytest.fixture
def keyed() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[KEY]) as sb:
        yield sb


def self_contained(page: str) -> None:
    """Inline CSS only: no scripts, no stylesheets or classes, nothing fetched."""
    lowered = page.lower()
    for banned in ("<script", "<style", "class=", "<link", "url(", "http://", "https://", "src="):
        assert banned not in lowered, banned


def test_a_report_shows_counts_failures_by_check_and_what_to_call_next(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)
    page = report._repr_html_()
    self_contained(page)
    assert "7 of 2,001 rows invalid" in page
    assert "1,994" in page and "1 exact repeat, sent once" in page
    for check in (
        "event_type_pattern",
        "occurred_at_naive",
        "occurred_at_window",
        "properties_json",
        "external_user_id_not_blank",
    ):
        assert check in page
    assert "row 11:" in page and "Add To Cart" in page  # an example of each check
    for hint in ("report.failures", "report.quarantine(", "report.valid", "report.plot()"):
        assert hint in page


def test_a_clean_report_says_so_and_points_to_sending(
    now: pd.Timestamp, events: pd.DataFrame
) -> None:
    page = cc.validate_events(events, now=now)._repr_html_()
    assert "all 10 rows valid" in page
    assert "client.send_events(report.valid)" in page
    assert "Failures by check" not in page


def test_the_report_stays_small_whatever_the_failures(now: pd.Timestamp) -> None:
    n = 5_000
    frame = pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            # every value different and long: messages quote them
            "event_type": [f"Bad Type {i} " + "x" * 2_000 for i in range(n)],
            "occurred_at": [now - pd.Timedelta(minutes=1)] * n,
            **{f"extra_{k}": [1] * n for k in range(40)},  # 40 unknown columns
        }
    )
    report = cc.validate_events(frame, now=now)
    page = report._repr_html_()
    assert len(report.failures) > n
    assert len(page) < SIZE_BOUND
    assert f"… and {len(report.failures) - 2:,} more failures" in page
    assert "x" * 200 not in page  # values are trimmed


def test_a_result_shows_states_requests_and_no_technical_detail(
    keyed: cc.Sandbox, now: pd.Timestamp
) -> None:
    client = cc.Client(keyed.base_url, KEY)
    result = client.send_events(samples.sample_events(now, n_events=1200, n_users=50), now=now)
    page = result._repr_html_()
    self_contained(page)
    assert "1,194 of 1,201 rows sent" in page
    assert "3 requests: 3 accepted" in page
    for state in ("sent", "skipped", "invalid"):
        assert f"{state}</td>" in page
    assert "rejected</td>" not in page  # only states that happened
    assert ">99.4%<" in page and ">0.1%<" in page  # 1,194 and 1 of 1,201
    for hint in ("res.rows", "res.failures", "res.chunks", "res.plot()"):
        assert hint in page
    # the technical columns stay on the frame
    assert "bytes" not in page and "accepted_count" not in page and "message_id" not in page
    assert KEY not in page


def test_failed_requests_are_grouped_without_their_response_bodies(
    keyed: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame
) -> None:
    keyed.set_faults(error_rate=1.0)  # every answer a 5xx: retries run out
    result = cc.Client(keyed.base_url, KEY).send_events(events, now=now, batch_size=2)
    assert result.counts["failed"] == 10
    page = result._repr_html_()
    assert "0 of 10 rows sent" in page and "✘" in page
    assert "failed rows are safe to re-send" in page
    assert "<code>HTTP 50" in page
    assert result.chunks["response"].notna().any()
    for body in result.chunks["response"].dropna():
        assert body[:40] not in page
    assert KEY not in page


def test_a_rejected_batch_shows_its_status_not_its_body(
    odd_server: Callable[..., str], now: pd.Timestamp, events: pd.DataFrame
) -> None:
    url = odd_server(400, b'{"error": {"message": "BODY-TEXT-ONLY-IN-CHUNKS"}}')
    result = cc.Client(url, KEY, bisect_rejected=False).send_events(events, now=now)
    page = result._repr_html_()
    assert result.counts["rejected"] == 10
    assert "<code>HTTP 400</code>" in page and "rejected" in page
    assert "BODY-TEXT-ONLY-IN-CHUNKS" not in page
    assert "BODY-TEXT-ONLY-IN-CHUNKS" in result.chunks["response"].iloc[0]


def test_shares_that_are_not_all_or_nothing_never_round_to_it(
    now: pd.Timestamp, make_events: MakeEvents
) -> None:
    events = make_events(now, n=2001)
    events.loc[0, "event_type"] = "Bad"
    page = cc.validate_events(events, now=now)._repr_html_()
    assert ">&gt;99.9%<" in page and ">&lt;0.1%<" in page  # 2,000 and 1 of 2,001


def test_a_dry_run_says_what_would_be_sent(
    sandbox: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame
) -> None:
    result = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events, now=now, dry_run=True)
    page = result._repr_html_()
    assert "dry run of events: 10 of 10 rows would be sent" in page
    assert "built, not sent" in page


def test_a_result_with_a_fifty_thousand_different_errors_stays_small() -> None:
    book = RowBook()
    n = 100_000
    book.extend(pd.RangeIndex(n))
    positions = np.arange(n)
    book.set(positions[::2], RowState.SENT, chunk=1)
    for p in positions[1::2].tolist():
        book.set([p], RowState.FAILED, error=f"connection reset while sending part {p}")
    book.set([1], RowState.INVALID, error="[event_type_pattern] " + "y" * 10_000)
    page = SendResult("events", book, [], 1.0)._repr_html_()
    assert len(page) < SIZE_BOUND
    assert "… and 49,994 more rows (of 49,994 more reasons)" in page
    assert "y" * 200 not in page
