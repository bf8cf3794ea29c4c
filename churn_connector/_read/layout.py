r"""What a CSV/TSV file's cells say of a layout the read was not told, row by row.

Two warehouse habits that a read with the default layout takes silently for something else:

* quotes escaped with a backslash (``"say \"hi\""``, Spark's and MySQL's way) in a file read
  without ``escape=``: pyarrow ends the quoted cell at ``\"`` and reads on into the same
  cell, so ``say \hi\""`` would be sent. ``Lines`` notes the physical lines where a
  backslash-quote is followed by more of a cell (RFC 4180 allows a closing quote only
  before a delimiter or a line end), and those rows are refused, check ``quote_escaped``;
* ``\N`` cells (Snowflake, Redshift, Hive, MySQL write it for null) in a file read without
  ``null=``: the text ``\N`` would be sent as an id, a property, a trait. Rows holding such a
  cell are refused, check ``null_marker``. A quoted ``"\N"`` is the same cell to the parser;
  ``null="\\N"`` reads only the unquoted one as null.

Both name the option that reads the file as written. Only a file that holds the bytes
(``\"``, ``\N``: one substring search a block) has its cells compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._core import on_command_line, option

__all__ = ["escaped_quote_hint", "null_cells", "null_problem", "quote_problem"]


def _escape_option() -> str:
    return option("escape", "\\")


def quote_problem(line: int) -> tuple[str, str]:
    """The problem of a row whose quoted cell holds a backslash-escaped quote."""
    return (
        "quote_escaped",
        f'line {line}: a quoted cell holds \\" (a quote escaped with a backslash) followed '
        "by more of the cell; read without an escape character, the quote ends the cell "
        "and the rest is read into it as it stands, so the cell would not be what was "
        f"written: pass {_escape_option()} if the file escapes quotes so (Spark's default), "
        'else write a quote inside a quoted cell twice ("")',
    )


def escaped_quote_hint() -> str:
    """What a broken line's message adds when the line holds ``\\"``."""
    return (
        f'; the line holds \\" (a quote escaped with a backslash): if the file escapes '
        f"quotes so (Spark's default), pass {_escape_option()}"
    )


def null_cells(batch: pa.RecordBatch, marker: str) -> dict[int, list[str]]:
    """The records (by index in ``batch``) whose cells are exactly ``marker``, with the
    columns of those cells, in order; one comparison a column."""
    hits = np.zeros(batch.num_rows, dtype=bool)
    per_column: list[tuple[str, np.ndarray]] = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        equal = pc.fill_null(pc.equal(column, marker), False).to_numpy(zero_copy_only=False)
        if equal.any():
            per_column.append((name, equal))
            hits |= equal
    found: dict[int, list[str]] = {}
    for index in np.flatnonzero(hits).tolist():
        found[index] = [name for name, equal in per_column if equal[index]]
    return found


def null_problem(line: int, columns: Sequence[str]) -> tuple[str, str, str]:
    """The problem of a row holding ``\\N`` cells read as text: (check, message, column)."""
    named = ", ".join(repr(c) for c in columns)
    where = f"column {named}" if len(columns) == 1 else f"columns {named}"
    one = option("null", _MARKER)
    both = "--null '' --null '\\N'" if on_command_line() else "null=['', '\\\\N']"
    return (
        "null_marker",
        f"line {line}, {where}: the cell is \\N, which exports write for null (Snowflake, "
        "Redshift, Hive, MySQL), but this read takes it as the text \\N: pass "
        f"{one} if it means null ({both} keeps empty cells null too)",
        columns[0],
    )


_MARKER = "\\N"
