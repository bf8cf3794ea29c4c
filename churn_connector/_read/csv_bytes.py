r"""The bytes of a CSV or TSV on their way to pyarrow, and what pyarrow does not say of them.

Line endings (``\n``, ``\r\n``, a lone ``\r``) as pyarrow splits rows; which physical
lines are empty (an empty line and a line of empty cells parse alike); escaped null markers
(``\N``), which pyarrow would unescape before comparing; and whether a record is still
inside a quoted cell where the file ends, which pyarrow reads without a word.
"""

from __future__ import annotations

import codecs
import io
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .compression import open_stream
from .text import TextFormat

_NEWLINE_THEN_NEWLINE = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?=[\r\n])")
_AFTER_LINE_END = re.compile(rb"(?<=\n)|(?<=\r)(?!\n)")


def newlines(data: bytes) -> int:
    if b"\r" not in data:  # most files: a memchr, then one counting pass
        return data.count(b"\n")
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def _may_hold_blank_line(data: bytes) -> bool:
    """A newline followed by another (what _NEWLINE_THEN_NEWLINE finds) is one of these
    three pairs somewhere (CRLF then CR or LF holds LF-CR or LF-LF): a substring search,
    so the regular expression only walks the rare chunk with a blank line in it."""
    if b"\r" not in data:  # a memchr: then one pair is possible, one search finds it
        return b"\n\n" in data
    return b"\n\n" in data or b"\n\r" in data or b"\r\r" in data


class Lines(io.RawIOBase):
    """The byte stream handed to pyarrow, watched on the way.

    It never ends a chunk in ``\\r`` (the byte waits for the next chunk), so no CRLF
    straddles two of pyarrow's blocks: pyarrow 26 drops the ``\\n`` of a quoted CRLF that
    does (apache/arrow#51368). It also notes which physical lines are empty, so an empty
    line can be told from a line of empty cells, which parse alike.

    With a ``quote`` and no ``escape``, it notes the lines where a backslash-quote is
    followed by more of a cell (``escaped_quotes``); with ``null_text``, whether a ``\\N``
    comes by (``holds_null``): see ``layout``. A chunk then never ends in a backslash (or
    a backslash-quote), so neither straddles two chunks.
    """

    def __init__(
        self,
        raw: Any,
        escape: str | None = None,
        *,
        quote: str | None = None,
        delimiter: str = ",",
        null_text: bool = False,
    ) -> None:
        self.raw = raw
        self.stopped = False  # see stop()
        self.reading = 0  # calls of read() under way (pyarrow's read-ahead thread)
        self.escape = escape.encode() if escape is not None else None
        self.held = b""
        self.newlines = 0
        self.after_newline = False
        self.blank: set[int] = set()
        # the file's last line had no newline (one is added here): known once its last
        # bytes are handed on, so before pyarrow parses its last record
        self.unterminated = False
        self.needle: bytes | None = None  # a backslash-quote
        self.quote_after_backslash: re.Pattern[bytes] | None = None
        if quote is not None and escape is None:
            self.needle = b"\\" + quote.encode()
            after = b"[^" + re.escape((quote + delimiter).encode()) + b"\r\n]"
            self.quote_after_backslash = re.compile(re.escape(self.needle) + after)
        self.escaped_quotes: list[int] = []  # physical lines, ascending, each once
        self.null_text = null_text
        self.holds_null = False
        # what a chunk may not end in, so that neither straddles two chunks
        self.tails = (b"\\", self.needle) if self.needle is not None else (b"\\",)

    def readable(self) -> bool:
        return True

    def stop(self, seconds: float = 5.0) -> None:
        """End the stream for pyarrow's read-ahead, and wait until it is out of ``read``.

        pyarrow reads ahead on a thread of its own, which calls ``read`` here: a reader
        that failed (a record longer than its block) may leave that thread inside it, and
        a thread that calls into Python while the interpreter exits aborts the process
        (``Fatal Python error: PyGILState_Release``). From now on ``read`` says the stream
        ended, so the read-ahead stops; this returns once no call is left inside it."""
        self.stopped = True
        deadline = time.monotonic() + seconds
        quiet = 0
        while quiet < 2 and time.monotonic() < deadline:
            quiet = quiet + 1 if self.reading == 0 else 0
            time.sleep(0.01)

    def read(self, size: int = -1) -> bytes:
        if self.stopped:
            return b""
        self.reading += 1
        try:
            return self._read(size)
        finally:
            self.reading -= 1

    def _read(self, size: int = -1) -> bytes:
        want = size if size is None or size < 0 else max(size - len(self.held), 1)
        data: bytes = self.held + self.raw.read(want)
        self.held = b""
        if data and not data.endswith(b"\n"):
            more = self.raw.read(1)
            if not more and not data.endswith(b"\r"):
                # the last line lacks its newline: pyarrow cannot read a lone header so
                data += b"\n"
                self.unterminated = True
            elif more and data.endswith(b"\r"):
                data, self.held = data[:-1], b"\r" + more
            elif more and self._watching() and len(data) > 2 and data.endswith(self.tails):
                cut = 1 if data.endswith(b"\\") else len(self.tails[-1])
                data, self.held = data[:-cut], data[-cut:] + more
            else:
                self.held = more
        self._watch(data)
        return data

    def _watching(self) -> bool:
        return self.needle is not None or self.null_text

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _watch(self, data: bytes) -> None:
        if not data:
            return
        if self.after_newline and data[:1] in (b"\n", b"\r"):
            self.blank.add(self.newlines + 1)
        seen, done = self.newlines, 0
        matches = _NEWLINE_THEN_NEWLINE.finditer(data) if _may_hold_blank_line(data) else ()
        for match in matches:
            seen += newlines(data[done : match.end()])
            done = match.end()
            if not self._escaped(data, match.start()):
                self.blank.add(seen + 1)  # the line after this newline is empty
        # one memchr for a backslash first: a search for two bytes walks the chunk about
        # ten times slower (0.27 s against 0.02 s for 100 MB), and most files hold none
        if self._watching() and b"\\" in data:
            if self.needle is not None and self.needle in data:
                self._note_escaped_quotes(data)
            if self.null_text and not self.holds_null and b"\\N" in data:
                self.holds_null = True
        self.newlines += newlines(data)
        ends = data.endswith((b"\n", b"\r"))
        self.after_newline = ends and not self._escaped(data, len(data) - 1)

    def _note_escaped_quotes(self, data: bytes) -> None:
        assert self.quote_after_backslash is not None
        line, done = self.newlines + 1, 0
        for match in self.quote_after_backslash.finditer(data):
            at = match.start()
            line += data.count(b"\n", done, at) + data.count(b"\r", done, at)
            line -= data.count(b"\r\n", done, at)
            done = at
            if not self.escaped_quotes or self.escaped_quotes[-1] != line:
                self.escaped_quotes.append(line)

    def _escaped(self, data: bytes, at: int) -> bool:
        """The byte at ``at`` follows an escape (so an escaped newline ends no line)."""
        if self.escape is None:
            return False
        run = len(data[:at]) - len(data[:at].rstrip(self.escape))
        return run % 2 == 1


def decoded_lines(raw: Any, encoding: str) -> Iterator[str]:
    """The text's lines, each with its ending: ``\n``, ``\r\n`` or a lone ``\r`` (Excel
    for Mac's "CSV (Macintosh)"), as pyarrow splits the rows; decoded line by line, so a
    bad byte further down is not blamed on the header."""
    lines = io.BufferedReader(raw, buffer_size=1 << 16)
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    rest = b""
    # at most 64 KiB at a time: a file whose lines end in \r alone has no \n to stop at
    while chunk := lines.readline(1 << 16):
        if chunk.endswith(b"\r") and lines.peek(1)[:1] == b"\n":
            chunk += lines.read(1)
        *ended, rest = _AFTER_LINE_END.split(rest + chunk)
        for line in ended:
            yield decoder.decode(line)
    if rest:
        yield decoder.decode(rest)


def ends_inside_quote(
    path: Path, line: int, encoding: str, delimiter: str, quote: str, escape: str | None
) -> bool:
    """Whether the record that starts on ``line`` leaves a quoted cell open at the end of
    the file, read as pyarrow reads it (the file is read again from that line: only the
    rare last record whose last cell ends in a line break is looked at)."""
    with open_stream(path) as raw:
        lines = decoded_lines(raw, encoding)
        for _ in range(line - 1):
            if next(lines, None) is None:
                return False
        rest = "".join(lines)
    return open_quote(rest, delimiter, quote, escape)


def open_quote(text: str, delimiter: str, quote: str, escape: str | None) -> bool:
    """pyarrow's reading of CSV text: a quote opens a cell only at the cell's start, a
    doubled quote inside is one quote, the escape character takes the next one as it is,
    and a closing quote may be followed by more of the cell. True: the text ends inside
    a quoted cell."""
    i, n, start = 0, len(text), True
    while i < n:
        c = text[i]
        if start and c == quote:
            i += 1
            while True:  # inside the quotes: jump from quote to quote
                j = text.find(quote, i)
                k = text.find(escape, i, j if j >= 0 else n) if escape else -1
                if k >= 0:
                    i = k + 2
                    continue
                if j < 0:
                    return True
                if text.startswith(quote, j + 1):
                    i = j + 2
                    continue
                i = j + 1
                break
            start = False
            continue
        if escape and c == escape:
            i += 2
            start = False
            continue
        start = c == delimiter or c in "\r\n"
        i += 1
    return False


# ------------------------------------------------------------------------------------------
# Escaped null markers: ``\N`` read as written, before pyarrow unescapes it.

# stands for an escaped null marker (``\\N``) until pyarrow has parsed the cells: pyarrow
# unescapes before it compares cells with null markers, which would read ``\\N`` as "N"
HELD = "\uffff"
HELD_BYTES = HELD.encode()


class EscapedNulls(io.RawIOBase):
    """The bytes with each escaped null marker (``\\N``, the escape not itself escaped)
    replaced by ``HELD``, never split across two reads."""

    def __init__(self, raw: Any, escape: str, marker: str) -> None:
        self.raw = raw
        self.stopped = False  # see stop()
        self.reading = 0  # calls of read() under way (pyarrow's read-ahead thread)
        self.escape = escape.encode()
        self.letter = marker[1:].encode()
        self.pattern = re.compile(re.escape(self.escape) + b"(.)", re.DOTALL)
        self.sequence = self.escape + self.letter
        self.swapped = False  # a chunk held the marker's bytes: its cells are worth a look

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
        if self.sequence not in data:  # most chunks: one search, no escape walked
            return data
        self.swapped = True
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
