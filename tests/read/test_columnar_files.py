"""The columnar files pyarrow reads beside Parquet: ORC, Arrow IPC (Feather) in its file and
stream layouts; and a compressed Parquet named for what it is."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._read import row_count, unread_labels

from .tables import events, expected, stored


def write_stream(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=7)


WRITERS: dict[str, Callable[[pa.Table, Path], None]] = {
    "e.orc": lambda t, p: orc.write_table(t, str(p), stripe_size=1024),
    "e.feather": lambda t, p: feather.write_feather(t, str(p), chunksize=7),
    "e.arrow": lambda t, p: feather.write_feather(t, str(p), compression="uncompressed"),
    "stream.arrow": write_stream,  # the stream layout under the file layout's name
    "e.arrows": write_stream,
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_orc_and_arrow_files_give_the_parquet_files_events(
    now: pd.Timestamp, tmp_path: Path, name: str
) -> None:
    table = events(now, 0, 30)
    WRITERS[name](table, tmp_path / name)
    assert cc.events_to_wire(tmp_path / name, now=now, slice_rows=8) == cc.events_to_wire(
        table, now=now
    )


@pytest.mark.e2e
def test_a_folder_of_orc_parts_is_sent(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    orc.write_table(events(now, 0, 10), str(tmp_path / "part-0.orc"))
    orc.write_table(events(now, 10, 25), str(tmp_path / "part-1.orc"))
    result = client.send_events(tmp_path, now=now)
    assert list(result.rows.index[:2]) == ["part-0.orc:0", "part-0.orc:1"]
    assert stored(sandbox) == expected(events(now, 0, 25), now)


@pytest.mark.parametrize(("name", "rows"), [("e.orc", 30), ("e.feather", 30), ("e.arrows", None)])
def test_orc_and_arrow_files_say_their_row_count_without_being_read(
    now: pd.Timestamp, tmp_path: Path, name: str, rows: int | None
) -> None:
    WRITERS[name](events(now, 0, 30), tmp_path / name)
    assert row_count(tmp_path / name) == rows  # a stream's rows: only reading tells
    labels = unread_labels(tmp_path / name, 28)
    assert (None if labels is None else list(labels)) == (None if rows is None else [28, 29])


def test_a_compressed_parquet_file_is_named_for_what_it_is(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    plain = tmp_path / "e.parquet"
    pq.write_table(events(now, 0, 3), plain)
    (tmp_path / "e.parquet.gz").write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(cc.InputError) as info:
        cc.validate_events(tmp_path / "e.parquet.gz", now=now)
    assert str(info.value) == (
        "e.parquet.gz is a gzip-compressed Parquet file, which Parquet readers cannot open "
        "(Parquet compresses inside): decompress it and pass e.parquet"
    )


def test_a_broken_orc_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "e.orc").write_bytes(b"ORC but not really")
    with pytest.raises(cc.InputError, match=r"e\.orc is not a readable ORC file"):
        cc.validate_events(tmp_path / "e.orc")
