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

from .._core.book import IdColumn, RowBook
from .._core.types import DataSource, Kind, Note, RowState
from .._core.words import option, rows_text
from .._read import iter_frames
from .._read.names import word_styler
from .._stream import SliceStream, WireBatch, paused_gc
from .._validate.schema import timestamp_cache
from .ids import GivenIds, HashedIds, IdTexts
from .options import EventOptions
from .schema import build_schema
from .wire import build_events


class SeenIds:
    """Message ids seen so far: hash tables of 32-bit fingerprints of their 64-bit keys,
    with each id's first position (8 bytes a slot, 9-16 bytes an id).

    The keys are mixed (an odd multiplier: distinct keys stay distinct), the top 4 bits pick
    one of 16 tables, so a table that grows rehashes only its own share, and the next 32
    bits are the fingerprint the table stores. A slice's keys are probed and stored a table
    at a time with numpy, at a cost that does not depend on how many ids were seen before:
    n ids cost O(n) in all. A match is only a candidate (two keys may share 36 bits): the
    caller confirms it against the full 16-byte digests, so it never makes two events one.
    """

    def __init__(self) -> None:
        self._tables = [_Table(_MIN_BUCKETS) for _ in range(1 << _PART_BITS)]

    def reserve(self, ids: int) -> None:
        """Size the tables for ``ids`` ids at most, before any is stored: a known input
        never rehashes, and its tables end near 80% full (10 bytes an id) instead of
        anywhere from 50% to 85% (9-16) with a rehash's copies on top."""
        if any(table.count for table in self._tables):
            return
        share = ids / len(self._tables)
        # the busiest table's share: a few standard deviations over the mean
        busiest = share + 4 * share**0.5
        buckets = int(busiest / (_RESERVED_LOAD * _WIDTH)) + 1
        if buckets > _MIN_BUCKETS:
            self._tables = [_Table(buckets) for _ in self._tables]

    def firsts(self, keys: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """For each row: the position of the first row with its key's fingerprint (itself
        if new). The slice's new fingerprints are registered with their first row's."""
        if len(keys) == 0:
            return positions.copy()
        # one sort: by table, then fingerprint; each table's share is one run of it
        uniq, first_idx, inverse = np.unique(
            fingerprints(keys), return_index=True, return_inverse=True
        )
        found = np.full(len(uniq), -1, dtype=np.int64)
        bounds = np.searchsorted(uniq >> np.uint64(32), np.arange(len(self._tables) + 1))
        for table, lo, hi in zip(
            self._tables, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
        ):
            if lo == hi:
                continue
            share = uniq[lo:hi].astype(np.uint32)  # the fingerprints, in order
            got = table.find(share)
            new = got < 0
            got[new] = positions[first_idx[lo:hi][new]]
            found[lo:hi] = got
            if new.any():
                table.insert(share[new], got[new].astype(np.uint32))
        out: np.ndarray = found[inverse.ravel()]
        return out


def fingerprints(keys: np.ndarray) -> np.ndarray:
    """What SeenIds compares of each 64-bit key: its table (4 bits) and 32-bit fingerprint
    (never 0), as table << 32 | fingerprint."""
    mixed = keys.astype(np.uint64) * _MIX
    prints = ((mixed << np.uint64(_PART_BITS)) >> np.uint64(32)).astype(np.uint32)
    prints[prints == 0] = 1  # 0 marks a free slot
    combined: np.ndarray = (mixed >> np.uint64(64 - _PART_BITS) << np.uint64(32)) | prints
    return combined


class _Table:
    """Open addressing in buckets of 16 fingerprints (64 bytes: one cache line).

    A fingerprint's bucket is its value scaled to the number of buckets (so a sorted run
    of fingerprints has its buckets in order); a full bucket overflows into the next one,
    and a bucket's slots fill in order, so a bucket with a free slot ends a search. Spare
    buckets past the last take the overflow (no wrapping round). The table is rehashed,
    larger, when 85% full, to 50%.
    """

    def __init__(self, buckets: int) -> None:
        self.home = buckets
        total = buckets + _SPARE
        self.prints = np.zeros((total, _WIDTH), dtype=np.uint32)  # 0: a free slot
        self.positions = np.zeros((total, _WIDTH), dtype=np.uint32)
        self.fill = np.zeros(total, dtype=np.uint8)  # the used slots of each bucket
        self.count = 0

    def bucket(self, prints: np.ndarray) -> np.ndarray:
        home: np.ndarray = (prints.astype(np.uint64) * np.uint64(self.home)) >> np.uint64(32)
        return home.astype(np.int64)

    def find(self, prints: np.ndarray) -> np.ndarray:
        """The stored position of each fingerprint, -1 where it is absent."""
        found = np.full(len(prints), -1, dtype=np.int64)
        todo = np.arange(len(prints))
        buckets = self.bucket(prints)
        while len(todo):
            match = self.prints[buckets] == prints[:, None]
            hit = match.any(axis=1)
            if hit.any():
                found[todo[hit]] = self.positions[buckets[hit], match[hit].argmax(axis=1)]
            more = ~hit & (self.fill[buckets] == _WIDTH)  # a full bucket: maybe further on
            todo, prints, buckets = todo[more], prints[more], buckets[more] + 1
        return found

    def insert(self, prints: np.ndarray, positions: np.ndarray) -> None:
        """Store absent, distinct fingerprints, sorted, with their positions."""
        if self.count + len(prints) > _MAX_LOAD * self.home * _WIDTH:
            self._grow(prints, positions)
            return
        left = self._place(prints, positions, self.bucket(prints))
        self.count += len(prints) - left
        if left:
            self._grow(prints[-left:], positions[-left:])

    def _place(self, prints: np.ndarray, positions: np.ndarray, buckets: np.ndarray) -> int:
        """Place fingerprints whose buckets are in order; the number left over (the last
        ones) when the spare buckets run out."""
        last = len(self.fill) - 1  # never filled, so that every search ends
        while len(prints):
            if buckets[-1] >= last:
                return int(np.count_nonzero(buckets >= last))
            # one bucket's fingerprints are neighbours: each takes the next free slot
            edge = np.empty(len(prints), dtype=bool)
            edge[0] = True
            np.not_equal(buckets[1:], buckets[:-1], out=edge[1:])
            start = np.flatnonzero(edge)
            sizes = np.diff(start, append=len(prints))
            slot = self.fill[buckets] + (np.arange(len(prints)) - np.repeat(start, sizes))
            fits = slot < _WIDTH
            self.prints[buckets[fits], slot[fits]] = prints[fits]
            self.positions[buckets[fits], slot[fits]] = positions[fits]
            firsts = buckets[start]
            self.fill[firsts] = np.minimum(self.fill[firsts] + sizes, _WIDTH)
            rest = ~fits
            prints, positions, buckets = prints[rest], positions[rest], buckets[rest]
            # the rest jump to the next bucket with a free slot (within _AHEAD buckets)
            free = self.fill[np.minimum(buckets[:, None] + _AHEAD, last)] < _WIDTH
            buckets = buckets + np.where(free.any(axis=1), free.argmax(axis=1) + 1, len(_AHEAD))
        return 0

    def _grow(self, prints: np.ndarray, positions: np.ndarray) -> None:
        """Rehash, with ``prints`` added, into a table at half load."""
        used = np.arange(_WIDTH) < self.fill[:, None]
        prints = np.concatenate([self.prints[used], prints])
        positions = np.concatenate([self.positions[used], positions])
        order = np.argsort(prints, kind="stable")  # nearly sorted already (bucket order)
        prints, positions = prints[order], positions[order]
        grown = _Table(max(_MIN_BUCKETS, int(len(prints) / (_GROWN_LOAD * _WIDTH)) + 1))
        left = grown._place(prints, positions, grown.bucket(prints))
        assert left == 0, "a table at half load ran out of spare buckets"
        grown.count = len(prints)
        self.__dict__.update(grown.__dict__)


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64 bits
_PART_BITS = 4  # 16 tables
_WIDTH = 16  # slots a bucket
_MIN_BUCKETS = 16
_SPARE = 32  # buckets past the last, for overflow
_AHEAD = np.arange(1, 17)
_MAX_LOAD = 0.85
_GROWN_LOAD = 0.5
_RESERVED_LOAD = 0.8


_SHOWN = 10  # rewritten event types a note names; the rest are counted


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
        self._content: list[tuple[int, HashedIds]] = []  # content digests, when ids are not
        self._collided: dict[bytes, int] = {}  # ids whose 64-bit key an earlier id has
        self._restyled_types: Counter[tuple[str, str]] = Counter()  # (original, new): rows
        # slices (with valid rows) by the path that wrote their bytes: the per-row count
        # is the column-wise path's fallbacks (each logged with its reason at DEBUG)
        self.wire_paths = Counter({"columnar": 0, "per_row": 0})

    def reserve(self, rows: int) -> None:
        super().reserve(rows)
        self._seen.reserve(rows)

    def slices(self) -> Iterator[pd.DataFrame]:
        frames = iter_frames(self.data, self.options.reading)
        if self.options.event_type_style is None:
            return frames
        return (self._restyled(df) for df in frames)

    def _restyled(self, df: pd.DataFrame) -> pd.DataFrame:
        """The slice with its event types in ``event_type_style``; each rewrite is counted.

        Applied as the slice is read, so the report's valid rows hold what is sent. Event
        types repeat a lot: each distinct one is rewritten once.
        """
        column = df.get("event_type")
        style = self.options.event_type_style
        if not isinstance(column, pd.Series) or style is None:
            return df
        codes, uniques = pd.factorize(column)
        word = word_styler(style)
        changed = {u: word(u) for u in uniques if isinstance(u, str) and word(u) != u}
        if not changed:
            return df
        counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
        for i, original in enumerate(uniques):
            if original in changed:
                self._restyled_types[original, changed[original]] += int(counts[i])
        restyled = df.assign(event_type=column.replace(changed))
        restyled.attrs = df.attrs  # the reader's notes on its rows
        return restyled

    def notes(self) -> list[Note]:
        """With ``event_type_style``: which event types it rewrote, on how many rows."""
        if not self._restyled_types:
            return []
        total = sum(self._restyled_types.values())
        ranked = self._restyled_types.most_common()
        mappings = ", ".join(f"{a!r} -> {b!r} ({n:,})" for (a, b), n in ranked[:_SHOWN])
        more = f" and {len(ranked) - _SHOWN:,} more" if len(ranked) > _SHOWN else ""
        style = option("event_type_style", self.options.event_type_style)
        message = f"{style} rewrote the event types of {total:,} rows: {mappings}{more}"
        return [
            Note(kind="event_types_restyled", column="event_type", count=total, message=message)
        ]

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
            same = hashed or self._content_digest(first) == wire.content[j].tobytes()
            self._repeat(pos, first, wire.ids()[j], same_content=same)
        if is_first.all():  # no repeats (the common case): nothing to copy
            return WireBatch(
                positions.tolist(),
                IdTexts(wire.digests) if wire.given is None else wire.given,
                wire.body,
                wire.content_keys,
                times=wire.ms,
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

    def _repeat(self, pos: int, first: int, mid: str, *, same_content: bool) -> None:
        """A row whose message id an earlier row already has: a duplicate or a conflict."""
        labels = self.book.labels
        if same_content:
            self.duplicates += 1
            self.book.set([pos], RowState.SKIPPED)
            self.book.add_error(pos, f"duplicate of {rows_text([labels[first]])} (same message id)")
            return
        message = (
            f"message id {mid!r} is also used by {rows_text([labels[first]])} with different "
            "content; the API would keep only the first: give each event its own id"
        )
        self.failures.fail(pos, "message_id", "message_id_conflict", mid, message)
