"""Where a sync's watermark may go after a run: never past a row that may need sending again.

A row is settled when its state is final and sending it again would change nothing: sent,
skipped, invalid, rejected, held or expired. A row ``failed`` (gave up, or the run stopped:
outcome unknown) or never read is not. By a cursor, the new watermark W keeps this true:
*every row whose cursor is at most W is settled* (late rows aside: the lookback's job).
With L the lower bound the run read above (the old watermark less the lookback; none on a
first run) and m the lowest cursor of a row not settled, W is the highest of

* the cursors read below m (strictly: a row of cursor m, or one equal to it not yet read,
  may need sending, so W stays below that value, never at it);
* L (every row at or below it was settled before, and none was read);
* the old watermark, when it is below m (the rows between L and it were all read again).

A run that did not read its input to the end knows m only if it read in cursor order (a
query: ``ORDER BY``): the rows not read have cursors at or above the last one read, which
then counts as unsettled. Otherwise it leaves the watermark where it was. By versions and
snapshots (a table's log), the position moves to the one read only when every row of the
run is settled; by files, each file moves on its own.
"""

from __future__ import annotations

import numpy as np

from .._core import RowBook, RowState
from .cursor import Value
from .tap import NULL, Tap

__all__ = ["SETTLED", "settled_files", "unsettled", "watermark_after"]

SETTLED = (
    RowState.SENT,
    RowState.SKIPPED,
    RowState.INVALID,
    RowState.REJECTED,
    RowState.HELD,
    RowState.EXPIRED,
)
_SETTLED = np.array([int(s) for s in SETTLED], dtype=np.int8)


def unsettled(book: RowBook, tap: Tap) -> bool:
    """Whether any row of the run may need sending again (or was never read)."""
    status = book.status
    if not tap.finished or len(status) != tap.rows:
        return True
    return bool(len(status)) and not bool(np.isin(status, _SETTLED).all())


def watermark_after(
    book: RowBook, tap: Tap, *, lower: Value | None, old: Value | None, ordered: bool
) -> Value | None:
    """The highest watermark this run allows (see the module); None: none at all."""
    status = book.status
    complete = tap.finished and len(status) == tap.rows
    lowest = np.iinfo(np.int64).max  # m: the lowest cursor of a row not settled
    for lo, codes in tap.codes():
        states = status[lo : lo + len(codes)]
        if len(states) < len(codes):  # the book has fewer rows than were read: not yet in it
            codes, states = codes[: len(states)], states
        open_rows = ~np.isin(states, _SETTLED) & (codes != NULL)
        if open_rows.any():
            lowest = min(lowest, int(codes[open_rows].min()))
    if not complete:
        if not ordered or tap.last is None:
            return old
        lowest = min(lowest, tap.last)
    best: int | None = None
    for _, codes in tap.codes():
        below = codes[(codes != NULL) & (codes < lowest)]
        if len(below):
            top = int(below.max())
            best = top if best is None else max(best, top)
    candidates = [c for c in (best,) if c is not None]
    if lower is not None:
        candidates.append(lower.code)
    if old is not None and old.code < lowest:
        candidates.append(old.code)
    if not candidates:
        return None
    kind = tap.type or (old.type if old is not None else lower.type if lower is not None else None)
    if kind is None:
        return old
    return Value(kind, max(candidates))


def settled_files(book: RowBook, tap: Tap) -> list[str]:
    """The files of a folder sync read to their end, whose every row is settled."""
    status = book.status
    files = tap.files or []
    done = []
    for k, (name, first, count) in enumerate(files):
        if k == len(files) - 1 and not tap.finished:
            break  # the file being read when the run stopped: its other rows were not
        states = status[first : first + count]
        if len(states) == count and bool(np.isin(states, _SETTLED).all()):
            done.append(name)
    return done
