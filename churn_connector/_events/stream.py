"""The events stream: slices -> validation -> wire bytes -> de-duplication across slices.

Each slice is validated and converted on its own, while the facts that span slices (message
ids already seen) live here, so the results of a streamed input equal those of the whole
frame. An exact repeat of an earlier row is ``skipped``; a reused id with other content is a
``message_id_conflict``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from .._inputs import iter_frames
from .._schema import timestamp_cache
from .._stream import Kind, SliceStream, WireBatch, paused_gc
from .._types import DataSource, RowState
from .options import EventOptions
from .schema import build_schema
from .wire import build_events


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


class EventStream(SliceStream):
    """Validates and converts slices of one events input; remembers the ids already seen."""

    kind: Kind = "events"

    def __init__(self, data: DataSource, options: EventOptions) -> None:
        super().__init__(build_schema(options))
        self._timestamps = timestamp_cache(self.schema)
        self.data = data
        self.options = options
        self.duplicates = 0
        self._seen = SeenIds()

    def slices(self) -> Iterator[pd.DataFrame]:
        return iter_frames(self.data, self.options.reading)

    def process(self, df: pd.DataFrame) -> WireBatch:
        """Validate and convert one slice; return the events to send (first of each id)."""
        with paused_gc():
            return self._process(df)

    def _process(self, df: pd.DataFrame) -> WireBatch:
        n = len(df)
        times = self._times(df)
        begun = self.begin(df)
        start, valid = begun.start, begun.valid
        wire = build_events(begun.work, self.options, None if times is None else times[valid])
        ids: list[str | None] = [None] * n
        for i, mid in zip(valid.tolist(), wire.ids, strict=True):
            ids[i] = mid
        self.book.set_message_ids(start, ids)
        positions = start + valid
        content = np.asarray(wire.content_keys, dtype=np.int64)
        firsts, first_content = self._seen.first(
            np.asarray(wire.id_keys, dtype=np.int64), positions, content
        )
        is_first = firsts == positions
        same = first_content == content
        for j in np.flatnonzero(~is_first).tolist():
            self._repeat(int(positions[j]), int(firsts[j]), wire.ids[j], same_content=bool(same[j]))
        kept = np.flatnonzero(is_first)
        return WireBatch(
            positions[kept].tolist(),
            [wire.ids[j] for j in kept.tolist()],
            [wire.body[j] for j in kept.tolist()],
            content[kept],
            times=wire.ms[kept],
        )

    def _times(self, df: pd.DataFrame) -> np.ndarray | None:
        """occurred_at in epoch ms, normalised once: the schema's checks reuse the result."""
        column = df["occurred_at"] if "occurred_at" in df.columns else None
        if self._timestamps is None or not isinstance(column, pd.Series):
            return None
        return self._timestamps(column).ms

    def _repeat(self, pos: int, first: int, mid: str, *, same_content: bool) -> None:
        """A row whose message id an earlier row already has: a duplicate or a conflict."""
        labels = self.book.labels
        if same_content:
            self.duplicates += 1
            self.book.set([pos], RowState.SKIPPED)
            self.book.add_error(pos, f"duplicate of row {labels[first]!r} (same message id)")
            return
        message = (
            f"message id {mid!r} is also used by row {labels[first]!r} with different "
            "content; the API would keep only the first: give each event its own id"
        )
        self.failures.fail(pos, "message_id", "message_id_conflict", mid, message)
