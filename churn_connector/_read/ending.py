"""How a text file (CSV, TSV, NDJSON; compressed or not) ends: where a cut export shows.

A writer that finishes ends its last line with a newline; a file that stops without one was
cut short (a copy or an upload that stopped), or written by a tool that leaves it off. Only
the last record can tell, and only sometimes:

* short of cells (CSV/TSV), or still inside a quoted cell or a JSON object: it was cut.
  Its row is invalid, check ``truncated`` (a problem of its slice, as a broken line is);
* whole (every cell there, the JSON object closed): nothing tells a value cut at its end
  (``123`` -> ``12``) from a whole one, so its row is read as it is and the report carries
  a note (the slice's ``notes``) naming the line, for the user to compare with the source.

Only the file's end is looked at, never each row: the readers pass what they already know
there (the newline they add before the parser sees the bytes, the last line's parse).
"""

from __future__ import annotations

from .._core import Note

__all__ = ["cut_cells", "cut_json", "cut_quote", "unterminated"]

_AGAIN = "export the file again (a whole export ends its last line with a newline)"


def cut_cells(line: int, cells: int, expected: int) -> tuple[str, str]:
    """The problem of a last line short of cells, where the file ends without a newline."""
    return (
        "truncated",
        f"line {line} has {cells} of the {expected} cells and the file ends there, without "
        f"a final newline: it was cut short; {_AGAIN}",
    )


def cut_quote(line: int, column: str | None, swallowed: int) -> tuple[str, str]:
    """The problem of a last record still inside a quoted cell, without a final newline."""
    cell = f"the quoted cell of column {column!r}" if column else "a quoted cell"
    lines = f", with the {swallowed} line(s) after it read into it" if swallowed > 0 else ""
    return (
        "truncated",
        f"line {line}: the file ends inside {cell}{lines}, without a final newline: it was "
        f"cut short (or the quote is never closed); {_AGAIN}",
    )


def cut_json(line: int) -> tuple[str, str]:
    """The problem of an NDJSON last line that stops inside its JSON, without a newline."""
    return (
        "truncated",
        f"line {line}: the file ends inside this line's JSON, without a final newline: it "
        f"was cut short; {_AGAIN}",
    )


def unterminated(name: str, line: int | None, column: str | None) -> Note:
    """The note of a file whose last record is whole but has no newline after it.

    ``line``: the last record's (None: the header is the file's only line). ``column``: the
    last cell's column (CSV/TSV), whose value a cut could have shortened unseen; None for
    NDJSON, whose last line is a whole JSON object."""
    if line is None:
        seen = "its header: no row was read; if the export had rows, it was cut short"
    elif column is not None:
        seen = (
            f"line {line}: its cells are all there and were read as written, but a value cut "
            f"at its end ('123' -> '12') looks whole; compare that line's {column!r} cell "
            "with the source (a file cut short ends so too)"
        )
    else:
        seen = (
            f"line {line}: a whole JSON object, read as written; if the export had more "
            "rows, it was cut short"
        )
    return Note(
        kind="no_final_newline",
        column=column or "",
        count=1,
        message=f"{name} ends without a final newline after {seen}; if in doubt, {_AGAIN}",
    )
