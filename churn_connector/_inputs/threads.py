"""Which inputs must be read on the caller's thread.

Reading a generator, a database cursor, a reader or a DuckDB relation runs the caller's
objects, and those may be bound to the thread that made them: sqlite3 refuses other
threads (``pd.read_sql(query, sqlite3_connection, chunksize=...)``), a DuckDB relation
blocks its connection until read. So they are read only on the thread that called us.
Inputs the package reads itself (paths) or that are plain data in memory (a DataFrame, a
table, an eager polars frame, a finished spool) may be read on any thread.
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from .arrow import is_arrow, is_one_shot
from .spool import SpooledArrow


def read_by_caller(data: Any) -> bool:
    """True when reading ``data`` calls into the caller's objects (see the module)."""
    if isinstance(data, str | os.PathLike | pd.DataFrame):
        return False
    if isinstance(data, SpooledArrow):
        return data.num_rows is None  # not read through yet: the source itself is read
    if is_arrow(data):
        return is_one_shot(data)
    if isinstance(data, list | tuple):
        return any(read_by_caller(item) for item in data)
    return True  # an iterator, a generator, any other iterable: the caller's code
