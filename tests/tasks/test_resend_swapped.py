"""``cc.resend(data, rows)``, the arguments swapped, raises a ConfigurationError that gives the
call in the right order, before the input is read as a rows file; nothing is sent."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._results.result import write_frame


def test_swapped_arguments_are_named_with_the_call_in_order(
    client: cc.Client, sandbox: cc.Sandbox, events: pd.DataFrame, tmp_path: Path
) -> None:
    data, rows = tmp_path / "events.parquet", tmp_path / "rows.parquet"
    events.to_parquet(data)
    write_frame(client.send_events(data).rows, rows)
    before = len(sandbox.requests_log())
    with pytest.raises(cc.ConfigurationError) as caught:
        cc.resend(data, rows, sandbox.base_url, sandbox.api_key)
    assert str(caught.value) == (
        f"the rows file and the input are swapped: {rows} is the rows file a send wrote "
        f"(--rows) and {data} is not; the rows file comes first: resend({str(rows)!r}, "
        f"{str(data)!r})"
    )
    assert len(sandbox.requests_log()) == before


def test_two_rows_files_are_left_to_the_fingerprint_check(
    client: cc.Client, events: pd.DataFrame, tmp_path: Path
) -> None:
    data, rows = tmp_path / "events.parquet", tmp_path / "rows.parquet"
    events.to_parquet(data)
    write_frame(client.send_events(data).rows, rows)
    with pytest.raises(cc.InputError, match="the input no longer matches"):
        cc.resend(rows, rows)
