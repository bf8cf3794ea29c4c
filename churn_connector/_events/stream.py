"""The events stream: slices -> validation -> wire bytes -> de-duplication across slices.

Each slice is validated and converted on its own, while the facts that span slices (message
ids already seen) live here, so the results of a streamed input equal those of the whole
frame. An exact repeat of an earlier row is ``skipped``; a reused id with other content is a
``message_id_conflict``.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa

from .._core import DataSource, IdColumn, Kind, Note, RowBook, option, rows_text
from .._options import EventOptions
from .._read import Slice, as_slice, iter_slices, pinned, word_styler
from .._slices import SliceStream, paused_gc
from .._validate import timestamp_cache
from .._wire import GivenIds, HashedIds, IdTexts, WireBatch, build_events, natural_keys_of
from .schema import build_schema
from .seen import SeenIds

_SHOWN = 10  # rewritten event types a note names; the rest are counted


class EventStream(SliceStream):
    """Validates and converts slices of one events input; remembers the ids already seen."""

    kind: Kind = "events"

    def __init__(self, data: DataSource, options: EventOptions) -> None:
        super().__init__(build_schema(options))
        self._timestamps = timestamp_cache(self.schema)
        # a Delta or Iceberg table pinned at its version: the whole run reads that one
        self.data = pinned(data, options.reading)
        self.options = options
        self.duplicates = 0
        # batches carry their natural keys (a ledger's re-id guard asks for them)
        self.natural_keys = False
        self._seen = SeenIds()
        self._content: list[tuple[int, HashedIds]] = []  # content digests, when ids are not
        self._collided: dict[bytes, int] = {}  # ids whose 64-bit key an earlier id has
        self._restyled_types: Counter[tuple[str, str]] = Counter()  # (original, new): rows
        # slices (with valid rows) by the path that wrote their bytes: the per-row count
        # is the column-wise path's fallbacks (each logged with its reason at DEBUG)
        self.wire_paths = Counter({"columnar": 0, "per_row": 0})

    def reserve(self, rows: int) -> None:
        super().reserve(rows)
        self._seen.reserve(rows)

    def expect(self, rows: int) -> None:
        # a guess: the index takes ids beyond it exactly (SeenIds.reserve)
        self._seen.reserve(rows)

    def slices(self) -> Iterator[Slice]:
        parts = self.tapped(iter_slices(self.data, self.options.reading))
        if self.options.event_type_style is None:
            return parts
        return (self._restyled(part) for part in parts)

    def _restyled(self, part: Slice) -> Slice:
        """The slice with its event types in ``event_type_style``; each rewrite is counted.

        Applied as the slice is read, so the report's valid rows hold what is sent. Event
        types repeat a lot: each distinct one is rewritten once.
        """
        df = part.frame
        column = df.get("event_type")
        style = self.options.event_type_style
        if not isinstance(column, pd.Series) or style is None:
            return part
        codes, uniques = pd.factorize(column)
        word = word_styler(style)
        changed = {u: word(u) for u in uniques if isinstance(u, str) and word(u) != u}
        if not changed:
            return part
        counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
        for i, original in enumerate(uniques):
            if original in changed:
                self._restyled_types[original, changed[original]] += int(counts[i])
        return part.with_frame(df.assign(event_type=column.replace(changed)))

    def notes(self) -> list[Note]:
        """With ``event_type_style``: which event types it rewrote, on how many rows."""
        if not self._restyled_types:
            return super().notes()
        total = sum(self._restyled_types.values())
        ranked = self._restyled_types.most_common()
        mappings = ", ".join(f"{a!r} -> {b!r} ({n:,})" for (a, b), n in ranked[:_SHOWN])
        more = f" and {len(ranked) - _SHOWN:,} more" if len(ranked) > _SHOWN else ""
        style = option("event_type_style", self.options.event_type_style)
        message = f"{style} rewrote the event types of {total:,} rows: {mappings}{more}"
        return [
            *super().notes(),
            Note(kind="event_types_restyled", column="event_type", count=total, message=message),
        ]

    def process(self, part: Slice | pd.DataFrame) -> WireBatch:
        """Validate and convert one slice; return the events to send (first of each id)."""
        with paused_gc():
            return self._process(as_slice(part))

    def _process(self, part: Slice) -> WireBatch:
        n = len(part)
        times = self._times(part.frame)
        begun = self.begin(part)
        start, valid = begun.start, begun.valid
        wire = build_events(
            begun.work,
            self.options,
            None if times is None else times[valid],
            natural=self.natural_keys,
            parsed=begun.parsed,
        )
        natural = (
            natural_keys_of(begun.work, wire.ms, wire.natural)
            if self.natural_keys and wire.given is None
            else None
        )
        if len(wire.ms):
            newest = int(wire.ms.max())
            if self.newest_ms is None or newest > self.newest_ms:
                self.newest_ms = newest
        if wire.path is not None:
            self.wire_paths[wire.path] += 1
        hashed = wire.given is None and not self.options.id_columns
        column: IdColumn = (
            HashedIds(n, valid, wire.digests, self.book.spill)
            if wire.given is None
            else GivenIds(n, valid, wire.given)
        )
        self.book.set_message_ids(start, column)
        if not hashed:
            # an id that is not a hash of the whole event may come back with other content
            self._content.append((start, HashedIds(n, valid, wire.content, self.book.spill)))
        positions = start + valid
        firsts = self._seen.firsts(wire.id_keys, positions)
        repeats = np.flatnonzero(firsts != positions)
        is_first = np.ones(len(positions), dtype=bool)
        skipped: list[int] = []  # repeats of an earlier row's id and content, as indexes
        for j in repeats.tolist():
            first, pos = int(firsts[j]), int(positions[j])
            digest = wire.digests[j].tobytes()
            if self._digest(self.book, first) != digest:
                # a 64-bit collision of two different ids: the full digest decides
                if digest not in self._collided:
                    self._collided[digest] = pos
                    continue
                first = self._collided[digest]
            is_first[j] = False
            firsts[j] = first
            if hashed or self._content_digest(first) == wire.content[j].tobytes():
                skipped.append(j)
            else:
                self._conflict(pos, first, wire.ids()[j])
        if skipped:
            self.duplicates += len(skipped)
            self.book.skip_repeats(positions[skipped], firsts[skipped])
        if is_first.all():  # no repeats (the common case): nothing to copy
            return WireBatch(
                positions.tolist(),
                IdTexts(wire.digests) if wire.given is None else wire.given,
                wire.body,
                wire.content_keys,
                times=wire.ms,
                natural=natural,
            )
        kept = np.flatnonzero(is_first)
        keys: Sequence[str] = (
            IdTexts(wire.digests[kept])
            if wire.given is None
            else [wire.given[j] for j in kept.tolist()]
        )
        return WireBatch(
            positions[kept].tolist(),
            keys,
            wire.body.take(pa.array(kept, pa.int64())),
            wire.content_keys[kept],
            times=wire.ms[kept],
            natural=None if natural is None else natural.take(kept),
        )

    @staticmethod
    def _digest(book: RowBook, position: int) -> bytes:
        found = book.id_column_at(position)
        assert found is not None
        column, i = found
        return cast("HashedIds | GivenIds", column).digest(i)

    def _content_digest(self, position: int) -> bytes:
        starts = [start for start, _ in self._content]
        k = bisect.bisect_right(starts, position) - 1
        start, column = self._content[k]
        return column.digest(position - start)

    def _times(self, df: pd.DataFrame) -> np.ndarray | None:
        """occurred_at in epoch ms, normalised once: the schema's checks reuse the result."""
        column = df["occurred_at"] if "occurred_at" in df.columns else None
        if self._timestamps is None or not isinstance(column, pd.Series):
            return None
        return self._timestamps(column).ms

    def _conflict(self, pos: int, first: int, mid: str) -> None:
        """A row whose message id an earlier row has with other content."""
        labels = self.book.labels
        message = (
            f"message id {mid!r} is also used by {rows_text([labels[first]])} with different "
            "content; the API would keep only the first: give each event its own id"
        )
        self.failures.fail(pos, "message_id", "message_id_conflict", mid, message)
