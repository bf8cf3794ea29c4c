"""Files as warehouses write them: formats, compression, part folders, and every way a file
can be broken, each an InputError naming the file (and line) instead of a traceback."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import churn_connector as cc
from churn_connector._json.values import BadCell
from churn_connector._read import ReadSpec, iter_frames
from churn_connector._read.text import convert
from churn_connector._wire import column_wise as columnar


@pytest.fixture
def table(now: pd.Timestamp) -> pa.Table:
    n = 30
    return pa.table(
        {
            "external_user_id": [f"00{i % 4}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": pa.array(
                [now - pd.Timedelta(minutes=i + 1) for i in range(n)], pa.timestamp("us", "UTC")
            ),
            "properties.plan": ["pro" if i % 2 else "free" for i in range(n)],
        }
    )


def copy(con: duckdb.DuckDBPyConnection, target: Path, options: str) -> Path:
    con.execute(f"COPY (SELECT * FROM t ORDER BY occurred_at DESC) TO '{target}' ({options})")
    return target


@pytest.fixture
def con(table: pa.Table) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("t", table)
    return con


def test_every_format_and_compression_gives_the_same_wire(
    con: duckdb.DuckDBPyConnection, table: pa.Table, now: pd.Timestamp, tmp_path: Path
) -> None:
    expected = cc.events_to_wire(table, now=now)
    files = [
        copy(con, tmp_path / "e.parquet", "FORMAT parquet"),
        copy(con, tmp_path / "e.csv", "HEADER"),
        copy(con, tmp_path / "e.csv.gz", "HEADER, COMPRESSION gzip"),
        copy(con, tmp_path / "e.csv.zst", "HEADER, COMPRESSION zstd"),
        copy(con, tmp_path / "e.tsv", "HEADER, DELIMITER '\t'"),
        copy(con, tmp_path / "e.ndjson", "FORMAT json"),
        copy(con, tmp_path / "e.jsonl.gz", "FORMAT json, COMPRESSION gzip"),
        copy(con, tmp_path / "e.json", "FORMAT json"),
    ]
    for path in files:
        assert cc.events_to_wire(path, now=now, slice_rows=7) == expected, path.name


def test_a_folder_of_parts_is_read_in_name_order_skipping_markers_and_empty_parts(
    con: duckdb.DuckDBPyConnection, table: pa.Table, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "unload"
    folder.mkdir()
    copy(con, folder / "part-0001.csv.gz", "HEADER, COMPRESSION gzip")
    (folder / "part-0000.csv.gz").write_bytes(b"")  # a zero-byte part, as unloads write
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0001.csv.gz.crc").write_bytes(b"\x00crc")
    (folder / "_temporary").mkdir()
    (folder / "_temporary" / "junk.txt").write_text("x")
    report = cc.validate_events(folder, now=now)
    assert report.ok and report.n_rows == 30
    assert list(report.valid.index[:2]) == ["part-0001.csv.gz:2", "part-0001.csv.gz:3"]
    glob = cc.validate_events(str(folder / "part-*.csv.gz"), now=now)
    assert glob.n_rows == 30


def test_duckdb_partitioned_parquet_folder(
    con: duckdb.DuckDBPyConnection, table: pa.Table, now: pd.Timestamp, tmp_path: Path
) -> None:
    con.execute(f"COPY t TO '{tmp_path / 'parts'}' (FORMAT parquet, PER_THREAD_OUTPUT)")
    wire = cc.events_to_wire(tmp_path / "parts", now=now)
    assert sorted(w["context"]["$message_id"] for w in wire) == sorted(
        w["context"]["$message_id"] for w in cc.events_to_wire(table, now=now)
    )


def test_a_folder_with_mixed_formats_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("external_user_id\nu\n")
    (tmp_path / "b.parquet").write_bytes(b"PAR1")
    with pytest.raises(cc.InputError, match="mixes formats"):
        cc.validate_events(tmp_path)


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("empty.csv", b"", "empty"),
        ("empty.ndjson", b"", "empty"),
        ("empty.parquet", b"", "empty"),
        ("not.parquet", b"external_user_id,event_type\nu,x\n", "not a readable Parquet file"),
        (
            "e.csv.gz",
            b"external_user_id\nu\n",
            "the name says gzip, but the file is not compressed",
        ),
        (
            "e.csv",
            gzip.compress(b"a\n1\n", mtime=0),
            "gzip-compressed but its name does not say so",
        ),
        ("e.csv.xz", b"\xfd7zXZ\x00rest", "decompress it first"),
        ("e.xlsx", b"PK\x03\x04", "unsupported file type"),
        ("e.json", b'[{"external_user_id": "u"}]\n', "JSON array"),
        ("e.ndjson", b'{"a": 1}\n{oops\n', "line 2"),
        ("e.ndjson", b'{"a": 1}\n[1]\n', "line 2 is not a JSON object"),
    ],
)
def test_broken_files_are_input_errors_naming_the_file(
    name: str, content: bytes, fragment: str, tmp_path: Path
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(cc.InputError) as info:
        cc.validate_events(path)
    assert fragment in str(info.value)
    assert name.split(".")[0] in str(info.value)


def test_truncated_parquet_and_gzip_are_input_errors(table: pa.Table, tmp_path: Path) -> None:
    pq.write_table(table, tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    write(tmp_path / "cut.parquet", data[: len(data) // 2])
    with pytest.raises(cc.InputError, match=r"cut\.parquet"):
        cc.validate_events(tmp_path / "cut.parquet")
    text = "external_user_id,event_type,occurred_at\n" + "u,x,2026-11-20T09:30:00Z\n" * 20_000
    packed = gzip.compress(text.encode())
    write(tmp_path / "cut.csv.gz", packed[: len(packed) // 2])
    with pytest.raises(cc.InputError, match=r"cut\.csv\.gz .*line"):
        cc.validate_events(tmp_path / "cut.csv.gz", slice_rows=1000)


def test_a_header_only_csv_is_zero_rows(now: pd.Timestamp, tmp_path: Path) -> None:
    path = write(tmp_path / "h.csv", "external_user_id,event_type,occurred_at\n")
    report = cc.validate_events(path, now=now)
    assert (report.n_rows, report.ok) == (0, True)


def test_wrong_encoding_names_the_line_and_the_right_one_reads_it(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    when = (now - pd.Timedelta(hours=1)).isoformat()
    rows = [f"u{i},login,{when},{'Zürich' if i == 40 else 'Bern'}" for i in range(60)]
    text = "external_user_id,event_type,occurred_at,properties.city\n" + "\n".join(rows) + "\n"
    path = write(tmp_path / "latin.csv", text.encode("cp1252"))
    with pytest.raises(cc.InputError) as info:
        cc.validate_events(path, now=now)
    assert "latin.csv line 42" in str(info.value) and "encoding" in str(info.value)
    wire = cc.events_to_wire(path, now=now, encoding="cp1252")
    assert wire[40]["properties"]["city"] == "Zürich"


def test_csv_rows_are_labelled_by_line_and_ragged_lines_are_invalid_rows(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    w = (now - pd.Timedelta(hours=1)).isoformat()
    text = (
        "external_user_id,event_type,occurred_at,properties.note\n"  # line 1
        f'a,login,{w},"two\nlines"\n'  # lines 2-3
        f"b,login,{w}\n"  # line 4: a cell short
        "\n"  # line 5: blank, skipped
        f"c,login,{w},x,extra\n"  # line 6: a cell too many
        ",,,\n"  # line 7: a row of empty cells
        f"d,login,{w},ok\r\n"  # line 8
    )
    report = cc.validate_events(write(tmp_path / "r.csv", text), now=now)
    assert report.n_rows == 5
    assert list(report.valid.index) == [2, 8]
    by_line = report.failures.groupby("row")["check"].apply(set).to_dict()
    assert by_line[4] == {"line_cells"} and by_line[6] == {"line_cells"}
    assert "not_nullable" in by_line[7]
    ragged = report.failures[report.failures["row"] == 4].iloc[0]["message"]
    assert "line 4 has 3 cells but the header has 4" in ragged


def test_ragged_lines_keep_their_rows_when_a_send_splits_the_first_slice(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    w = (now - pd.Timedelta(hours=1)).isoformat()
    lines = ["external_user_id,event_type,occurred_at"]
    lines += [f"u{i},login,{w}" if i not in (7, 3_007) else f"u{i},login" for i in range(4_500)]
    path = write(tmp_path / "long.csv", "\n".join(lines) + "\n")
    client = cc.Client("http://127.0.0.1:9", "ck_test_0123456789abcdef")
    result = client.send_events(path, now=now, dry_run=True, progress=False)
    invalid = result.rows[result.rows["status"] == "invalid"]
    assert list(invalid.index) == [9, 3_009]  # rows are labelled by their line
    assert result.counts["invalid"] == 2 and len(result.rows) == 4_500


def test_rename_maps_columns_and_near_misses_suggest_it(now: pd.Timestamp) -> None:
    df = pd.DataFrame(
        {
            "user_id": ["u"],
            "EVENT_TYPE": ["login"],
            "Occurred At": [now - pd.Timedelta(hours=1)],
        }
    )
    report = cc.validate_events(df, now=now, rename={"user_id": "external_user_id"})
    messages = report.failures.set_index("column")["message"].to_dict()
    assert messages["EVENT_TYPE"] == (
        "unknown column 'EVENT_TYPE': did you mean 'event_type'? Rename it: "
        "rename={'EVENT_TYPE': 'event_type'} (or rename_style='lower' for every column)"
    )
    assert "did you mean 'occurred_at'" in messages["Occurred At"]
    fixed = cc.validate_events(
        df,
        now=now,
        rename={
            "user_id": "external_user_id",
            "EVENT_TYPE": "event_type",
            "Occurred At": "occurred_at",
        },
    )
    assert fixed.ok


def test_dtypes_type_csv_cells_and_report_cells_that_do_not_parse(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    w = (now - pd.Timedelta(hours=1)).isoformat()
    text = (
        "external_user_id,event_type,occurred_at,properties.amount,properties.n,properties.tags\n"
        f'1,x,{w},19.90,3,"[""a""]"\n'
        f"2,x,{w},abc,4,[]\n"
    )
    path = write(tmp_path / "t.csv", text)
    as_text = cc.events_to_wire(path, now=now)
    assert as_text[0]["properties"] == {"amount": "19.90", "n": "3", "tags": '["a"]'}
    dtypes = {"properties.amount": "float64", "properties.n": "int64", "properties.tags": "json"}
    report = cc.validate_events(path, now=now, dtypes=dtypes)
    assert list(report.failures["row"]) == [3]
    assert "'abc' is not a float64" in report.failures.iloc[0]["message"]
    wire = cc.events_to_wire(path, now=now, dtypes=dtypes)
    assert wire[0]["properties"] == {"amount": 19.9, "n": 3, "tags": ["a"]}
    with pytest.raises(cc.InputError, match="dtypes is for the text cells of CSV"):
        cc.validate_events(pd.DataFrame({"a": [1]}), dtypes={"a": "int64"})
    with pytest.raises(cc.ConfigurationError, match="unknown type"):
        cc.validate_events(path, dtypes={"a": "decimal"})


def test_dtypes_columns_of_plain_numbers_are_typed_as_parquets_and_written_column_wise(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    w = (now - pd.Timedelta(hours=1)).isoformat()
    text = (
        "external_user_id,event_type,occurred_at,properties.n,properties.x\n"
        f"1,x,{w},3,1.5\n2,x,{w},,2\n3,x,{w},-0,1e3\n"
    )
    path = write(tmp_path / "t.csv", text)
    dtypes = (("properties.n", "int64"), ("properties.x", "float64"))
    frame = next(iter_frames(path, ReadSpec(dtypes=dtypes)))
    assert frame["properties.n"].dtype == "Int64" and frame["properties.x"].dtype == "Float64"
    assert frame["properties.n"].tolist() == [3, pd.NA, 0]
    assert frame["properties.x"].tolist() == [1.5, 2.0, 1000.0]
    options = cc.EventOptions(now=now)
    assert columnar.fallback_reason(frame, options) is None
    wire = cc.events_to_wire(path, now=now, dtypes=dict(dtypes))
    assert [e["properties"] for e in wire] == [{"n": 3, "x": 1.5}, {"x": 2}, {"n": 0, "x": 1000}]


@pytest.mark.parametrize("cell", ["+5", "9223372036854775808", "abc"])
def test_dtypes_int64_cells_arrow_does_not_read_as_python_does_keep_the_cell_loop(
    cell: str,
) -> None:
    # a sign, an integer beyond 64 bits, a bad cell: the loop reads or reports each one
    s = convert(pd.Series(["1", cell], dtype="str"), "int64")
    assert s.dtype == object and s.iloc[0] == 1
    if cell == "abc":
        assert isinstance(s.iloc[1], BadCell) and s.iloc[1].text == "abc"
    else:
        assert s.iloc[1] == int(cell)


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        (b"a,b,c", []),  # a header without its newline
        (b'a,b,c\r\n"x\r\ny",1,1\r\n\r\n,q,1', [2, 5]),  # quoted CRLF, then a blank line
        (b"a,b,c\n1,2,3\n\n\n4,5,6\n", [2, 5]),
    ],
)
def test_csv_line_labels_survive_crlf_blank_lines_and_a_missing_last_newline(
    text: bytes, labels: list[int], tmp_path: Path
) -> None:
    frames = iter_frames(write(tmp_path / "l.csv", text), ReadSpec(rows=1))
    assert [label for frame in frames for label in frame.index] == labels


def test_a_parquet_file_read_in_slices_holds_only_its_current_row_group(tmp_path: Path) -> None:
    # pre-buffering would keep every row group's bytes read so far until the file closes:
    # Arrow's memory would grow with the input (about 10 bytes a row of a real export)
    groups, rows = 20, 5_000
    blobs = [i.to_bytes(4, "big") * 25 for i in range(groups * rows)]
    table = pa.table({"blob": pa.array(blobs, pa.binary())})
    pq.write_table(table, tmp_path / "wide.parquet", row_group_size=rows, compression="none")
    del table
    group_bytes = (tmp_path / "wide.parquet").stat().st_size // groups
    # what the rest of the process holds in Arrow's pool (earlier tests) is not the reader's
    before = pa.total_allocated_bytes()
    held = []
    for frame in iter_frames(tmp_path / "wide.parquet", ReadSpec(rows=rows)):
        held.append(pa.total_allocated_bytes() - before)
        del frame
    assert len(held) == groups
    assert max(held) < 4 * group_bytes
