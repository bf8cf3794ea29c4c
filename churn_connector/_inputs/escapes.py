"""Escaped null markers: ``\\N`` read as written, before pyarrow unescapes it.

With an escape character, Redshift (``UNLOAD ... ESCAPE NULL AS '\\N'``) and Snowflake write
null as ``\\N`` and the text ``\\N`` as ``\\\\N``. pyarrow compares cells with null markers
after unescaping, so both would read as "N"; the bytes are rewritten on the way in instead:
each escaped marker (its escape not itself escaped) becomes ``HELD``, which pyarrow then
matches as the null marker, and which a longer cell turns back into the marker's letter.
"""

from __future__ import annotations

import io
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .text import TextFormat

# stands for an escaped null marker (``\\N``) until pyarrow has parsed the cells: pyarrow
# unescapes before it compares cells with null markers, which would read ``\\N`` as "N"
HELD = "\uffff"
HELD_BYTES = HELD.encode()


class EscapedNulls(io.RawIOBase):
    """The bytes with each escaped null marker (``\\N``, the escape not itself escaped)
    replaced by ``HELD``, never split across two reads."""

    def __init__(self, raw: Any, escape: str, marker: str) -> None:
        self.raw = raw
        self.escape = escape.encode()
        self.letter = marker[1:].encode()
        self.pattern = re.compile(re.escape(self.escape) + b"(.)", re.DOTALL)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data: bytes = self.raw.read(size)
        while data and (len(data) - len(data.rstrip(self.escape))) % 2:
            more = self.raw.read(1)
            if not more:
                break
            data += more
        if HELD_BYTES in data:
            raise ValueError("the file holds U+FFFF, which is not text: it cannot be read")
        return self.pattern.sub(self._swap, data)

    def _swap(self, match: re.Match[bytes]) -> bytes:
        return HELD_BYTES if match.group(1) == self.letter else match.group(0)

    def close(self) -> None:
        self.raw.close()
        super().close()


def escaped_marker(text: TextFormat) -> str | None:
    """The null marker that starts with the escape character (``\\N``), if any."""
    if text.escape is None or text.null is None:
        return None
    return next((m for m in text.null if m.startswith(text.escape)), None)


def unhold(batch: pa.RecordBatch, marker: str) -> pa.RecordBatch:
    """Inside a longer cell, an escaped marker letter is that letter (as pyarrow reads any
    escaped character)."""
    columns = [pc.replace_substring(c, HELD, marker[1:]) for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
