"""CSV and TSV: every cell as text, every row labelled by the line it starts on.

pyarrow's streaming parser reads the file (``use_threads=False`` keeps record numbers, values
may hold newlines); each record's physical line number is rebuilt from the newlines inside
its cells, so a quoted or escaped cell spanning lines never shifts the labels of later rows.
The layout (delimiter, quote, escape, null markers, header or ``columns``) is a
``TextFormat``; without a header the data starts at line 1. By default only an empty cell
is null ("NA" or "null" can be somebody's id). A line with more or fewer cells than the
header becomes an invalid row (its problem rides beside the frame, in its ``Slice``), never
padded or shifted. A physically empty line is skipped; a line of empty cells (``,,``) is a
row. A quoted cell still open when the file ends (a stray quote, or a file cut short) is an
invalid row too: pyarrow reads every line after the quote into that cell, without a word.
When the file ends without a newline, its last record is judged (``ending``): short of
cells or inside a quoted cell, it was cut (``truncated``); whole, it is read with a note.
A row holding a backslash-escaped quote (read without ``escape=``) or a ``\\N`` cell (read
without ``null=``) is refused with the option that reads it as written (``layout``).
"""

from __future__ import annotations

import bisect
import codecs
import csv
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .._core import InputError, Note
from .arrow import arrow_to_pandas
from .compression import open_stream
from .csv_bytes import (
    HELD,
    EscapedNulls,
    Lines,
    decoded_lines,
    ends_inside_quote,
    escaped_marker,
    newlines,
    open_quote,
    unhold,
)
from .ending import cut_cells, cut_quote, unterminated
from .layout import escaped_quote_hint, null_cells, null_problem, quote_problem
from .read_slice import RowProblem, Slice
from .text import TextFormat

_UNREAD = object()  # no batch read ahead
_ROW_NUMBER = re.compile(r"Row #(\d+)")


def _python_codec(encoding: str) -> str:
    return codecs.lookup(encoding).name


def _header(
    path: Path, name: str, delimiter: str, text: TextFormat, encoding: str
) -> tuple[list[str], int]:
    """The header's cells and how many physical lines it takes."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    shown = "utf-8" if encoding == "utf-8-sig" else encoding
    dialect: dict[str, Any] = {"delimiter": delimiter, "escapechar": text.escape}
    if text.quote is None:
        dialect["quoting"] = csv.QUOTE_NONE
    else:
        dialect["quotechar"] = text.quote
    with open_stream(path) as raw:
        reader = csv.reader(decoded_lines(raw, encoding), strict=False, **dialect)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(f"{name} is empty: expected a header line", path=str(path)) from None
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{name} line 1 is not valid {shown} ({exc.reason}): pass the file's "
                "encoding (encoding=..., --encoding)",
                path=str(path),
                line=1,
            ) from None
        except (csv.Error, OSError, EOFError) as exc:
            raise InputError(
                f"{name} line 1 cannot be read: {exc}", path=str(path), line=1
            ) from None
        return header, reader.line_num


def is_empty(path: Path) -> bool:
    """No bytes once decompressed (a byte-order mark alone counts as none)."""
    with open_stream(path) as raw:
        head: bytes = raw.read(4)
    return head in (b"", codecs.BOM_UTF8)


def read_csv(
    path: Path,
    name: str,
    rows: int,
    *,
    kind: str = "csv",
    text: TextFormat | None = None,
    encoding: str = "utf-8",
) -> Iterator[Slice]:
    """Slices of at most ``rows`` rows, labelled by physical line (the header is line 1),
    with the problems of the lines that could not be read as written."""
    text = text or TextFormat()
    delimiter = text.delimiter_for(kind)
    codec = _python_codec(encoding)
    utf8 = codec == "utf-8"
    if text.columns is None:
        header, header_lines = _header(path, name, delimiter, text, "utf-8-sig" if utf8 else codec)
    else:
        header, header_lines = list(text.columns), 0
        if is_empty(path):
            schema = pa.schema([(h, pa.string()) for h in header])
            yield Slice(arrow_to_pandas(_empty_batch(schema), pd.Index([], dtype=np.int64)))
            return
    ragged: list[Any] = []

    def on_invalid(row: Any) -> str:
        ragged.append(row)
        return "skip"

    source = open_stream(path)
    if not utf8:
        source = pa.transcoding_input_stream(source, src_encoding=codec, dest_encoding="utf-8")
    marker = escaped_marker(text)
    null_cell: str | None = None  # \N read as text (no null= given) is flagged (``layout``)
    if text.null is None:
        # a backslash escape would turn it into "N": it is held, as a null marker would be
        null_cell = HELD if text.escape == "\\" else "\\N"
        marker = "\\N" if null_cell == HELD else None
    escaped: EscapedNulls | None = None
    if marker is not None:
        assert text.escape is not None
        source = escaped = EscapedNulls(source, text.escape, marker)
    lines = Lines(
        source, text.escape, quote=text.quote, delimiter=delimiter, null_text=null_cell == "\\N"
    )
    state = _Position(record=1 if text.columns else 2, line=header_lines + 1)
    try:
        reader = _open(lines, header, text, delimiter, rows, on_invalid)
    except (pa.ArrowException, OSError, UnicodeDecodeError, ValueError) as exc:
        lines.stop()  # pyarrow's read-ahead thread out of Python first
        raise _broken(path, name, encoding, state, exc, _block_size(rows)) from None
    schema = pa.schema([(h, pa.string()) for h in header])

    def next_batch() -> pa.RecordBatch | None:
        try:
            return reader.read_next_batch()
        except StopIteration:
            return None
        except (pa.ArrowException, OSError, UnicodeDecodeError, ValueError) as exc:
            lines.stop()
            raise _broken(path, name, encoding, state, exc, _block_size(rows)) from None

    def unclosed(line: int) -> bool:
        assert text.quote is not None
        codec_read = "utf-8-sig" if utf8 else codec
        return ends_inside_quote(path, line, codec_read, delimiter, text.quote, text.escape)

    def opens(row_text: str) -> bool:
        assert text.quote is not None
        return open_quote(row_text, delimiter, text.quote, text.escape)

    produced = False
    following: object = _UNREAD  # a batch, None (the end), or _UNREAD
    try:
        while True:
            batch = next_batch() if following is _UNREAD else following
            following = _UNREAD
            at_end = batch is None
            if batch is None:
                if not ragged:
                    break
                batch = schema.empty_table().to_batches() or [_empty_batch(schema)]
                batch = batch[0]
            assert isinstance(batch, pa.RecordBatch)
            nulls: dict[int, list[str]] = {}
            if null_cell is not None and (lines.holds_null or (escaped and escaped.swapped)):
                nulls = null_cells(batch, null_cell)
            if marker is not None:
                batch = unhold(batch, marker)
            # a record whose last cell ends in a line break may be the file's last, read
            # to the end inside a quote; in a file without a final newline, the last record
            # may be cut: only then is the next batch read before this one is handed on,
            # to know whether it was the last (it rarely is looked at)
            breaks = text.quote is not None and _last_cell_breaks(batch)
            if not at_end and (breaks or lines.unterminated):
                following = next_batch()
                at_end = following is None
            ending = name if at_end and lines.unterminated else None
            # unquoted escaped cells: each escaped \r and \n is a line break of its own
            apart = text.escape is not None and text.quote is None
            parts = _frames(
                batch,
                ragged,
                lines.blank,
                state,
                rows,
                text.columns,
                apart,
                unclosed if breaks and at_end else None,
                opens if text.quote is not None else None,
                _Seen(lines.escaped_quotes, nulls, ending),
            )
            for part in parts:
                produced = True
                yield part
    finally:
        reader.close()
    if not produced:
        empty = arrow_to_pandas(_empty_batch(schema), pd.Index([], dtype=np.int64))
        notes: tuple[Note, ...] = ()
        if lines.unterminated and header_lines:  # the header alone, without its newline
            notes = (unterminated(name, None, header[-1] if header else None),)
        yield Slice(empty, notes=notes)


def _open(
    lines: Lines, header: list[str], text: TextFormat, delimiter: str, rows: int, on_invalid: Any
) -> Any:
    marker = escaped_marker(text)
    nulls = [HELD if m == marker else m for m in text.null] if text.null is not None else [""]
    return pacsv.open_csv(
        lines,
        read_options=pacsv.ReadOptions(
            use_threads=False, block_size=_block_size(rows), column_names=text.columns
        ),
        parse_options=pacsv.ParseOptions(
            delimiter=delimiter,
            quote_char=text.quote if text.quote is not None else False,
            escape_char=text.escape if text.escape is not None else False,
            newlines_in_values=True,
            ignore_empty_lines=False,  # every line stays a record, so no line is lost
            invalid_row_handler=on_invalid,
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(header, pa.string()),
            strings_can_be_null=True,
            # the default reads "" as null too; markers the caller names are unquoted cells
            quoted_strings_can_be_null=text.null is None,
            null_values=nulls,
        ),
    )


def _block_size(rows: int) -> int:
    # about ``rows`` typical export lines per block, within 1 MiB .. 64 MiB
    return int(min(max(rows * 200, 1 << 20), 1 << 26))


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


@dataclass
class _Seen:
    """What the bytes said of a batch's records beyond their cells (``layout``, ``ending``)."""

    quotes: list[int]  # ``Lines.escaped_quotes``: consumed as their records are framed
    nulls: dict[int, list[str]]  # record -> the columns of its \N cells
    ending: str | None  # the file's name: its last record, without a final newline, is here


class _Position:
    """The next record number (the header is record 1) and the line it starts on."""

    def __init__(self, record: int, line: int) -> None:
        self.record = record
        self.line = line


def _broken(
    path: Path, name: str, encoding: str, at: _Position, exc: BaseException, block: int
) -> InputError:
    text = str(exc).strip()
    found = _ROW_NUMBER.search(text)
    line = at.line + max(int(found.group(1)) - at.record, 0) if found else at.line
    if "straddling object" in text:  # one record longer than the reader's block
        message = (
            f"{name} line {line}: a record (or an unclosed quote) longer than "
            f"{block / (1 << 20):.1f} MiB, the most a CSV reader's block holds: a cell "
            "that long is rarely meant; check the line's quotes, or export the file as "
            "Parquet (or give slice_rows / --slice-rows more rows: a block holds ~200 bytes "
            "a row, 64 MiB at most)"
        )
    elif "UTF8" in text or isinstance(exc, UnicodeDecodeError):
        message = (
            f"{name} line {line} is not valid {encoding}: pass the file's encoding "
            "(encoding=..., --encoding)"
        )
    else:
        message = f"{name} cannot be read at or after line {line}: {text.splitlines()[0]}"
    return InputError(message, path=str(path), line=line)


def _cell_newlines(
    arr: pa.ChunkedArray | pa.Array,
    apart: bool,  # noqa: FBT001 - "\r\n" in the cell is two escaped breaks, not one
) -> np.ndarray:
    n = pc.count_substring(arr, "\n")
    cr = pc.count_substring(arr, "\r")
    if not apart:
        cr = pc.subtract(cr, pc.count_substring(arr, "\r\n"))
    counted = pc.add(n, cr).fill_null(0)
    return counted.to_numpy(zero_copy_only=False).astype(np.int64)  # type: ignore[no-any-return]


def _may_break(arr: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any cell may hold a line break: one byte search of the column's text (the
    usual export has none, and counting them costs three scans of every cell)."""
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    for chunk in chunks:
        data = chunk.buffers()[2] if len(chunk) else None
        if data is not None and (b"\n" in (text := data.to_pybytes()) or b"\r" in text):
            return True  # the buffer may hold bytes of no cell: then the count says 0
    return False


def _frames(
    batch: pa.RecordBatch,
    ragged: list[Any],
    blank: set[int],
    at: _Position,
    rows: int,
    columns: Sequence[str] | None,
    apart: bool,  # noqa: FBT001 - see _cell_newlines
    unclosed: Callable[[int], bool] | None = None,
    opens: Callable[[str], bool] | None = None,
    seen: _Seen | None = None,
) -> Iterator[Slice]:
    """The batch's records and the ragged lines among them, in file order, labelled.

    ``unclosed``: given when this is the file's last batch; it says whether the record that
    starts on a line is still inside a quoted cell when the file ends. ``opens``: whether a
    ragged record's text leaves a quote open (then it ran to the end of the file).
    ``seen``: what the bytes said (``_Seen``): rows holding \\N or a backslash-quote, and
    whether the file's last record, here, lacks its newline (then it is judged: ``_ending``)."""
    nvalid = batch.num_rows
    # the parser may read ahead: take the ragged records that fall inside this batch's range
    pending = sorted(ragged, key=lambda r: r.number)
    k = 0
    while k < len(pending) and (nvalid == 0 or pending[k].number < at.record + nvalid + k):
        k += 1
    inside, ragged[:] = pending[:k], pending[k:]
    total = nvalid + len(inside)
    numbers = np.arange(at.record, at.record + total)
    is_bad = np.isin(numbers, np.array([r.number for r in inside], dtype=np.int64))
    spans = np.ones(total, dtype=np.int64)
    breaks = np.zeros(nvalid, dtype=np.int64)
    for column in batch.columns:
        if _may_break(column):
            breaks += _cell_newlines(column, apart)
    spans[~is_bad] += breaks
    spans[is_bad] += np.array([newlines(r.text.encode()) for r in inside], dtype=np.int64)
    first_line = at.line + np.concatenate(([0], np.cumsum(spans)[:-1])).astype(np.int64)
    at.record += total
    at.line += int(spans.sum())
    # valid records keep their order; a ragged record is a row of nulls with a problem
    take = np.full(total, -1, dtype=np.int64)
    take[~is_bad] = np.arange(nvalid)
    problems: dict[int, RowProblem] = {
        int(p): _ragged_problem(r, int(first_line[p]), columns, opens)
        for p, r in zip(np.flatnonzero(is_bad).tolist(), inside, strict=True)
    }
    if unclosed is not None and not ragged and total and not is_bad[-1]:
        line = int(first_line[-1])
        if unclosed(line):
            problems[total - 1] = ("quote_closed", _unclosed_message(batch, line, at.line))
    notes: list[Note] = []
    if seen is not None and seen.ending is not None and not ragged and total:
        last = inside[-1] if is_bad[-1] else None
        found = _ending(batch, last, problems.get(total - 1), int(first_line[-1]), at.line)
        if isinstance(found, tuple):
            problems[total - 1] = found
        elif found is not None:
            notes.append(unterminated(seen.ending, int(first_line[-1]), found))
    if seen is not None:
        _layout_problems(seen, problems, first_line, np.flatnonzero(~is_bad), at.line)
    all_null = np.ones(nvalid, dtype=bool)
    for column in batch.columns:
        all_null &= column.is_null().to_numpy(zero_copy_only=False)
    keep = np.ones(total, dtype=bool)
    positions = np.flatnonzero(~is_bad)
    empty = positions[all_null]
    keep[empty] = [int(first_line[p]) not in blank for p in empty.tolist()]
    indices = pa.array(np.where(take >= 0, take, 0), mask=take < 0)
    table = batch.take(indices) if total else batch
    for start in range(0, total, rows):
        stop = min(start + rows, total)
        chosen = np.flatnonzero(keep[start:stop]) + start
        part = table.take(pa.array(chosen, type=pa.int64()))
        frame = arrow_to_pandas(part, pd.Index(first_line[chosen], dtype=np.int64))
        where = {int(i): problems[int(p)] for i, p in enumerate(chosen.tolist()) if p in problems}
        yield Slice(frame, where, notes=tuple(notes) if stop == total else ())


def _layout_problems(
    seen: _Seen,
    problems: dict[int, RowProblem],
    first_line: np.ndarray,
    valid: np.ndarray,
    end: int,
) -> None:
    """The rows holding a backslash-quote (lines before ``end``, the next record's), then
    those holding \\N cells, as problems; a row broken otherwise keeps its problem, and a
    backslash-quote adds its hint."""
    upto = bisect.bisect_left(seen.quotes, end)
    lines, seen.quotes[:upto] = seen.quotes[:upto], []
    for line in lines:
        p = int(np.searchsorted(first_line, line, side="right")) - 1
        if p < 0:
            continue  # the header's line
        if p not in problems:
            problems[p] = quote_problem(int(first_line[p]))
        elif problems[p][0] != "quote_escaped" and escaped_quote_hint() not in problems[p][1]:
            check, message, *rest = problems[p]
            problems[p] = (check, message + escaped_quote_hint(), *rest)
    for index, columns in seen.nulls.items():
        p = int(valid[index])
        problems.setdefault(p, null_problem(int(first_line[p]), columns))


def _ending(
    batch: pa.RecordBatch, row: Any, problem: tuple[str, ...] | None, line: int, end: int
) -> tuple[str, str] | str | None:
    """The file's last record, when no newline follows it: its ``truncated`` problem when
    it is short of cells or inside a quoted cell (``row``: pyarrow's, when it was ragged),
    else the column of its last cell, which a cut could have shortened unseen (None: the
    record is broken otherwise, a note would add nothing)."""
    if problem is not None and problem[0] == "quote_closed":
        if row is not None:
            return cut_quote(line, None, newlines(row.text.encode()))
        return cut_quote(line, batch.schema.names[-1], end - line - 2)
    if row is not None:
        short = row.actual_columns < row.expected_columns
        return cut_cells(line, row.actual_columns, row.expected_columns) if short else None
    return str(batch.schema.names[-1])


def _ragged_problem(
    row: Any, line: int, columns: Sequence[str] | None, opens: Callable[[str], bool] | None
) -> tuple[str, str]:
    """A record pyarrow could not split into the header's cells: a missing or extra
    delimiter, or a quoted cell never closed (its text then runs to the end of the file)."""
    if opens is not None and opens(row.text):
        after = newlines(row.text.encode())
        swallowed = f"; the {after} line(s) after it were read into that cell" if after else ""
        return (
            "quote_closed",
            f"line {line}: a quoted cell is never closed, the file ends inside it (a stray "
            f"quote, or a file cut short){swallowed}",
        )
    return (
        "line_cells",
        f"line {line} has {row.actual_columns} cells but "
        f"{'columns= names' if columns else 'the header has'} {row.expected_columns}: a "
        "missing or extra delimiter, or an unquoted one",
    )


def _last_cell_breaks(batch: pa.RecordBatch) -> bool:
    """The last record's last cell ends in a line break (a quoted one can; the file's last
    record, read to its end inside a quote, always does)."""
    if not batch.num_rows or not batch.num_columns:
        return False
    last = batch.column(batch.num_columns - 1)[batch.num_rows - 1].as_py()
    return isinstance(last, str) and last.endswith(("\n", "\r"))


def _unclosed_message(batch: pa.RecordBatch, line: int, end: int) -> str:
    column = batch.schema.names[-1]
    after = end - line - 2  # lines after the first, less the line break that ends the file
    swallowed = f"; the {after} line(s) after it were read into that cell" if after > 0 else ""
    return (
        f"line {line}: the quoted cell of column {column!r} is never closed, the file ends "
        f"inside it (a stray quote, or a file cut short){swallowed}"
    )
