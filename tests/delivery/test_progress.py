"""Progress: rows (not requests) against a total when the input's length is known; a bar
where someone watches, periodic log lines otherwise; never a warning."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector import samples
from churn_connector._delivery import progress as progress_module
from churn_connector._delivery.progress import Progress, counts_text
from churn_connector._notebook.palette import COLOURS
from churn_connector._read import replayable, row_count
from churn_connector._read.spool import SpooledArrow


def test_non_interactive_progress_logs_how_far_it_got(caplog: pytest.LogCaptureFixture) -> None:
    progress = Progress("events", enabled=False, log_every_s=0.0)
    with caplog.at_level(logging.INFO, logger="churn_connector"):
        progress.update(500)
        progress.update(250)
    assert [r.getMessage() for r in caplog.records] == [
        "events: 500 rows done",
        "events: 750 rows done",
    ]


def test_log_lines_say_how_much_of_a_known_total_is_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    finished = [0]
    progress = Progress(
        "events", 200_000, enabled=False, log_every_s=0.0, refresh_s=0.0, done=lambda: finished[0]
    )
    with caplog.at_level(logging.INFO, logger="churn_connector"):
        finished[0] = 50_000
        progress.update()
    assert caplog.records[-1].getMessage() == "events: 50,000 of 200,000 rows done (25%)"


def test_auto_mode_draws_no_bar_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = Progress("events", enabled=None)
    progress.update(10)
    progress.close()
    assert capsys.readouterr().err == ""


def last_frame(text: str) -> str:
    """The bar as it is left on the screen: its last frame."""
    return [f for f in re.split(r"[\r\n]", text) if f.strip()][-1]


def ansi(colour: str) -> str:
    """tqdm's escape sequence for a bar drawn in ``colour`` (#rrggbb)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"\x1b[38;2;{r};{g};{b}m"


def test_the_bar_counts_every_row_to_the_inputs_length() -> None:
    progress = Progress("events", 1201, enabled=False)
    for _ in range(12):
        progress.update(100)
    progress.update(1)  # invalid and skipped rows count too
    assert progress.done == 1201


def test_a_send_with_invalid_rows_ends_with_failures_filled_to_what_was_delivered(
    sandbox: cc.Sandbox, now: pd.Timestamp, capsys: pytest.CaptureFixture[str]
) -> None:
    export = samples.sample_events(now, n_events=1200, n_users=50)  # invalid rows and a repeat
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    res = client.send_events(export, now=now, progress=True)
    end = last_frame(capsys.readouterr().err)
    delivered = res.counts["sent"] + res.counts["skipped"]
    assert f"{delivered:,} of 1,201 rows delivered" in end and "%" not in end  # finished
    assert "events ✘ with failures" in end  # the invalid rows' mark and word
    assert counts_text(res.counts) in end  # the result's own numbers
    assert f"{res.counts['sent']:,} sent · 1 skipped · 6 invalid" in end
    # the delivered part in the colour of sent, the invalid rows in theirs
    drawn = end.split("|")[1]
    assert drawn.startswith(ansi(COLOURS["sent"]) + "█")
    assert ansi(COLOURS["invalid"]) + "█\x1b[0m" in drawn  # 6 of 1,201: a cell all the same
    assert re.search(r"\[\d\d:\d\d, ", end)  # how long it took


def test_a_clean_send_ends_delivered_at_the_whole_in_the_colour_of_sent(
    sandbox: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame, capsys: pytest.CaptureFixture[str]
) -> None:
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(events, now=now, progress=True)
    end = last_frame(capsys.readouterr().err)
    assert res.ok
    assert "events ✔ delivered" in end and "10 of 10 rows delivered" in end
    assert "10 sent" in end and ansi(COLOURS["sent"]) in end
    assert ansi(COLOURS["invalid"]) not in end


def test_a_stopped_run_says_so_with_what_was_delivered_failed_and_never_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    counts = {"pending": 89_000, "sent": 61_000, "failed": 2, "invalid": 0}
    progress = Progress("events", 200_004, enabled=True, counts=lambda: counts)
    progress.update(61_002)
    progress.close(stopped=True)
    end = last_frame(capsys.readouterr().err)
    assert "events ↻ stopped" in end and ansi(COLOURS["failed"]) in end
    assert "61,000 of 200,004 rows delivered" in end  # not to what was read
    # the numbers the stopped run's exception carries: its pending rows are failed
    assert "61,000 sent · 89,002 failed · 50,002 not read" in end


def test_a_notebook_without_widgets_gets_a_text_bar_on_stdout_and_no_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress_module, "in_jupyter_kernel", lambda: True)
    monkeypatch.setattr(progress_module, "widgets_available", lambda: False)
    progress = Progress("identities", 40, enabled=True)
    progress.update(40)
    progress.close()  # pytest turns any warning into an error
    out, err = capsys.readouterr()
    assert "identities: 100%" in out and "40/40" in out  # while it ran
    assert err == ""


def test_a_running_bar_writes_its_counts_whole_with_thousands_separators(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = Progress("events", 2001, enabled=True)
    progress.update(1994)
    progress._bar.refresh()  # drawn now, not at tqdm's next interval
    frame = last_frame(capsys.readouterr().err)
    assert "1,994/2,001" in frame
    progress.close()


def test_an_empty_send_reads_as_its_result_does(
    sandbox: cc.Sandbox, now: pd.Timestamp, events: pd.DataFrame, capsys: pytest.CaptureFixture[str]
) -> None:
    res = cc.Client(sandbox.base_url, sandbox.api_key).send_events(
        events.iloc[:0], now=now, progress=True
    )
    end = last_frame(capsys.readouterr().err)
    assert res._repr_html_().count("events: no rows") == 1
    assert "events ↷ no rows" in end
    assert "delivered" not in end and "0/0" not in end


def test_a_notebook_widget_ends_as_a_bar_of_the_states_colours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tqdm.notebook import tqdm as widget_bar  # noqa: PLC0415

    monkeypatch.setattr(
        progress_module, "make_bar", lambda desc, total: widget_bar(total=total, desc=desc)
    )
    counts = {"pending": 0, "sent": 1_990, "skipped": 3, "invalid": 7, "rejected": 1}
    progress = Progress("events", 2001, enabled=True, counts=lambda: counts)
    progress.update(2001)
    progress.close()
    text, drawn, said = progress._bar.container.children
    assert "events ⊘ with failures" in text.value.replace("\u2007", " ")
    assert "1,993 of 2,001 rows delivered" in said.value.replace("\u2007", " ")
    assert "1,990 sent · 3 skipped · 7 invalid · 1 rejected" in said.value.replace("\u2007", " ")
    # delivered in the colour of sent (99.6%), then the invalid and the rejected rows
    widths = re.findall(r"width:([\d.]+)%;height:100%;background:(#[0-9a-f]{6})", drawn.value)
    assert [colour for _, colour in widths] == [
        COLOURS["sent"],
        COLOURS["invalid"],
        COLOURS["rejected"],
    ]
    assert float(widths[0][0]) > 99


@pytest.fixture
def parts(tmp_path: Path) -> Path:
    folder = tmp_path / "unload"
    folder.mkdir()
    for k in range(3):
        pq.write_table(pa.table({"x": list(range(10 + k))}), folder / f"part-{k:05d}.parquet")
    (folder / "_SUCCESS").touch()
    return folder


def _gen() -> Iterator[pd.DataFrame]:
    yield pd.DataFrame({"x": [1]})


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: pd.DataFrame({"x": range(7)}), 7),
        (lambda p: pa.table({"x": range(5)}), 5),
        (lambda p: pa.table({"x": range(5)}).to_batches()[0], 5),
        (lambda p: pl.DataFrame({"x": range(4)}), 4),
        (lambda p: p, 33),  # a folder of Parquet parts, from their footers
        (lambda p: p / "part-00001.parquet", 11),
        (lambda p: str(p / "*.parquet"), 33),
        (lambda p: [pd.DataFrame({"x": [1, 2]}), pa.table({"x": [3]})], 3),
    ],
    ids=["pandas", "arrow-table", "record-batch", "polars", "folder", "file", "glob", "list"],
)
def test_the_length_is_known_up_front(parts: Path, make: Any, expected: int) -> None:
    assert row_count(make(parts)) == expected


@pytest.mark.parametrize(
    "make",
    [
        lambda p: _csv(p),
        lambda p: _gen(),
        lambda p: pa.table({"x": [1]}).to_reader(),
        lambda p: pl.LazyFrame({"x": [1]}),
        lambda p: duckdb.sql("SELECT 1 AS x"),
        lambda p: [pd.DataFrame({"x": [1]}), _gen()],
        lambda p: p / "missing.parquet",
        lambda p: 42,
    ],
    ids=["csv", "generator", "reader", "lazy", "duckdb", "list-with-generator", "missing", "int"],
)
def test_the_length_is_unknown_when_only_reading_would_tell(parts: Path, make: Any) -> None:
    assert row_count(make(parts)) is None


def _csv(folder: Path) -> Path:
    path = folder / "export.csv"
    path.write_text("x\n1\n2\n")
    return path


def test_a_spooled_stream_knows_its_length_once_read() -> None:
    spooled = replayable(pa.table({"x": range(9)}).to_reader())
    assert isinstance(spooled, SpooledArrow)
    assert row_count(spooled) is None
    _, batches = spooled.batches(4)
    assert sum(b.num_rows for b in batches) == 9
    assert row_count(spooled) == 9
