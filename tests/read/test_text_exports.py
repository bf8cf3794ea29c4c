"""Text exports as warehouses write them: each layout is read exactly (stored in the sandbox
over real HTTP where it matters), rows keep their line labels, and a layout that was not
said is refused with a message that names the option to pass.

Files come from the real tools where they run here (pandas, polars, DuckDB) and are
byte-faithful fixtures of the documented formats where they do not (Redshift UNLOAD,
Snowflake COPY INTO @stage, Spark's df.write.csv).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._read import row_count

COLUMNS = ["external_user_id", "event_type", "occurred_at", "properties.plan"]


def stamp(now: pd.Timestamp, minutes: int, spelling: str = "%Y-%m-%d %H:%M:%S+00") -> str:
    return (now - pd.Timedelta(minutes=minutes)).strftime(spelling)


def stored(sandbox: cc.Sandbox) -> list[tuple[str, str, dict[str, Any]]]:
    """(user, event_type, properties) of the stored events, by user."""
    frame = sandbox.events()
    rows = zip(frame["external_user_id"], frame["event_type"], frame["properties"], strict=True)
    return sorted((u, e, dict(p or {})) for u, e, p in rows)


def sent(wire: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(w["external_user_id"], w["event_type"], w.get("properties", {})) for w in wire]


# --- Redshift UNLOAD: pipe-delimited, no header, no quoting, parts without a suffix -------


def redshift_unload(folder: Path, now: pd.Timestamp, *, verbose: bool = False) -> Path:
    """``UNLOAD (...) TO 's3://bucket/unload/venue_' MANIFEST`` as downloaded: two slices'
    parts, written in a different order than the manifest lists them, and the manifest."""
    folder.mkdir()
    parts = {
        "venue_0001_part_00": f"u3|signup|{stamp(now, 3)}|free\n",
        "venue_0000_part_00": f"u1|signup|{stamp(now, 1)}|pro\nu2|login|{stamp(now, 2)}|\n",
    }
    for name, text in parts.items():
        (folder / name).write_bytes(text.encode())
    entries: list[dict[str, Any]] = []
    for name in ("venue_0000_part_00", "venue_0001_part_00"):
        meta: dict[str, Any] = {"content_length": (folder / name).stat().st_size}
        if verbose:
            meta["record_count"] = parts[name].count("\n")
        entries.append({"url": f"s3://bucket/unload/{name}", "meta": meta})
    manifest: dict[str, Any] = {"entries": entries}
    if verbose:
        manifest["schema"] = {
            "elements": [{"name": c, "type": {"base": "character varying"}} for c in COLUMNS]
        }
        manifest["author"] = {"name": "Amazon Redshift", "version": "1.0.0"}
    (folder / "venue_manifest").write_text(json.dumps(manifest))
    return folder


REDSHIFT: dict[str, Any] = {
    "delimiter": "|",
    "header": False,
    "columns": COLUMNS,
    "quote": None,
    "format": "csv",
}


def test_a_redshift_unload_folder_is_read_through_its_manifest_and_stored_exactly(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    result = client.send_events(folder, now=now, **REDSHIFT)
    assert result.counts["sent"] == 3
    assert stored(sandbox) == [
        ("u1", "signup", {"plan": "pro"}),
        ("u2", "login", {}),  # Redshift unloads null as an empty cell
        ("u3", "signup", {"plan": "free"}),
    ]


def test_a_manifest_orders_the_parts_and_labels_carry_part_and_line(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    (folder / "venue_0000_part_00").write_bytes(
        f"u1|signup|{stamp(now, 1)}|pro\nu2|Not Snake|{stamp(now, 2)}|\n".encode()
    )
    manifest = json.loads((folder / "venue_manifest").read_text())
    manifest["entries"][0]["meta"]["content_length"] = (
        (folder / "venue_0000_part_00").stat().st_size
    )
    (folder / "venue_manifest").write_text(json.dumps(manifest))
    wire = cc.events_to_wire(folder, now=now, **REDSHIFT)
    assert [w["external_user_id"] for w in wire] == ["u1", "u3"]  # manifest order, not names
    report = cc.validate_events(folder, now=now, **REDSHIFT)
    assert report.failures["row"].tolist() == ["venue_0000_part_00:2"]


def test_a_part_the_manifest_lists_but_the_folder_lacks_is_named(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    (folder / "venue_0001_part_00").unlink()
    with pytest.raises(cc.InputError, match=r"part 2, venue_0001_part_00 .* is not in"):
        cc.validate_events(folder, now=now, **REDSHIFT)


def test_a_part_shorter_than_the_manifest_says_is_a_broken_download(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    with (folder / "venue_0001_part_00").open("ab") as fh:
        fh.write(b"u4|sig")
    with pytest.raises(cc.InputError, match=r"venue_0001_part_00 has \d+ bytes, but"):
        cc.validate_events(folder, now=now, **REDSHIFT)


def test_a_manifest_file_can_be_passed_itself(now: pd.Timestamp, tmp_path: Path) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    wire = cc.events_to_wire(folder / "venue_manifest", now=now, **REDSHIFT)
    assert [w["external_user_id"] for w in wire] == ["u1", "u2", "u3"]


def test_a_verbose_manifest_counts_rows_and_checks_the_column_count(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now, verbose=True)
    assert row_count(folder) == 3
    with pytest.raises(cc.InputError, match="columns= names 3 columns, but venue_manifest"):
        cc.validate_events(folder, now=now, **{**REDSHIFT, "columns": COLUMNS[:3]})


def test_parts_without_a_suffix_need_format_and_the_message_says_so(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    options = {k: v for k, v in REDSHIFT.items() if k != "format"}
    with pytest.raises(cc.InputError, match=r"say its format: format='csv'$"):
        cc.validate_events(folder, now=now, **options)
    single = folder / "venue_0001_part_00"
    with pytest.raises(cc.InputError, match=r"unsupported file type .*format='csv'"):
        cc.validate_events(single, now=now, **options)


def test_redshift_escape_and_null_as_backslash_n_are_read_as_written(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    # UNLOAD ... ESCAPE NULL AS '\N': the delimiter and the escape are escaped inside values,
    # null is \N, and the text "\N" is written \\N
    part = tmp_path / "0000_part_00.gz"
    lines = [
        f"u1|signup|{stamp(now, 1)}|a\\|b",
        f"u2|signup|{stamp(now, 2)}|\\N",
        f"u3|signup|{stamp(now, 3)}|\\\\N",
        f"u4|signup|{stamp(now, 4)}|",
        f"u5|signup|{stamp(now, 5)}|line\\\none",
        f"u6|signup|{stamp(now, 6)}|N",
    ]
    part.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    options = {**REDSHIFT, "escape": "\\", "null": "\\N"}
    wire = cc.events_to_wire(part, now=now, **options)
    assert [w.get("properties", {}).get("plan") for w in wire] == [
        "a|b",
        None,
        "\\N",
        "",  # with null=\N an empty cell is an empty string
        "line\none",
        "N",
    ]
    bad = part.with_name("0001_part_00")
    bad.write_bytes(("\n".join([*lines, f"u7|Not Snake|{stamp(now, 7)}|x"]) + "\n").encode())
    report = cc.validate_events(bad, now=now, **options)
    # no header: data starts at line 1; the escaped newline makes u5 two lines long
    assert report.failures["row"].tolist() == [8]


# --- Snowflake COPY INTO @stage: CSV, no header, NULL_IF=('\N'), gzip --------------------


def test_a_snowflake_unload_is_stored_exactly(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = tmp_path / "stage"
    folder.mkdir()
    zone = "%Y-%m-%d %H:%M:%S.000 +0000"  # TIMESTAMP_TZ's default output format
    (folder / "data_0_0_0.csv.gz").write_bytes(
        gzip.compress(
            f"u1,signup,{stamp(now, 1, zone)},pro\nu2,login,{stamp(now, 2, zone)},\\N\n".encode()
        )
    )
    (folder / "data_0_1_0.csv.gz").write_bytes(
        gzip.compress(f"u3,signup,{stamp(now, 3, zone)},\n".encode())
    )
    options: dict[str, Any] = {"header": False, "columns": COLUMNS, "null": "\\N"}
    result = client.send_events(folder, now=now, **options)
    assert result.counts["sent"] == 3
    assert stored(sandbox) == [
        ("u1", "signup", {"plan": "pro"}),
        ("u2", "login", {}),
        ("u3", "signup", {"plan": ""}),  # an empty field is an empty string there
    ]


def test_null_markers_can_be_several(now: pd.Timestamp, tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    path.write_text(f"u1,a,{stamp(now, 1)},\\N\nu2,a,{stamp(now, 2)},\n")
    wire = cc.events_to_wire(
        path, now=now, header=False, columns=COLUMNS, null=["", "\\N"], escape=None
    )
    assert [w.get("properties", {}) for w in wire] == [{}, {}]


# --- European CSV, pandas, polars, DuckDB: written by the real tools ----------------------


def test_a_european_csv_with_bom_crlf_and_semicolons_keeps_its_line_labels(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    frame = pd.DataFrame(
        {
            "external_user_id": ["u1", "u2", "u3"],
            "event_type": ["signup", "Not Snake", "signup"],
            "occurred_at": [stamp(now, i) for i in (1, 2, 3)],
            "properties.note": ["a;b", "two\r\nlines", "x"],
        }
    )
    path = tmp_path / "export.csv"
    frame.to_csv(path, sep=";", index=False, encoding="utf-8-sig", lineterminator="\r\n")
    assert path.read_bytes().startswith(b"\xef\xbb\xbfexternal_user_id;")
    report = cc.validate_events(path, now=now, delimiter=";")
    assert report.n_rows == 3
    assert report.failures["row"].tolist() == [3]
    wire = cc.events_to_wire(path, now=now, delimiter=";")
    assert [w["properties"]["note"] for w in wire] == ["a;b", "x"]


def test_duckdb_headerless_pipe_delimited_copy_is_read_with_line_labels(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "events.txt"
    duckdb.sql(
        f"""
        COPY (
            SELECT * FROM (VALUES
                ('u1', 'signup', '{stamp(now, 1)}', 'pro'),
                ('u2', 'Not Snake', '{stamp(now, 2)}', NULL),
                ('u3', 'login', '{stamp(now, 3)}', 'a|b')
            ) AS t(a, b, c, d)
        ) TO '{path}' (FORMAT csv, HEADER false, DELIMITER '|')
        """
    )
    assert not path.read_text().startswith("external_user_id")
    options: dict[str, Any] = {"delimiter": "|", "header": False, "columns": COLUMNS}
    report = cc.validate_events(path, now=now, format="csv", **options)
    assert report.failures["row"].tolist() == [2]
    wire = cc.events_to_wire(path, now=now, format="csv", **options)
    assert sent(wire) == [("u1", "signup", {"plan": "pro"}), ("u3", "login", {"plan": "a|b"})]


def test_polars_headerless_tsv_is_read_with_columns(now: pd.Timestamp, tmp_path: Path) -> None:
    path = tmp_path / "events.tsv"
    pl.DataFrame(
        {"a": ["u1", "u2"], "b": ["signup", "login"], "c": [stamp(now, 1), stamp(now, 2)]}
    ).write_csv(path, separator="\t", include_header=False)
    wire = cc.events_to_wire(path, now=now, header=False, columns=COLUMNS[:3])
    assert sent(wire) == [("u1", "signup", {}), ("u2", "login", {})]


def test_a_pandas_index_column_is_named_for_what_it_is(now: pd.Timestamp, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"external_user_id": ["u1"], "event_type": ["signup"], "occurred_at": [stamp(now, 1)]}
    )
    path = tmp_path / "export.csv"
    frame.to_csv(path)  # pandas' default writes the index as a first column with no name
    report = cc.validate_events(path, now=now)
    assert report.failures["message"].tolist() == [
        "unknown column '': the first column has no name: it looks like a pandas index; "
        "pass index=False when writing, or extra_columns='ignore'"
    ]
    assert cc.validate_events(path, now=now, extra_columns="ignore").ok


def test_a_file_whose_first_line_is_data_says_it_seems_to_have_no_header(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "export.csv"
    path.write_text(f"1001,signup,{stamp(now, 1, '%Y-%m-%dT%H:%M:%SZ')},a@b.io\n")
    report = cc.validate_events(path, now=now)
    unknown = report.failures[report.failures["check"] == "column_in_schema"]
    hinted = [m for m in unknown["message"] if "the file seems to have no header" in m]
    # 'signup' could be a name, but not beside '1001': the whole first line is data
    assert len(unknown) == 4 and len(hinted) == 4
    assert "'1001' beside it looks like a value" in hinted[1]
    for message in hinted:
        assert message.endswith("pass header=False, columns=[...] (its 4 columns, in order)")


# --- Spark df.write.csv: no header, backslash escapes, part files and _SUCCESS -----------


def spark_folder(folder: Path, now: pd.Timestamp) -> Path:
    """``df.write.csv(folder)`` with Spark's defaults: part files, .crc files, _SUCCESS; no
    header, ``"`` quotes where needed, ``\\"`` inside them, nulls as empty cells and empty
    strings as ``""``; timestamps as yyyy-MM-dd'T'HH:mm:ss.SSSXXX."""
    folder.mkdir()
    spelling = "%Y-%m-%dT%H:%M:%S.000Z"
    uuid = "3f1c2a9e-6b7d-4e8f-9a0b-1c2d3e4f5a6b"
    parts = {
        f"part-00000-{uuid}-c000.csv": (
            f'u1,signup,{stamp(now, 1, spelling)},"say \\"hi\\""\n'
            f"u2,login,{stamp(now, 2, spelling)},\n"
        ),
        f"part-00001-{uuid}-c000.csv": (
            f'u3,signup,{stamp(now, 3, spelling)},""\n'
            f'u4,signup,{stamp(now, 4, spelling)},"a,b\nc"\n'
        ),
        f"part-00002-{uuid}-c000.csv": "",  # an empty partition
    }
    for name, text in parts.items():
        (folder / name).write_text(text)
        (folder / f".{name}.crc").write_bytes(b"crc\x00\x00\x00\x01")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / "._SUCCESS.crc").write_bytes(b"crc\x00")
    return folder


def test_a_spark_csv_folder_is_stored_exactly(
    client: cc.Client, sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = spark_folder(tmp_path / "out", now)
    result = client.send_events(folder, now=now, header=False, columns=COLUMNS, escape="\\")
    assert result.counts["sent"] == 4
    assert stored(sandbox) == [
        ("u1", "signup", {"plan": 'say "hi"'}),
        ("u2", "login", {}),
        ("u3", "signup", {}),  # the default reads "" as null too (null= changes that)
        ("u4", "signup", {"plan": "a,b\nc"}),
    ]


def test_spark_rows_are_labelled_by_part_and_line_after_a_quoted_newline(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = spark_folder(tmp_path / "out", now)
    part = next(folder.glob("part-00001-*.csv"))
    part.write_text(part.read_text() + f"u5,Not Snake,{stamp(now, 5, '%Y-%m-%dT%H:%M:%SZ')},\n")
    report = cc.validate_events(folder, now=now, header=False, columns=COLUMNS, escape="\\")
    assert report.failures["row"].tolist() == [f"{part.name}:4"]


# --- an export day without rows -----------------------------------------------------------


def test_a_folder_holding_only_success_is_zero_rows_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "day"
    folder.mkdir()
    (folder / "_SUCCESS").write_bytes(b"")
    report = cc.validate_events(folder)
    assert report.n_rows == 0 and report.ok
    assert main(["validate", "events", str(folder)]) == 0
    assert "the input holds no rows" in capsys.readouterr().out


def test_a_folder_of_empty_parts_is_zero_rows(now: pd.Timestamp, tmp_path: Path) -> None:
    folder = tmp_path / "day"
    folder.mkdir()
    (folder / "data_0_0_0.csv.gz").write_bytes(gzip.compress(b""))
    (folder / "data_0_1_0.csv").write_bytes(b"")
    assert cc.validate_events(folder, now=now).n_rows == 0
    assert cc.validate_events(folder, now=now, header=False, columns=COLUMNS).n_rows == 0


def test_an_empty_day_sends_nothing_and_exits_0(
    api_env: cc.Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "day"
    folder.mkdir()
    (folder / "_SUCCESS").write_bytes(b"")
    assert main(["send", "events", str(folder)]) == 0
    assert "the input holds no rows: nothing to send" in capsys.readouterr().out
    assert api_env.stats()["stored"] == 0


def test_a_folder_with_no_file_at_all_is_still_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "typo"
    folder.mkdir()
    with pytest.raises(cc.InputError, match="holds no part files"):
        cc.validate_events(folder)


@pytest.fixture
def api_env(sandbox: cc.Sandbox, monkeypatch: pytest.MonkeyPatch) -> cc.Sandbox:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    return sandbox


# --- the command line -----------------------------------------------------------------------


def test_the_cli_reads_a_redshift_unload_with_its_flags(
    api_env: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    flags = ["--format", "csv", "--delimiter", "|", "--no-header", "--quote", "none"]
    flags += ["--columns", ",".join(COLUMNS)]
    assert main(["validate", "events", str(folder), *flags]) == 0
    assert main(["send", "events", str(folder), *flags]) == 0
    assert api_env.stats()["stored"] == 3


def test_the_cli_reads_escapes_and_null_markers(
    api_env: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "e.tsv"
    path.write_text(f"u1\tsignup\t{stamp(now, 1)}\t\\N\nu2\tsignup\t{stamp(now, 2)}\tx\\\ty\n")
    flags = ["--no-header", "--columns", ",".join(COLUMNS), "--escape", "\\", "--null", "\\N"]
    assert main(["send", "events", str(path), "--delimiter", "\\t", *flags]) == 0
    assert stored(api_env) == [("u1", "signup", {}), ("u2", "signup", {"plan": "x\ty"})]


def test_the_cli_refuses_columns_without_no_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.csv"
    path.write_text("a,b\n")
    assert main(["validate", "events", str(path), "--columns", "a,b"]) == 3
    assert "--no-header" in capsys.readouterr().err


# --- options that make no sense, or no sense together ------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"header": False}, r"header=False needs columns=\[...\]: the names"),
        ({"columns": ["a"]}, r"columns=\[...\] names the columns of a file without a header"),
        ({"delimiter": ";;"}, "delimiter must be one character"),
        ({"delimiter": "\n"}, "delimiter cannot be a line break"),
        ({"quote": "|", "delimiter": "|"}, "delimiter, quote and escape must differ"),
        ({"format": "xlsx"}, "format must be one of"),
        ({"null": []}, "null must be a marker"),
        ({"header": False, "columns": ["a", "a"]}, "columns names a column twice"),
        ({"header": False, "columns": "a,b"}, "columns must be a list of names"),
    ],
)
def test_bad_text_options_are_refused_up_front(
    options: dict[str, Any], fragment: str, tmp_path: Path
) -> None:
    with pytest.raises(cc.ConfigurationError, match=fragment):
        cc.validate_events(tmp_path / "not-read.csv", **options)


def test_text_options_for_a_parquet_file_or_a_dataframe_are_refused(
    events: pd.DataFrame, tmp_path: Path
) -> None:
    path = tmp_path / "e.parquet"
    events.to_parquet(path)
    with pytest.raises(cc.InputError, match=r"delimiter= \(--delimiter\): for CSV/TSV files"):
        cc.validate_events(path, delimiter=";")
    with pytest.raises(cc.InputError, match=r"header= \(--no-header\).*a DataFrame is a table"):
        cc.validate_events(events, header=False, columns=["a"])
    with pytest.raises(cc.InputError, match=r"its name says parquet, but format='csv'"):
        cc.validate_events(path, format="csv")


def test_a_ragged_line_without_header_names_the_columns_option(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "e.csv"
    path.write_text(f"u1,signup,{stamp(now, 1)},pro\nu2,signup,{stamp(now, 2)}\n")
    report = cc.validate_events(path, now=now, header=False, columns=COLUMNS)
    assert report.failures["row"].tolist() == [2]
    assert "line 2 has 3 cells but columns= names 4" in report.failures["message"].iloc[0]


def test_identities_read_headerless_exports_too(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("u1|a@example.com\nu2|\\N\n")
    bodies = cc.identities_to_wire(
        path, delimiter="|", header=False, columns=["external_user_id", "email"], null="\\N"
    )
    assert bodies == [
        {
            "external_user_id": "u1",
            "channels": [{"channel": "email", "address": "a@example.com", "opted_in": True}],
        },
        {"external_user_id": "u2"},  # \N: no email, not an email "\N"
    ]


def test_the_task_wrapper_takes_the_text_options_by_name(
    sandbox: cc.Sandbox, now: pd.Timestamp, tmp_path: Path
) -> None:
    folder = redshift_unload(tmp_path / "unload", now)
    summary = cc.send_events_task(
        folder, base_url=sandbox.base_url, api_key=sandbox.api_key, now=now, **REDSHIFT
    )
    assert summary["counts"]["sent"] == 3
    assert sandbox.stats()["stored"] == 3


def test_a_row_of_nulls_after_an_escaped_line_break_is_a_row_not_a_blank_line(
    now: pd.Timestamp, tmp_path: Path
) -> None:
    path = tmp_path / "0000_part_00"
    # the first value ends in an escaped newline, so "\\\n\n" looks like an empty line
    path.write_bytes(f"u1|signup|{stamp(now, 1)}|a\\\n\n\\N|\\N|\\N|\\N\n".encode())
    report = cc.validate_events(path, now=now, **REDSHIFT, escape="\\", null="\\N")
    assert report.n_rows == 2
    assert set(report.failures["row"]) == {3}  # the row of nulls, on the line it starts on
