"""Progress: periodic log lines when not interactive, never a bar on a non-terminal."""

from __future__ import annotations

import logging

import pytest

from churn_connector._delivery.progress import Progress


def test_non_interactive_progress_logs_how_far_it_got(caplog: pytest.LogCaptureFixture) -> None:
    progress = Progress("events", enabled=False, log_every_s=0.0)
    with caplog.at_level(logging.INFO, logger="churn_connector"):
        progress.update(500)
        progress.update(250)
    assert [r.getMessage() for r in caplog.records] == [
        "events: 500 rows done",
        "events: 750 rows done",
    ]


def test_auto_mode_draws_no_bar_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = Progress("events", enabled=None)
    progress.update(10)
    progress.close()
    assert capsys.readouterr().err == ""
