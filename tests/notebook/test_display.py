"""How reports and results look in a notebook: compact HTML, bounded, never secret, and every
number it prints one that the frames give back."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import churn_connector as cc
from churn_connector import samples
from churn_connector._core.book import RowBook
from churn_connector._core.types import RowState
from churn_connector._notebook.palette import COLOURS, MARKS
from churn_connector._notebook.reasons import MAX_GROUPS, label_text
from churn_connector._results.result import SendResult
from tests.conftest import MakeEvents
from tests.notebook.reading import Page, number, read_page

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


def counts_of(page: Page) -> dict[str, int]:
    """The counts table: state -> rows (its first table)."""
    return {row[0].split(" ", 1)[1]: number(row[1]) for row in page.tables[0]}


def groups_of(page: Page) -> list[tuple[str, str, int, str]]:
    """The failure groups: (reason, column or state, count, example)."""
    for unit in ("failures", "rows"):
        try:
            rows = page.table_with(unit)
        except AssertionError:
            continue
        return [(r[0], r[1].lstrip("○✔↷✘⊘↻◷\ufe0e "), number(r[2]), r[3]) for r in rows]
    return []


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def rows_per_check(rows: pd.DataFrame) -> Counter[str]:
    """Undelivered rows per check named in their error (a row under each of its checks)."""
    found: Counter[str] = Counter()
    for error in rows["error"].dropna():
        found.update(set(re.findall(r"\[([a-z0-9_]+)\]", error)))
    return found


def messy_report(now: pd.Timestamp, n: int = 400) -> pd.DataFrame:
    """Events with more kinds of failure than a repr shows, some rows with two."""
    events = samples.sample_events(now, n_events=n, n_users=50)
    events.loc[20:29, "event_type"] = "Bad Type"
    events.loc[30:33, "external_user_id"] = " "
    events.loc[40:42, "occurred_at"] = "yesterday"
    events.loc[50:51, "occurred_at"] = (now - pd.Timedelta(days=60)).isoformat()
    events.loc[25:26, "occurred_at"] = "not a time"  # and a bad event type: two checks
    events.loc[60, "properties"] = "[1, 2]"
    events.loc[70:72, "external_user_id"] = None
    return events


# -- every number is true -----------------------------------------------------------------
def test_the_quickstart_report_lists_all_its_failures_and_says_no_more(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)
    page = read_page(report._repr_html_())
    assert page.title.endswith("events: 7 of 2,001 rows invalid")
    assert counts_of(page) == {"valid": report.n_valid, "invalid": report.n_invalid}
    by_check = report.failures["check"].value_counts()
    assert {(g[0], g[2]) for g in groups_of(page)} == set(by_check.items())
    assert sum(g[2] for g in groups_of(page)) == len(report.failures) == 7
    assert page.line_with("… and") is None  # every failure is counted above


def test_a_report_with_more_checks_than_shown_counts_the_rest_exactly(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(messy_report(now), now=now)
    page = read_page(report._repr_html_())
    by_check = report.failures["check"].value_counts()
    assert len(by_check) > MAX_GROUPS
    shown = groups_of(page)
    assert [(g[0], g[2]) for g in shown] == list(by_check.head(MAX_GROUPS).items())
    hidden = by_check.iloc[MAX_GROUPS:]
    line = page.line_with("… and")
    n = len(hidden)
    assert line == (
        f"… and {n} more reason{'s' if n > 1 else ''} ({plural(int(hidden.sum()), 'failure')}) "
        "in report.failures"
    )


def test_a_result_counts_rows_per_check_as_the_rows_frame_does(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    events = messy_report(now)
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events, now=now)
    page = read_page(res._repr_html_())
    assert counts_of(page) == {s: n for s, n in res.counts.items() if n}
    per_check = rows_per_check(res.failures)
    ordered = sorted(per_check.items(), key=lambda kv: -kv[1])
    shown = groups_of(page)
    assert {(g[0], g[2]) for g in shown} <= set(per_check.items())
    assert [g[2] for g in shown] == [n for _, n in ordered[:MAX_GROUPS]]
    hidden = {check for check, _ in ordered} - {g[0] for g in shown}
    rows_hidden = res.failures["error"].map(
        lambda e: bool(hidden & set(re.findall(r"\[([a-z0-9_]+)\]", e)))
    )
    line = page.line_with("… and")
    assert line == (
        f"… and {len(hidden)} more reason{'s' if len(hidden) > 1 else ''} "
        f"({plural(int(rows_hidden.sum()), 'row')}) in res.failures"
    )
    several = int(res.failures["error"].str.count(r"\[[a-z0-9_]+\]").gt(1).sum())
    assert several == 2  # rows 25 and 26
    assert page.line_with("a row with several reasons") == (
        f"a row with several reasons is counted under each ({several} rows have more than one)"
    )


def test_the_report_and_the_result_group_the_same_rows_alike(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    events = messy_report(now)
    report = cc.validate_events(events, now=now)
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events, now=now)
    in_report = {g[0]: g[2] for g in groups_of(read_page(report._repr_html_()))}
    in_result = {g[0]: g[2] for g in groups_of(read_page(res._repr_html_()))}
    assert in_report == in_result  # one check, one count: 12 event_type_pattern in both
    assert in_report["event_type_pattern"] == 12  # 10 here, 2 in the sample


def test_a_result_with_fifty_thousand_different_errors_stays_small_and_true() -> None:
    book = RowBook()
    n = 100_000
    book.extend(pd.RangeIndex(n))
    positions = np.arange(n)
    book.set(positions[::2], RowState.SENT, chunk=1)
    for p in positions[1::2].tolist():
        # words, not numbers: numbers are masked, and rows that differ only there group
        word = "".join(chr(ord("a") + int(d)) for d in str(p))
        book.set([p], RowState.FAILED, error=f"connection reset while sending part {word}")
    book.set([1], RowState.INVALID, error="[event_type_pattern] " + "y" * 10_000)
    book.errors[1] = "[event_type_pattern] " + "y" * 10_000
    result = SendResult("events", book, [], 1.0)
    html = result._repr_html_()
    page = read_page(html)
    assert len(html) < SIZE_BOUND
    assert "y" * 200 not in html
    shown = groups_of(page)
    assert [g[2] for g in shown] == [1] * MAX_GROUPS
    undelivered = len(result.failures)
    assert undelivered == 50_000
    hidden = undelivered - MAX_GROUPS  # one row per reason
    assert page.line_with("… and") == (
        f"… and {hidden:,} more reasons ({hidden:,} rows) in res.failures"
    )


# -- what the analyst reads ---------------------------------------------------------------
def test_a_report_shows_counts_failures_by_check_and_what_to_call_next(
    now: pd.Timestamp,
) -> None:
    report = cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)
    html = report._repr_html_()
    self_contained(html)
    assert "1 exact repeat, sent once" in html
    examples = {g[0]: g[3] for g in groups_of(read_page(html))}
    assert examples["event_type_pattern"].startswith("row 11: event_type 'Add To Cart'")
    for hint in ("report.failures", "report.quarantine(", "report.valid", "report.plot()"):
        assert hint in html


def test_a_clean_report_says_so_and_points_to_sending(
    now: pd.Timestamp, events: pd.DataFrame
) -> None:
    page = cc.validate_events(events, now=now)._repr_html_()
    assert "all 10 rows valid" in page
    assert "client.send_events(report.valid)" in page
    assert "Failures by check" not in page


def test_an_empty_input_reads_no_rows(
    sandbox: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame
) -> None:
    report = read_page(cc.validate_events(events.iloc[:0], now=now)._repr_html_())
    assert report.title.endswith("events: no rows")
    assert "valid" not in report.title
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events.iloc[:0], now=now)
    assert read_page(res._repr_html_()).title.endswith("events: no rows")


def test_the_report_stays_small_and_keeps_the_count_of_columns(now: pd.Timestamp) -> None:
    n = 5_000
    frame = pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            # every value different and long: messages quote them
            "event_type": [f"Bad Type {i} " + "x" * 2_000 for i in range(n)],
            "occurred_at": [now - pd.Timedelta(minutes=1)] * n,
            **{f"extra_column_with_a_long_name_{k}": [1] * n for k in range(40)},
        }
    )
    report = cc.validate_events(frame, now=now)
    html = report._repr_html_()
    assert len(html) < SIZE_BOUND
    assert "x" * 200 not in html  # values are trimmed
    columns = {g[0]: g[1] for g in groups_of(read_page(html))}["column_in_schema"]
    assert columns.endswith("+38 more")  # 40 columns: two named, the count whole
    assert '<span style="white-space:nowrap">+38 more</span>' in html


def test_a_part_files_long_label_keeps_its_row_number() -> None:
    name = "part-00000-1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b-c000.snappy.parquet"
    text = label_text(f"{name}:123456")
    assert len(text) <= 40 and text.endswith(".parquet:123456") and "…" in text
    assert text.startswith("part-0")
    assert label_text("short.parquet:7") == "short.parquet:7"


def test_jupyters_row_striping_cannot_highlight_a_row(now: pd.Timestamp) -> None:
    page = read_page(cc.validate_events(messy_report(now), now=now)._repr_html_())
    assert page.row_styles and all("background:transparent" in s for s in page.row_styles)


def test_every_state_wears_its_own_mark_and_colour(
    sandbox: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame
) -> None:
    events = pd.concat([events, events.iloc[[0]]], ignore_index=True)  # a skipped repeat
    events.loc[3, "event_type"] = "Bad"
    sandbox.script_faults([cc.Fault("5xx")] * 8)  # the first request runs out of retries
    res = cc.Client(sandbox.base_url, sandbox.api_key, max_concurrency=1).send_events(
        events, now=now, batch_size=3
    )
    assert all(res.counts[s] for s in ("sent", "invalid", "failed", "skipped"))
    page = read_page(res._repr_html_())
    marked = dict(page.mark_colours[1:])  # the headline's first, then the counts table
    for state in ("sent", "invalid", "failed", "skipped"):
        assert marked[MARKS[state]] == COLOURS[state]
    assert page.mark_colours[0] == (MARKS["failed"], COLOURS["failed"])  # the worst


# -- answers from the API -------------------------------------------------------------------
def test_a_rejected_row_shows_the_apis_reason_for_its_own_event(
    keyed: cc.Sandbox, now: pd.Timestamp, make_events: MakeEvents
) -> None:
    events = make_events(now, n=8)
    later = now + pd.Timedelta(hours=1)
    events.loc[[2, 5], "occurred_at"] = later  # valid by our clock, not by the sandbox's
    res = cc.Client(keyed.base_url, KEY).send_events(events, now=later)
    assert res.counts["rejected"] == 2
    errors = res.rows.loc[[2, 5], "error"].tolist()
    assert errors == ["HTTP 400: occurred_at: more than 5 minutes after server time"] * 2
    ((reason, state, count, example),) = groups_of(read_page(res._repr_html_()))
    assert (reason, state, count) == (
        "HTTP 400: occurred_at: more than 5 minutes after server time",
        "rejected",
        2,
    )
    assert example == "row 2"  # the reason says it all


def test_failed_requests_show_the_apis_message_never_a_key(
    odd_server: Callable[..., str], now: pd.Timestamp, events: pd.DataFrame
) -> None:
    body = f'{{"error": {{"message": "upstream is down", "echo": "Bearer {KEY}"}}}}'
    url = odd_server(503, body.encode())
    retry = cc.RetryPolicy(max_attempts=2, initial_delay=0.01)
    result = cc.Client(url, KEY, retry=retry).send_events(events, now=now, batch_size=5)
    assert result.counts["failed"] == 10
    html = result._repr_html_()
    ((reason, state, count, example),) = groups_of(read_page(html))
    assert (reason, state, count) == ("HTTP 503: upstream is down", "failed", 10)
    assert example == "row 0"
    assert "failed rows are safe to re-send" in html
    assert "(2 retries)" in html  # one retry per request, said in the result
    assert KEY not in html and KEY not in result.rows.to_csv() + result.chunks.to_csv()


def test_a_result_shows_states_requests_and_no_technical_detail(
    keyed: cc.Sandbox, now: pd.Timestamp
) -> None:
    client = cc.Client(keyed.base_url, KEY)
    result = client.send_events(samples.sample_events(now, n_events=1200, n_users=50), now=now)
    html = result._repr_html_()
    self_contained(html)
    page = read_page(html)
    assert page.title.endswith("events: 1,194 of 1,201 rows sent, 1 skipped")
    assert counts_of(page) == {"sent": 1194, "skipped": 1, "invalid": 6}
    assert page.line_with("3 requests") == "3 requests: 3 accepted; " + (
        f"{result.elapsed_s:.2f} s"
    )
    assert ">99.4%<" in html and ">0.1%<" in html  # 1,194 and 1 of 1,201
    for hint in ("res.rows", "res.failures", "res.chunks", "res.plot()"):
        assert hint in html
    # the technical columns stay on the frame
    assert "bytes" not in html and "accepted_count" not in html and "message_id" not in html
    assert KEY not in html


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


# -- every reason is the reason of the rows it counts -----------------------------------------


def groups_against_rows(res: cc.SendResult) -> list[tuple[str, str, int, str]]:
    """The HTML's groups, each checked against the rows' own errors: its count is the
    number of rows whose error is its reason (a reason with masked values: whose error
    matches it)."""
    shown = groups_of(read_page(res._repr_html_()))
    failures = res.failures
    for reason, state, count, example in shown:
        mine = failures[failures["status"] == state]["error"].astype(str)
        pattern = re.escape(reason).replace(re.escape("<n>"), r"\d+")
        assert int(mine.str.fullmatch(pattern).sum()) == count, (reason, count)
        row = example.removeprefix("row ").split(":", 1)[0]
        assert re.fullmatch(pattern, str(failures.loc[int(row), "error"])), example
    assert sum(g[2] for g in shown) == len(failures)  # every undelivered row, once
    return shown


def test_rows_refused_for_different_reasons_in_one_request_are_grouped_by_their_own(
    now: pd.Timestamp, make_events: MakeEvents
) -> None:
    # the API's clock runs 10 days ahead: three rows 25 days old are out of its window, and
    # the answer names them; the request's other nine rows are refused with it, unnamed
    events = make_events(now - pd.Timedelta(days=10), n=12)
    events.loc[[1, 6, 7], "occurred_at"] = now - pd.Timedelta(days=25)
    ahead = (now + pd.Timedelta(days=10)).to_pydatetime()
    with cc.Sandbox(clock=lambda: ahead) as sb:
        client = cc.Client(sb.base_url, sb.api_key, bisect_rejected=False)
        res = client.send_events(events, now=now, progress=False)
    assert len(res.chunks) == 1 and res.counts["rejected"] == 12  # one request, refused
    others = (
        "HTTP 400: 3 validation problem(s); nothing was stored "
        "(the answer named other events of the request, not this one)"
    )
    window = "HTTP 400: occurred_at: more than 30 days before server time"
    assert groups_against_rows(res) == [
        (others, "rejected", 9, "row 0"),
        (window, "rejected", 3, "row 1"),
    ]
    # the summary (the command line's, the exception's) says the same, in the same order
    assert res.summary().splitlines()[1:] == [
        f"rejected 9: {others} (e.g. row 0)",
        f"rejected 3: {window} (e.g. row 1)",
    ]
    assert repr(res).splitlines()[1] == f"  rejected 9: {others} (e.g. row 0)"


def test_rows_whose_messages_differ_in_numbers_only_share_a_reason_and_each_keeps_its_own(
    now: pd.Timestamp, make_events: MakeEvents
) -> None:
    # the first request meets a clock 10 days ahead, the second one an hour behind: rows
    # too old for the one, rows too new for the other, and the rest of each request
    events = make_events(now - pd.Timedelta(days=10), n=20)
    events.loc[[1, 6, 7], "occurred_at"] = now - pd.Timedelta(days=25)
    events.loc[[12, 13, 14, 19], "occurred_at"] = now + pd.Timedelta(minutes=4)
    clocks = iter([now + pd.Timedelta(days=10), now - pd.Timedelta(hours=1)])
    with cc.Sandbox(clock=lambda: next(clocks).to_pydatetime()) as sb:
        client = cc.Client(sb.base_url, sb.api_key, bisect_rejected=False, max_concurrency=1)
        res = client.send_events(events, now=now, batch_size=10, progress=False)
    assert len(res.chunks) == 2 and res.counts["rejected"] == 20
    masked = (
        "HTTP 400: <n> validation problem(s); nothing was stored "
        "(the answer named other events of the request, not this one)"
    )
    assert groups_against_rows(res) == [
        (
            masked,
            "rejected",
            13,
            "row 0: 3 validation problem(s); nothing was stored "
            "(the answer named other events of the request, not this one)",
        ),
        ("HTTP 400: occurred_at: more than 5 minutes after server time", "rejected", 4, "row 12"),
        ("HTTP 400: occurred_at: more than 30 days before server time", "rejected", 3, "row 1"),
    ]


# -- every state shown is a documented one ----------------------------------------------------


def documented_states() -> list[str]:
    """The states the row-states page's first table lists."""
    page = (Path(__file__).parents[2] / "docs" / "concepts" / "row-states.md").read_text()
    table = page.split("| state |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)


def test_a_dry_runs_rows_have_one_documented_state_in_the_frame_the_counts_and_the_words(
    now: pd.Timestamp, make_events: MakeEvents, tmp_path: Path
) -> None:
    events = make_events(now, n=12)
    events.loc[3, "event_type"] = "Bad Type"
    res = cc.send_events(events, now=now, dry_run=True, progress=False)
    documented = documented_states()
    assert "would_send" in documented
    statuses = res.rows["status"].astype(str).value_counts().to_dict()
    assert statuses == {"would_send": 11, "invalid": 1}
    assert {s for s, n in res.counts.items() if n} == set(statuses)
    assert set(res.counts) <= set(documented)
    assert set(res.rows["status"].cat.categories) <= set(documented)  # no "pending"
    assert "would_send 11," in res.summary()
    page = read_page(res._repr_html_())
    assert counts_of(page) == statuses
    res.rows.to_csv(tmp_path / "rows.csv")
    assert set(pd.read_csv(tmp_path / "rows.csv")["status"]) == {"would_send", "invalid"}


def test_every_state_a_send_shows_is_documented(sandbox: cc.Sandbox, now: pd.Timestamp) -> None:
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(messy_report(now), now=now)
    documented = set(documented_states())
    assert set(res.counts) <= documented
    assert set(counts_of(read_page(res._repr_html_()))) <= documented
    assert set(res.rows["status"].astype(str)) <= documented
