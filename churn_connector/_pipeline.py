"""The events stream: slices -> validation -> wire bytes -> de-duplication across slices.

Each slice is validated and converted on its own, while the few facts that span slices
(message ids already seen, table-level failures already reported) live here, so the
results of a streamed input equal those of the whole frame.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from ._ledger import ScopedLedger
from ._results import INVALID, SKIPPED, RowBook
from ._validation import FailureLog, failure_record, run_schema
from ._wire import EventOptions, build_events

Item = tuple[int, bytes]  # (row position, wire bytes of one event)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic collector while a slice is converted.

    Converting builds several small dicts per row and no reference cycles; the collector's
    repeated scans of them cost ~40% of the time (benchmarks/bench_events.py).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class SeenIds:
    """Message ids seen so far (64-bit keys), the first row of each and its content key.

    Sorted numpy arrays (24 bytes a row) instead of a dict (~100): membership is a
    vectorised searchsorted per slice, and new keys are merged in once per slice.
    """

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.int64)
        self.first_pos = np.empty(0, dtype=np.int64)
        self.content = np.empty(0, dtype=np.int64)

    def first(
        self, keys: np.ndarray, positions: np.ndarray, content: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each row: the position and content key of the first row with its id.

        Rows of this slice are registered; a row whose id is new is its own first.
        """
        if len(keys) == 0:
            return positions.copy(), content.copy()
        uniq, first_idx, inverse = np.unique(keys, return_index=True, return_inverse=True)
        loc = np.searchsorted(self.keys, uniq)
        clipped = np.minimum(loc, max(len(self.keys) - 1, 0))
        found = (
            (loc < len(self.keys)) & (self.keys[clipped] == uniq)
            if len(self.keys)
            else (np.zeros(len(uniq), dtype=bool))
        )
        uniq_pos = np.where(
            found, self.first_pos[clipped] if len(self.keys) else 0, positions[first_idx]
        )
        uniq_content = np.where(
            found, self.content[clipped] if len(self.keys) else 0, content[first_idx]
        )
        new = ~found
        if new.any():
            keys_all = np.concatenate([self.keys, uniq[new]])
            order = np.argsort(keys_all, kind="stable")
            self.keys = keys_all[order]
            self.first_pos = np.concatenate([self.first_pos, uniq_pos[new]])[order]
            self.content = np.concatenate([self.content, uniq_content[new]])[order]
        return uniq_pos[inverse], uniq_content[inverse]


class EventStream:
    """Validates and converts slices of one events input; remembers what spans slices."""

    def __init__(self, schema: pa.DataFrameSchema, options: EventOptions) -> None:
        self.schema = schema
        self.options = options
        self.book = RowBook()
        self.log = FailureLog()
        self.failures = self.log.records
        self.duplicates = 0
        self._seen = SeenIds()
        self.ledger: ScopedLedger | None = None
        self.pending: dict[int, tuple[str, str]] = {}  # position -> ledger entry once sent

    def process(self, df: pd.DataFrame, keep_valid: bool = False) -> tuple[list[Item], Any]:
        """Handle one slice; return the events to send and (optionally) the wire events."""
        with paused_gc():
            return self._process(df, keep_valid)

    def _process(self, df: pd.DataFrame, keep_valid: bool) -> tuple[list[Item], Any]:
        n = len(df)
        start = self.book.extend(df.index)
        result = run_schema(df, self.schema, start, df.index)
        self.log.add(result.records, self.book, start, n)
        invalid = np.flatnonzero(result.invalid)
        self.book.set(start + invalid, INVALID)
        valid = np.flatnonzero(~result.invalid)
        work = df.iloc[valid].set_axis(pd.RangeIndex(len(valid)), axis=0)
        wire = build_events(work, self.options)
        ids: list[str | None] = [None] * n
        for i, mid in zip(valid.tolist(), wire.ids, strict=True):
            ids[i] = mid
        self.book.set_message_ids(start, ids)
        positions = start + valid
        firsts, first_content = self._seen.first(
            np.asarray(wire.id_keys, dtype=np.int64),
            positions,
            np.asarray(wire.content_keys, dtype=np.int64),
        )
        is_first = firsts == positions
        kept = np.flatnonzero(is_first).tolist()
        items: list[Item] = [(int(positions[j]), wire.body[j]) for j in kept]
        same = first_content == np.asarray(wire.content_keys, dtype=np.int64)
        for j in np.flatnonzero(~is_first).tolist():
            self._repeat(int(positions[j]), int(firsts[j]), wire.ids[j], bool(same[j]))
        if self.ledger is not None and items:
            items = self._against_ledger(
                items, [wire.ids[j] for j in kept], [wire.content_keys[j] for j in kept]
            )
        return items, (wire, kept) if keep_valid else None

    def _against_ledger(self, items: list[Item], ids: list[str], contents: list[int]) -> list[Item]:
        """Skip events the ledger says were acknowledged; note the rest for recording."""
        assert self.ledger is not None
        known = self.ledger.known("events", ids)
        out: list[Item] = []
        for (pos, body), mid, content in zip(items, ids, contents, strict=True):
            dig = f"{content & 0xFFFF_FFFF_FFFF_FFFF:016x}"
            previous = known.get(mid)
            if previous is None:
                self.pending[pos] = (mid, dig)
                out.append((pos, body))
            elif previous == dig:
                self.book.set([pos], SKIPPED)
                self.book.add_error(pos, "already delivered (ledger)")
            else:
                message = (
                    f"message id {mid!r} was acknowledged before with different content "
                    "(ledger): the API keeps the first; give this event its own id"
                )
                self.failures.append(
                    failure_record(
                        self.book.labels[pos],
                        pos,
                        "message_id",
                        "message_id_conflict",
                        mid,
                        message,
                    )
                )
                self.book.set([pos], INVALID)
                self.book.add_error(pos, f"[message_id_conflict] {message}")
        return out

    def _repeat(self, pos: int, first: int, mid: str, same_content: bool) -> None:
        """A row whose message id an earlier row already has: a duplicate or a conflict."""
        labels = self.book.labels
        if same_content:
            self.duplicates += 1
            self.book.set([pos], SKIPPED)
            self.book.add_error(pos, f"duplicate of row {labels[first]!r} (same message id)")
            return
        message = (
            f"message id {mid!r} is also used by row {labels[first]!r} with different "
            "content; the API would keep only the first: give each event its own id"
        )
        self.failures.append(
            failure_record(labels[pos], pos, "message_id", "message_id_conflict", mid, message)
        )
        self.book.set([pos], INVALID)
        self.book.add_error(pos, f"[message_id_conflict] {message}")

    def run(self, frames: Iterator[pd.DataFrame]) -> Iterator[list[Item]]:
        for df in frames:
            yield self.process(df)[0]
