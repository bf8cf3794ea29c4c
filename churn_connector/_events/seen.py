"""The message ids seen so far (de-duplication across slices), in memory and, past a few
million ids of an input of known length, mostly on disk.

Hash tables of 32-bit fingerprints of the ids' 64-bit keys, each with the position of the
first row that had it (8 bytes a slot), answer for an input of up to ``_FROZEN_FROM`` ids.
An input reserved for more stores its ids in a frozen tier sized for all of them: 16 bits
of each fingerprint in memory (2 bytes a slot) and the positions in a temporary file read
with ``pread`` (4 bytes a slot on disk; a mapped file would count in the resident memory),
written a sixteenth of the input at a time (at least ``_PENDING_IDS``). A match is a
candidate either way: the caller confirms it against the full 16-byte digests.
"""

from __future__ import annotations

import errno
import os
import tempfile
import weakref
from typing import IO

import numpy as np

from .._core import temp_file_error

__all__ = ["SeenIds", "fingerprints"]


class SeenIds:
    """Message ids seen so far: hash tables of 32-bit fingerprints of their 64-bit keys,
    with each id's first position (8 bytes a slot, 9-16 bytes an id), or for an input
    reserved for more than ``_FROZEN_FROM`` ids a frozen tier (2.5 bytes an id in memory,
    5 on disk, and 8 for each position waiting to be written: at most 1 byte a row).

    The keys are mixed (an odd multiplier: distinct keys stay distinct), the top 4 bits pick
    one of 16 tables, so a table that grows rehashes only its own share, and the next 32
    bits are the fingerprint the table stores. A slice's keys are probed and stored a table
    at a time with numpy, at a cost that does not depend on how many ids were seen before:
    n ids cost O(n) in all. A match is only a candidate (two keys may share 36 bits, or 20
    in the frozen tier): the caller confirms it against the full 16-byte digests, so it
    never makes two events one.
    """

    def __init__(self) -> None:
        self._tables = [_Table(_MIN_BUCKETS) for _ in range(1 << _PART_BITS)]
        self._frozen: list[_Frozen] = []  # empty: every id is in the tables above
        # ids of the frozen tier whose 16 bits an earlier slot of their run of buckets has
        # (asked only when the frozen tier matches), and ids it had no room for: kept exactly
        self._kept: list[_Table] = []
        self._roomless = [False] * len(self._tables)  # a table's kept ids found no room
        self._pending: _Pending | None = None

    def reserve(self, ids: int) -> None:
        """Size the index for ``ids`` ids at most, before any is stored: a known input
        never rehashes, and its tables end near 80% full (10 bytes an id) instead of
        anywhere from 50% to 85% (9-16) with a rehash's copies on top. Past
        ``_FROZEN_FROM`` ids, a frozen tier sized for all of them holds them instead."""
        if any(table.count for table in self._tables) or self._frozen:
            return
        if ids > _FROZEN_FROM:
            self._frozen = _Frozen.tier(_buckets_for(ids), len(self._tables))
            self._kept = [_Table(_MIN_BUCKETS) for _ in self._tables]
            # a few writes of the position file in all, however large the input
            self._pending = _Pending(self._frozen[0].file, max(_PENDING_IDS, ids // 16))
            return
        buckets = _buckets_for(ids)
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
        asks: list[tuple[np.ndarray, np.ndarray]] = []  # frozen matches: their file slots
        bounds = np.searchsorted(uniq >> np.uint64(32), np.arange(len(self._tables) + 1))
        for t, lo, hi in zip(
            range(len(self._tables)), bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
        ):
            if lo == hi:
                continue
            share = uniq[lo:hi].astype(np.uint32)  # the fingerprints, in order
            own = positions[first_idx[lo:hi]]
            if self._frozen:
                found[lo:hi], older, slots = self._frozen_firsts(t, share, own)
                asks.append((lo + older, slots))
                continue
            table = self._tables[t]
            got = table.find(share)
            new = got < 0
            got[new] = own[new]
            found[lo:hi] = got
            if new.any():
                table.insert(share[new], got[new].astype(np.uint32))
        if self._pending is not None:
            if any(len(slots) for _, slots in asks):  # one look-up a slice, not a table
                at = np.concatenate([at for at, _ in asks])
                found[at] = self._pending.lookup(np.concatenate([slots for _, slots in asks]))
            self._pending.seal()
        out: np.ndarray = found[inverse.ravel()]
        return out

    def _frozen_firsts(
        self, t: int, share: np.ndarray, own: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``firsts`` for table ``t``'s sorted, distinct fingerprints with the frozen tier,
        ``own`` their first rows in the slice; the new ones are stored. Where the frozen
        tier answers, the position is the caller's to look up: the indexes and file slots
        of those are returned beside the answers."""
        kept, frozen, pending = self._kept[t], self._frozen[t], self._pending
        assert pending is not None
        got = np.full(len(share), -1, dtype=np.int64)
        if self._roomless[t]:  # kept ids the frozen tier does not have: ask every id
            got = kept.find(share)
        todo = np.flatnonzero(got < 0)
        slots = frozen.find(share[todo])
        hit = slots >= 0
        matched, slots_hit = todo[hit], slots[hit]
        if len(matched) and kept.count:
            got[matched] = kept.find(share[matched])
            older = got[matched] < 0
            matched, slots_hit = matched[older], slots_hit[older]
        asked = (matched, frozen.base + slots_hit)
        new = todo[~hit]
        if not len(new):
            return got, *asked
        got[new] = own[new]
        prints = share[new]
        home = frozen.bucket(prints)
        placed = frozen.place(prints, home)
        room = placed >= 0
        pending.add(frozen.base + placed[room], own[new][room])
        # an id placed past its home bucket, or after another of the slice in it, may find
        # an earlier slot with its 16 bits first (the rest were probed in that bucket)
        doubt = room & (placed // _WIDTH != home)
        doubt[1:] |= home[1:] == home[:-1]
        if doubt.any():
            doubt[doubt] = frozen.find(prints[doubt]) != placed[doubt]
        doubt |= ~room
        if doubt.any():
            kept.insert(prints[doubt], own[new][doubt].astype(np.uint32))
            self._roomless[t] |= not room.all()
        return got, *asked


def _buckets_for(ids: int) -> int:
    """Buckets a table needs for its share of ``ids``, filled to ``_RESERVED_LOAD``."""
    share = ids / (1 << _PART_BITS)
    # the busiest table's share: a few standard deviations over the mean
    busiest = share + 4 * share**0.5
    return int(busiest / (_RESERVED_LOAD * _WIDTH)) + 1


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
        return _home(prints, self.home)

    def find(self, prints: np.ndarray) -> np.ndarray:
        """The stored position of each fingerprint, -1 where it is absent."""
        slots = _probe(self.prints, self.fill, self.bucket(prints), prints)
        found = np.full(len(prints), -1, dtype=np.int64)
        hit = slots >= 0
        found[hit] = self.positions.reshape(-1)[slots[hit]]
        return found

    def insert(self, prints: np.ndarray, positions: np.ndarray) -> None:
        """Store absent, distinct fingerprints, sorted, with their positions."""
        if self.count + len(prints) > _MAX_LOAD * self.home * _WIDTH:
            self._grow(prints, positions)
            return
        slots = _place(self.prints, self.fill, self.bucket(prints), prints)
        placed = slots >= 0
        self.positions.reshape(-1)[slots[placed]] = positions[placed]
        self.count += int(np.count_nonzero(placed))
        if not placed.all():
            self._grow(prints[~placed], positions[~placed])

    def _grow(self, prints: np.ndarray, positions: np.ndarray) -> None:
        """Rehash, with ``prints`` added, into a table at half load."""
        used = np.arange(_WIDTH) < self.fill[:, None]
        prints = np.concatenate([self.prints[used], prints])
        positions = np.concatenate([self.positions[used], positions])
        order = np.argsort(prints, kind="stable")  # nearly sorted already (bucket order)
        prints, positions = prints[order], positions[order]
        grown = _Table(max(_MIN_BUCKETS, int(len(prints) / (_GROWN_LOAD * _WIDTH)) + 1))
        grown.insert(prints, positions)  # at half load: never short of spare buckets
        self.__dict__.update(grown.__dict__)


class _Frozen:
    """The ids of one table: the low 16 bits of each fingerprint in memory, laid out as
    ``_Table`` lays out its fingerprints (the bucket is still the whole fingerprint's), and
    each slot's position at ``4 * slot`` in its share of a temporary file.

    Sized once, never rehashed: an id that finds no room stays with the caller. A later id
    never lands before an earlier one in a run of buckets (buckets only fill, in order), so
    the first match of an id's 16 bits is its own slot unless an earlier slot shares them;
    the caller keeps those ids exactly.
    """

    def __init__(self, buckets: int, file: _PositionFile, base: int) -> None:
        self.home = buckets
        total = buckets + _SPARE
        self.prints = np.zeros((total, _WIDTH), dtype=np.uint16)  # 0: a free slot
        self.fill = np.zeros(total, dtype=np.uint8)
        self.file, self.base = file, base  # this table's first slot in the file

    @classmethod
    def tier(cls, buckets: int, tables: int) -> list[_Frozen]:
        slots = (buckets + _SPARE) * _WIDTH
        file = _PositionFile(slots * tables)
        return [cls(buckets, file, t * slots) for t in range(tables)]

    def bucket(self, prints: np.ndarray) -> np.ndarray:
        return _home(prints, self.home)

    def find(self, prints: np.ndarray) -> np.ndarray:
        """The slot of each fingerprint's first match on its 16 bits, -1 where none."""
        return _probe(self.prints, self.fill, self.bucket(prints), _low(prints))

    def place(self, prints: np.ndarray, home: np.ndarray) -> np.ndarray:
        """Store sorted, distinct fingerprints (``home``: their buckets); the slot of
        each, -1 where no room."""
        return _place(self.prints, self.fill, home, _low(prints))


class _Pending:
    """Positions of frozen slots not yet in the position file: written together once there
    are ``limit`` (the file is changed a window at a time, so a write costs about the
    whole file's reading and writing, whatever the number of slots)."""

    def __init__(self, file: _PositionFile, limit: int) -> None:
        self.file, self.limit = file, limit
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (file slots, positions), sorted
        self.staged: list[tuple[np.ndarray, np.ndarray]] = []  # the slice's so far
        self.count = 0

    def add(self, slots: np.ndarray, positions: np.ndarray) -> None:
        """Stage new slots; ``lookup`` sees them once the slice is sealed."""
        if len(slots):
            self.staged.append((slots.astype(np.uint32), positions.astype(np.uint32)))

    def seal(self) -> None:
        """End a slice: its staged slots become one sorted run; a full buffer is written."""
        if not self.staged:
            return
        slots = np.concatenate([slots for slots, _ in self.staged])
        positions = np.concatenate([positions for _, positions in self.staged])
        self.staged = []
        order = np.argsort(slots, kind="stable")  # nearly sorted: tables in file order
        self.runs.append((slots[order], positions[order]))
        self.count += len(slots)
        if self.count >= self.limit:
            self.file.write(self.runs)
            self.runs, self.count = [], 0

    def lookup(self, slots: np.ndarray) -> np.ndarray:
        """The positions at file ``slots`` (of sealed slices), as int64."""
        out = np.full(len(slots), -1, dtype=np.int64)
        slots = slots.astype(np.uint32)  # as the runs keep them (else each is cast)
        for run_slots, run_positions in self.runs:
            at = np.minimum(np.searchsorted(run_slots, slots), len(run_slots) - 1)
            here = run_slots[at] == slots
            out[here] = run_positions[at[here]]
        rest = out < 0
        if rest.any():
            out[rest] = self.file.read(slots[rest].astype(np.int64))
        return out


def _place(
    stored: np.ndarray, fill: np.ndarray, buckets: np.ndarray, keys: np.ndarray
) -> np.ndarray:
    """Store ``keys`` whose home ``buckets`` are in order in the first free slots from their
    homes on; the slot of each (``bucket * _WIDTH + column``), -1 where the spare buckets
    ran out."""
    slots = np.full(len(keys), -1, dtype=np.int64)
    todo = np.arange(len(keys))
    last = len(fill) - 1  # never filled, so that every search ends
    while len(todo):
        room = buckets < last
        todo, keys, buckets = todo[room], keys[room], buckets[room]
        if not len(todo):
            break
        # one bucket's keys are neighbours: each takes the next free slot
        edge = np.empty(len(todo), dtype=bool)
        edge[0] = True
        np.not_equal(buckets[1:], buckets[:-1], out=edge[1:])
        start = np.flatnonzero(edge)
        sizes = np.diff(start, append=len(todo))
        slot = fill[buckets] + (np.arange(len(todo)) - np.repeat(start, sizes))
        fits = slot < _WIDTH
        stored[buckets[fits], slot[fits]] = keys[fits]
        slots[todo[fits]] = buckets[fits] * _WIDTH + slot[fits]
        firsts = buckets[start]
        fill[firsts] = np.minimum(fill[firsts] + sizes, _WIDTH)
        rest = ~fits
        todo, keys, buckets = todo[rest], keys[rest], buckets[rest]
        # the rest jump to the next bucket with a free slot (within _AHEAD buckets)
        free = fill[np.minimum(buckets[:, None] + _AHEAD, last)] < _WIDTH
        buckets = buckets + np.where(free.any(axis=1), free.argmax(axis=1) + 1, len(_AHEAD))
    return slots


def _home(prints: np.ndarray, buckets: int) -> np.ndarray:
    """Each 32-bit fingerprint's home bucket of ``buckets`` (its high bits, scaled)."""
    home: np.ndarray = (prints.astype(np.uint64) * np.uint64(buckets)) >> np.uint64(32)
    return home.astype(np.int64)


def _probe(
    stored: np.ndarray, fill: np.ndarray, buckets: np.ndarray, keys: np.ndarray
) -> np.ndarray:
    """The slot (``bucket * _WIDTH + column``) of each key's first match in ``stored``,
    from its home bucket on, -1 where none: a full bucket sends the search on to the next
    one, a bucket with room ends it."""
    found = np.full(len(keys), -1, dtype=np.int64)
    todo = np.arange(len(keys))
    while len(todo):
        match = stored[buckets] == keys[:, None]
        hit = match.any(axis=1)
        if hit.any():
            found[todo[hit]] = buckets[hit] * _WIDTH + match[hit].argmax(axis=1)
        more = ~hit & (fill[buckets] == _WIDTH)
        todo, keys, buckets = todo[more], keys[more], buckets[more] + 1
    return found


def _low(prints: np.ndarray) -> np.ndarray:
    """The 16 bits of each fingerprint the frozen tier keeps (never 0: a free slot)."""
    low = (prints & np.uint32(0xFFFF)).astype(np.uint16)
    low[low == 0] = 1
    return low


class _PositionFile:
    """An unnamed temporary file of 32-bit positions by slot, read and written with
    ``pread``/``pwrite`` (a mapped file's pages would count in the resident memory)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._written = np.zeros((slots >> _WINDOW_BITS) + 1, dtype=bool)  # windows
        try:
            self._file: IO[bytes] = tempfile.TemporaryFile(prefix="churn-connector-")  # noqa: SIM115
            os.ftruncate(self._file.fileno(), 4 * slots)  # sparse: blocks come as written
        except OSError as exc:
            raise temp_file_error(exc, 5) from None
        weakref.finalize(self, self._file.close)

    def write(self, runs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Set the positions of sorted runs of (slots, positions): read, change and write
        back a window at a time (the slots are all over the file), each run's share of a
        window found by bisection (no sorting, no copy of the runs)."""
        edges = np.arange(0, self.slots + (1 << _WINDOW_BITS), 1 << _WINDOW_BITS)
        bounds = [np.searchsorted(slots, edges).tolist() for slots, _ in runs]
        raw = bytearray(4 << _WINDOW_BITS)  # a window is read into it, changed, written
        window = np.frombuffer(raw, dtype=np.uint32)
        fd = self._file.fileno()
        try:
            for w in range(len(edges) - 1):
                pieces = [
                    (slots[at[w] : at[w + 1]], positions[at[w] : at[w + 1]])
                    for (slots, positions), at in zip(runs, bounds, strict=True)
                    if at[w] < at[w + 1]
                ]
                if not pieces:
                    continue
                lo = min(int(slots[0]) for slots, _ in pieces)
                hi = max(int(slots[-1]) for slots, _ in pieces) + 1
                data = memoryview(raw)[: 4 * (hi - lo)]
                if not self._written[w]:  # a hole reads as zeros
                    window[: hi - lo] = 0
                elif os.preadv(fd, [data], 4 * lo) != len(data):
                    raise OSError(errno.EIO, "the temporary file is shorter than written")
                for slots, positions in pieces:
                    window[slots - lo] = positions
                os.pwrite(fd, data, 4 * lo)
                self._written[w] = True
        except OSError as exc:
            raise temp_file_error(exc, 5) from None

    def read(self, slots: np.ndarray) -> np.ndarray:
        """The positions at ``slots``, as int64."""
        fd = self._file.fileno()
        try:
            data = b"".join(os.pread(fd, 4, 4 * slot) for slot in slots.tolist())
        except OSError as exc:
            raise temp_file_error(exc, 5) from None
        return np.frombuffer(data, dtype=np.uint32).astype(np.int64)


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64 bits
_PART_BITS = 4  # 16 tables
_WIDTH = 16  # slots a bucket
_MIN_BUCKETS = 16
_SPARE = 32  # buckets past the last, for overflow
_AHEAD = np.arange(1, 17)
_MAX_LOAD = 0.85
_GROWN_LOAD = 0.5
_RESERVED_LOAD = 0.8
_PENDING_IDS = 1 << 21  # frozen positions kept in memory, at least, before a file write
_FROZEN_FROM = 1 << 22  # an input reserved for more ids has a frozen tier
_WINDOW_BITS = 20  # the position file is changed 1M slots (4 MB) at a time
