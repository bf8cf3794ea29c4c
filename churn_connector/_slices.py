"""A resource's input, slice by slice: what both wings' streams share (slices in, wire out).

A stream (the ``Stream`` protocol; each wing's ``stream``) reads its input in slices (a
``_read.Slice``: the frame, and what its reader says of its rows); for each slice it extends
the row book, runs the schema, records failures (the reader's problems among them) and marks
invalid rows (``SliceStream.begin``, the same for events and identities), then turns the
valid rows into a ``WireBatch`` (``_wire``). What spans slices (ids already seen, duplicate users,
table-level failures) lives on the stream, so a streamed input gives the same results as one
whole frame. ``batches`` hands a send its batches (the ledger and the sender take them from
here); ``report`` validates every slice and sends nothing.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ._core import Kind, Note, RowBook, RowState
from ._json import ParsedTexts
from ._options import utc_now
from ._read import DEFAULT_TEXT, Fingerprinter, Slice, as_slice
from ._validate import (
    FailureLog,
    TrackingPlan,
    ValidationReport,
    failures_frame,
    pa,
    plan_failures,
    run_schema,
)
from ._wire import WireBatch

__all__ = [
    "SliceStream",
    "Stream",
    "Tap",
    "batches",
    "paused_gc",
    "report",
    "without_valid_rows",
]

FIRST_ROWS = 2_000  # rows processed alone at the start of a send: four full requests
Tap = Callable[[Iterator[Slice]], Iterator[Slice]]
"""What watches a stream's slices as they are read, in order (a sync's cursor: ``_sync``)."""
_NAMED_FILES = 3  # files without a final newline named one by one in the notes


class Stream(Protocol):
    """What the client, the reports and the integrations need of a resource's stream."""

    kind: Kind
    data: Any  # the input (identities: made replayable), e.g. for its length up front
    book: RowBook
    failures: FailureLog
    duplicates: int  # rows skipped as exact repeats of an earlier row
    wire_paths: Counter[str]  # events: slices by the wire path that wrote them
    natural_keys: bool  # events: batches carry their natural keys (a ledger's re-id guard)
    newest_ms: int | None  # events: the newest valid occurred_at (epoch ms), for max_lag
    tap: Tap | None  # watches the slices a send reads (an incremental sync's cursor)

    @property
    def fingerprinter(self) -> Fingerprinter:
        """What was read, for reports, rows files and receipts."""
        ...

    def slices(self) -> Iterator[Slice]:
        """The input, read once more from the start, in slices."""
        ...

    def process(self, part: Slice | pd.DataFrame) -> WireBatch:
        """Validate and convert one slice (a frame alone: one its reader says nothing of);
        return what is to be sent."""
        ...

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all, when the input's length is known up front."""
        ...

    def expect(self, rows: int) -> None:
        """Size what a guess of the input's rows may size (a database's estimate)."""
        ...

    def notes(self) -> list[Note]:
        """What the report says beyond failures, over the slices processed so far."""
        ...


@dataclass
class SliceStart:
    """A slice after validation: where it starts in the book, its valid rows, and what
    validation parsed of them (for the wire step)."""

    start: int
    valid: np.ndarray  # positions within the slice
    work: pd.DataFrame  # the valid rows, relabelled 0..n-1
    parsed: ParsedTexts  # ``work``'s JSON-object texts, as validation parsed them


class SliceStream:
    """The steps every slice of every resource starts with."""

    kind: Kind
    duplicates = 0
    natural_keys = False
    newest_ms: int | None = None  # events: the newest valid occurred_at, epoch ms
    tap: Tap | None = None

    def __init__(self, schema: pa.DataFrameSchema) -> None:
        self.schema = schema
        self.book = RowBook()
        self.failures = FailureLog(self.book)
        self.wire_paths: Counter[str] = Counter()
        self.read_notes: dict[str, Note] = {}  # the reader's notes, by their text
        self.plan_unknown: Counter[str] = Counter()  # unknown_events="warn": rows by type

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all, when the input's length is known up front."""
        self.book.reserve(rows)

    def expect(self, rows: int) -> None:
        """Size what may be sized by a guess of the input's rows (a database's estimate):
        the events' index of message ids; nothing that counts rows."""

    def tapped(self, parts: Iterator[Slice]) -> Iterator[Slice]:
        """The slices a send reads, through the tap when one watches them."""
        return parts if self.tap is None else self.tap(parts)

    def notes(self) -> list[Note]:
        """What the reader noted on the input (a text file without its final newline: the
        first few files by name, then how many more); a resource with more to say adds its
        own."""
        notes = list(self.read_notes.values())
        plan = [self._unknown_note()] if self.plan_unknown else []
        if len(notes) <= _NAMED_FILES:
            return notes + plan
        rest = len(notes) - _NAMED_FILES
        more = Note(
            kind="no_final_newline",
            column="",
            count=rest,
            message=f"{rest:,} more files end without a final newline; their last lines were "
            "read as written: if in doubt, export them again",
        )
        return [*notes[:_NAMED_FILES], more, *plan]

    def _unknown_note(self) -> Note:
        total = sum(self.plan_unknown.values())
        ranked = self.plan_unknown.most_common()
        named = ", ".join(f"{t!r} ({n:,})" for t, n in ranked[:10])
        more = f" and {len(ranked) - 10:,} more" if len(ranked) > 10 else ""
        return Note(
            kind="plan_unknown_events",
            column="event_type",
            count=total,
            message=f"{total:,} rows have event types the tracking plan lacks, sent unchecked "
            f"(unknown_events: warn): {named}{more}",
        )

    @property
    def fingerprinter(self) -> Fingerprinter:
        """The input's fingerprint, accumulated as slices begin (``_read.fingerprint``)."""
        found: Fingerprinter | None = self.__dict__.get("_fingerprinter")
        if found is None:
            options = getattr(self, "options", None)
            text = options.text if options is not None else DEFAULT_TEXT
            found = self.__dict__["_fingerprinter"] = Fingerprinter(
                getattr(self, "data", None), text
            )
        return found

    def begin(self, part: Slice | pd.DataFrame) -> SliceStart:
        """Add the slice to the book, validate it, record its failures (and the problems
        its reader found), mark invalid rows."""
        part = as_slice(part)
        df = part.frame
        n = len(df)
        self.fingerprinter.add(df)
        start = self.book.extend(df.index)
        result = run_schema(df, self.schema, start, df.index)
        for note in part.notes:
            # by its text: a slice split in two carries its reader's notes twice
            self.read_notes[note["message"]] = note
        broken, repeats = part.problems, part.repeats
        if repeats:
            # an NDJSON line that names a key twice: read last-one-wins, so its values are
            # a guess; refused by name, whatever its other checks found
            for p, (column, key, text) in sorted(repeats.items()):
                self.failures.fail(start + p, column, "repeated_key", key, text, state=None)
            result.invalid[list(repeats)] = True
        if broken:
            # a line the reader could not split into the header's cells: its own failure,
            # not the empty-cell failures of the placeholder row that keeps its place
            at = {start + p for p in broken}
            records = [r for r in result.records if r["position"] not in at]
            self.failures.add(records, start, n)
            for p, (check, text, *cell) in sorted(broken.items()):
                # a problem of one cell names its column (``\\N`` read as text)
                self.failures.fail(start + p, cell[0] if cell else None, check, None, text)
            result.invalid[list(broken)] = True
        else:
            self.failures.add(result.records, start, n)
        plan = getattr(getattr(self, "options", None), "plan", None)
        if plan is not None:
            self._check_plan(plan, df, start, result.invalid)
        self.book.set(start + np.flatnonzero(result.invalid), RowState.INVALID)
        valid = np.flatnonzero(~result.invalid)
        parsed = result.parsed
        if len(valid) == n:  # every row: no copy, and validation's parsed texts still match
            work = df.set_axis(pd.RangeIndex(n), axis=0)
        else:
            work = df.iloc[valid].set_axis(pd.RangeIndex(len(valid)), axis=0)
            parsed = parsed.of_rows(df, work, valid)
        return SliceStart(start, valid, work, parsed)

    def _check_plan(
        self, plan: TrackingPlan, df: pd.DataFrame, start: int, invalid: np.ndarray
    ) -> None:
        """The rows that meet the contract, checked against the tracking plan: a row that
        breaks it is invalid (never sent); with ``unknown_events="warn"`` the rows of
        event types it lacks are counted for a note (and sent)."""
        found = plan_failures(
            plan,
            self.kind,
            df,
            np.flatnonzero(~invalid),
            getattr(self, "options").rules,  # noqa: B009  (every stream with a plan has them)
            start,
            df.index,
        )
        for rec in found.records:
            self.failures.fail(
                rec["position"],
                rec["column"],
                rec["check"],
                rec["value"],
                rec["message"],
                state=None,
            )
        invalid[found.invalid] = True
        self.plan_unknown.update(found.unknown)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector while a slice is converted.

    Converting builds several small dicts per row and no reference cycles; the collector's
    repeated scans of them cost ~40% of the time of the per-row path.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def batches(stream: Stream, slices: Iterable[Slice] | None = None) -> Iterator[WireBatch]:
    """Every slice of the stream's input (or ``slices``: its slices, read elsewhere),
    processed; the first slice's head alone first, so the first requests leave before the
    whole first slice is built."""
    for k, part in enumerate(stream.slices() if slices is None else slices):
        head_rows = FIRST_ROWS
        while k == 0 and len(part) > 2 * head_rows:
            # heads of doubling size: requests leave while the rest of the slice is built
            head, part = part.split(head_rows)
            yield stream.process(head)
            head_rows *= 2
        yield stream.process(part)


# whether a report keeps the rows that passed (``report.valid``): the command line's
# ``validate`` without ``--passed`` needs none of them, so its memory stays flat
KEEP_VALID: ContextVar[bool] = ContextVar("keep_valid_rows", default=True)


@contextmanager
def without_valid_rows() -> Iterator[None]:
    """Reports made within keep no valid rows (their ``valid`` is empty): for a caller
    that reads only the counts, the failures and the invalid rows."""
    token = KEEP_VALID.set(False)
    try:
        yield
    finally:
        KEEP_VALID.reset(token)


def report(stream: Stream) -> ValidationReport:
    """Process every slice and report on the book and the failures; nothing is sent.

    Failures are ordered table-level first, then by row, so the report is the same
    whatever the slice size.
    """
    valid_parts: list[pd.DataFrame] = []
    invalid_parts: list[pd.DataFrame] = []
    invalid_positions: list[np.ndarray] = []
    empty: pd.DataFrame | None = None
    for part in stream.slices():
        df = part.frame
        start = len(stream.book)
        stream.process(part)
        bad = stream.book.status[start : start + len(df)] == RowState.INVALID
        if KEEP_VALID.get():
            valid_parts.append(df.iloc[np.flatnonzero(~bad)])
        if bad.any():
            invalid_parts.append(df.iloc[np.flatnonzero(bad)])
            invalid_positions.append(start + np.flatnonzero(bad))
        if empty is None:
            empty = df.iloc[:0]
    valid, invalid = _joined(valid_parts, empty), _joined(invalid_parts, empty)
    frame = failures_frame(stream.failures.records)
    order = frame["position"].fillna(-1).to_numpy(dtype=np.int64).argsort(kind="stable")
    return ValidationReport(
        stream.kind,
        valid=valid,
        failures=frame.iloc[order].reset_index(drop=True),
        n_rows=len(stream.book),
        n_invalid=int((stream.book.status == RowState.INVALID).sum()),
        duplicates=stream.duplicates,
        invalid=invalid,
        invalid_positions=(
            np.concatenate(invalid_positions) if invalid_positions else np.empty(0, np.int64)
        ),
        notes=stream.notes(),
        wire_paths=stream.wire_paths,
        source=stream.fingerprinter.source,
        fingerprint=stream.fingerprinter.result(),
        table_rows=stream.failures.table_rows,
        newest_occurred_at=None
        if stream.newest_ms is None
        else pd.Timestamp(stream.newest_ms, unit="ms", tz="UTC"),
        # the validation's now (the events' `now` option, when given): max_lag's measure
        validated_at=utc_now(getattr(getattr(stream, "options", None), "now", None)),
    )


def _joined(parts: list[pd.DataFrame], empty: pd.DataFrame | None) -> pd.DataFrame:
    """The slices' rows as one frame (no rows: the input's columns, or none at all)."""
    if not parts:
        frame = empty if empty is not None else pd.DataFrame()
    else:
        frame = pd.concat(parts) if len(parts) > 1 else parts[0]
    frame.attrs.clear()  # the report's own frames: not the input's attrs, which pandas copies
    return frame
