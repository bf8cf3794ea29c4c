"""Progress: rows (not requests) against a total when the input's length is known; a bar
where someone watches, periodic log lines otherwise; never a warning."""

from __future__ import annotations

import logging
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
from churn_connector._delivery.progress import Progress
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


def test_the_bar_counts_every_row_to_the_inputs_length(
    sandbox: cc.Sandbox, now: pd.Timestamp, capsys: pytest.CaptureFixture[str]
) -> None:
    export = samples.sample_events(now, n_events=1200, n_users=50)  # invalid rows and a repeat
    client = cc.Client(sandbox.base_url, sandbox.api_key)
    client.send_events(export, now=now, progress=True)
    bar = capsys.readouterr().err
    assert "1201/1201" in bar and "100%" in bar  # invalid and skipped rows count too
    assert " rows/s]" in bar and "<00:00" in bar  # a rate and an ETA


def test_a_notebook_without_widgets_gets_a_text_bar_on_stdout_and_no_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress_module, "in_jupyter_kernel", lambda: True)
    monkeypatch.setattr(progress_module, "widgets_available", lambda: False)
    progress = Progress("identities", 40, enabled=True)
    progress.update(40)
    progress.close()  # pytest turns any warning into an error
    out, err = capsys.readouterr()
    assert "identities: 100%" in out and "40/40" in out
    assert err == ""


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
