"""report.plot() and res.plot(): the obvious chart, drawn with matplotlib, returning the Axes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgba
from matplotlib_inline.backend_inline import _fetch_figure_metadata

import churn_connector as cc
from churn_connector import samples
from churn_connector._notebook.palette import COLOURS, MARKS
from tests.conftest import make_events


@pytest.fixture(autouse=True)
def _agg() -> Iterator[None]:
    matplotlib.use("Agg")  # no display: figures render to memory
    yield
    plt.close("all")


def bar_labels(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def bar_widths(ax: Axes) -> list[float]:
    return [float(p.get_width()) for p in ax.patches]  # type: ignore[attr-defined]


@pytest.fixture
def report(now: pd.Timestamp) -> cc.ValidationReport:
    return cc.validate_events(samples.sample_events(now, n_events=2000, n_users=200), now=now)


def test_report_plot_draws_failures_by_column_and_check(report: cc.ValidationReport) -> None:
    ax = report.plot()
    assert isinstance(ax, Axes)
    labels = bar_labels(ax)
    # a check named for its column does not name the column twice
    assert labels[:2] == ["event_type_pattern", "properties_json"]
    assert "external_user_id_not_blank" in labels
    assert bar_widths(ax) == [2, 2, 1, 1, 1]
    assert ax.get_title(loc="left") == "events: failures by check and column"
    ax.figure.canvas.draw()  # renders without a display


def test_a_check_that_does_not_name_its_column_is_labelled_with_it(
    now: pd.Timestamp, events: pd.DataFrame
) -> None:
    events.loc[2, "external_user_id"] = None
    assert bar_labels(cc.validate_events(events, now=now).plot()) == [
        "external_user_id · not_nullable"
    ]


def test_counts_on_an_axis_have_thousands_separators(report: cc.ValidationReport) -> None:
    ax = report.plot()
    assert ax.xaxis.get_major_formatter()(1_234_567, 0) == "1,234,567"


def test_a_single_bar_is_drawn_as_a_bar_not_a_slab(now: pd.Timestamp, events: pd.DataFrame) -> None:
    ax = cc.validate_events(events.assign(extra=1), now=now).plot()
    ((patch,),) = [ax.patches]
    lo, hi = ax.get_ylim()
    assert patch.get_height() / abs(hi - lo) <= 0.25  # type: ignore[attr-defined]


def test_a_new_figure_lets_the_notebooks_background_show_and_says_what_its_text_needs(
    report: cc.ValidationReport,
) -> None:
    ax = report.plot()
    assert to_rgba(ax.figure.get_facecolor())[3] == 0.0
    assert to_rgba(ax.get_facecolor())[3] == 0.0
    # dark text on a transparent figure: a dark theme puts a light backdrop behind it
    metadata = _fetch_figure_metadata(ax.figure)  # type: ignore[no-untyped-call]
    assert metadata == {"needs_background": "light"}


def test_a_figure_of_the_callers_is_left_as_it_is(report: cc.ValidationReport) -> None:
    fig, mine = plt.subplots()
    report.plot(mine)
    assert to_rgba(fig.get_facecolor())[3] == 1.0


def test_report_plot_keeps_the_largest_and_draws_on_a_given_axes(
    report: cc.ValidationReport,
) -> None:
    _, mine = plt.subplots()
    ax = report.plot(mine, top=2)
    assert ax is mine
    assert len(bar_widths(ax)) == 2


def test_a_table_failure_is_drawn_under_table(now: pd.Timestamp, events: pd.DataFrame) -> None:
    ax = cc.validate_events(events.assign(extra=1), now=now).plot()
    assert bar_labels(ax) == ["extra · column_in_schema"]


def test_a_clean_report_plots_no_failures(now: pd.Timestamp, events: pd.DataFrame) -> None:
    ax = cc.validate_events(events, now=now).plot()
    assert [t.get_text() for t in ax.texts] == ["no failures"]


def test_result_plot_draws_rows_by_state_in_their_colours(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    result = cc.Client(sandbox.base_url, sandbox.api_key).send_events(
        samples.sample_events(now, n_events=2000, n_users=200), now=now
    )
    ax = result.plot()
    assert isinstance(ax, Axes)
    assert bar_labels(ax) == ["✔ sent", "↷ skipped", "✘ invalid"]  # each state's mark
    assert bar_widths(ax) == [1993, 1, 7]
    colours = [to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours == [COLOURS["sent"], COLOURS["skipped"], COLOURS["invalid"]]
    assert [t.get_text() for t in ax.texts] == ["1,993", "1", "7"]


def lines_by_label(ax: Axes) -> dict[str, Any]:
    return {str(line.get_label()): line for line in ax.get_lines()}


def test_result_timeline_climbs_to_the_rows_delivered_and_counts_failed_rows(
    sandbox: cc.Sandbox, now: pd.Timestamp
) -> None:
    events = samples.sample_events(now, n_events=1000, n_users=100)
    sandbox.script_faults([cc.Fault("5xx")] * 8)  # the first request runs out of retries
    result = cc.Client(sandbox.base_url, sandbox.api_key, max_concurrency=1).send_events(
        events, now=now, batch_size=200
    )
    assert result.counts["failed"] == 200
    ax = result.plot("timeline")
    lines = lines_by_label(ax)
    assert list(lines) == [
        "✔ sent",
        f"{MARKS['failed']} failed (send again)",
    ]  # no rejected rows: no line
    for state, line in zip(("sent", "failed"), lines.values(), strict=True):
        assert line.get_ydata()[-1] == result.counts[state]  # rows, as the frame counts
        assert to_hex(line.get_color()) == COLOURS[state]
        assert line.get_marker() == f"${MARKS[state]}$"  # its mark, once, at its end
        assert line.get_markevery() == [len(line.get_ydata()) - 1]
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == list(lines)
    assert ax.yaxis.get_major_formatter()(120_000, 0) == "120,000"
    assert ax.get_xlabel() == "seconds since the send started" and ax.get_ylabel() == "rows"
    assert (result.chunks["finished_s"].diff().dropna() >= 0).all()  # one worker: in order


def test_a_refused_request_split_and_re_sent_adds_rows_to_one_line_not_marks_on_sent(
    now: pd.Timestamp,
) -> None:
    # the API's clock runs 10 days ahead: 8 rows spread over one request are out of its
    # window; the request is split and re-sent until each refused row stands alone
    events = make_events(now - pd.Timedelta(days=10), n=64)
    bad = [3, 11, 19, 27, 35, 43, 51, 59]
    events.loc[bad, "occurred_at"] = now - pd.Timedelta(days=25)
    ahead = (now + pd.Timedelta(days=10)).to_pydatetime()
    with cc.Sandbox(clock=lambda: ahead) as sb:
        result = cc.Client(sb.base_url, sb.api_key, max_concurrency=1).send_events(
            events, now=now, progress=False
        )
    chunks = result.chunks
    assert result.counts["rejected"] == 8 and (chunks["status"] == "rejected").sum() == 8
    assert (chunks["status"] == "split").sum() > 8  # many requests, re-sent in parts
    ax = result.plot("timeline")
    assert not ax.collections  # no mark per request
    lines = lines_by_label(ax)
    assert list(lines) == ["✔ sent", f"{MARKS['rejected']} rejected (fix the data)"]
    sent, rejected = lines.values()
    assert sent.get_ydata()[-1] == result.counts["sent"] == 56
    assert rejected.get_ydata()[-1] == result.counts["rejected"]
    # the rejected line counts rows: it never stands on the sent line once rows were sent
    on_sent = np.asarray(rejected.get_ydata()) == np.asarray(sent.get_ydata())
    assert not on_sent[np.asarray(sent.get_ydata()) > 0].any()


def test_result_plot_refuses_an_unknown_kind(sandbox: cc.Sandbox, events: pd.DataFrame) -> None:
    result = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events)
    with pytest.raises(ValueError, match="'states' or 'timeline'"):
        result.plot("pie")  # type: ignore[arg-type]


def test_without_matplotlib_plot_says_how_to_install_it(
    report: cc.ValidationReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'churn-connector\[notebook\]'"):
        report.plot()
