"""The message ids seen so far (de-duplication across slices), in memory and, past a few
million ids of an input of known length, mostly on disk.

Hash tables of 32-bit fingerprints of the ids' 64-bit keys, each with the position of the
first row that had it, answer for the last ``_HOT_IDS`` ids (8 bytes a slot). An input
reserved for more keeps the older ids in a frozen tier: 16 bits of each fingerprint in
memory (2 bytes a slot) and the positions in a temporary file read with ``pread`` (4 bytes
a slot on disk; a mapped file would count in the resident memory). A match is a candidate
either way: the caller confirms it against the full 16-byte digests.
"""

from __future__ import annotations

import errno
import os
import tempfile
import weakref
from typing import IO

import numpy as np

from .._core.storage import storage_error

__all__ = ["SeenIds", "fingerprints"]


class SeenIds:
    """Message ids seen so far: hash tables of 32-bit fingerprints of their 64-bit keys,
    with each id's first position (8 bytes a slot, 9-16 bytes an id), and for an input
    reserved for more than ``_FROZEN_FROM`` ids a frozen tier of the older ones (2.5 bytes
    an id in memory, 5 on disk).

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
        # ids whose 16 frozen bits an older id in the same run of buckets has: kept exactly
        self._kept: list[_Table] = []
        self._hot_buckets = _MIN_BUCKETS

    def reserve(self, ids: int) -> None:
        """Size the tables for ``ids`` ids at most, before any is stored: a known input
        never rehashes, and its tables end near 80% full (10 bytes an id) instead of
        anywhere from 50% to 85% (9-16) with a rehash's copies on top. Past
        ``_FROZEN_FROM`` ids, the tables hold the last ``_HOT_IDS`` and a frozen tier
        sized for all of them holds the older ones."""
        if any(table.count for table in self._tables) or self._frozen:
            return
        hot = ids
        if ids > _FROZEN_FROM:
            self._frozen = _Frozen.tier(_buckets_for(ids), 1 << _PART_BITS)
            self._kept = [_Table(_MIN_BUCKETS) for _ in self._tables]
            hot = _HOT_IDS
        buckets = _buckets_for(hot)
        if buckets > _MIN_BUCKETS:
            self._hot_buckets = buckets
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
        for t, lo, hi in zip(
            range(len(self._tables)), bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
        ):
            if lo == hi:
                continue
            table = self._tables[t]
            share = uniq[lo:hi].astype(np.uint32)  # the fingerprints, in order
            got = self._older(t, share) if self._frozen else table.find(share)
            new = got < 0
            got[new] = positions[first_idx[lo:hi][new]]
            found[lo:hi] = got
            if new.any():
                table.insert(share[new], got[new].astype(np.uint32))
        if self._frozen and sum(table.count for table in self._tables) >= _HOT_IDS:
            self._freeze()
        out: np.ndarray = found[inverse.ravel()]
        return out

    def _older(self, t: int, share: np.ndarray) -> np.ndarray:
        """The first positions of table ``t``'s fingerprints in any tier (-1: none): the
        exactly kept ones, then the frozen tier (older than the tables), then the tables."""
        kept = self._kept[t]
        got = kept.find(share) if kept.count else np.full(len(share), -1, dtype=np.int64)
        todo = np.flatnonzero(got < 0)
        if len(todo):
            frozen = self._frozen[t]
            slots = frozen.find(share[todo])
            hit = slots >= 0
            got[todo[hit]] = frozen.positions(slots[hit])
            todo = todo[~hit]
        if len(todo):
            got[todo] = self._tables[t].find(share[todo])
        return got

    def _freeze(self) -> None:
        """Move the tables' ids to the frozen tier, and start the tables afresh."""
        for t, table in enumerate(self._tables):
            used = np.arange(_WIDTH) < table.fill[:, None]
            prints, positions = table.prints[used], table.positions[used]
            order = np.argsort(prints, kind="stable")  # nearly sorted already (bucket order)
            prints, positions = prints[order], positions[order]
            placed = self._frozen[t].place(prints, positions)
            # an id the frozen tier would not answer exactly (an older one shares its 16
            # bits within its run of buckets), or that found no room there: kept exactly
            left = ~placed
            if left.any():
                self._kept[t].insert(prints[left], positions[left])
            self._tables[t] = _Table(self._hot_buckets)


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


class _Frozen:
    """The older ids of one table: the low 16 bits of each fingerprint in memory, laid out
    as ``_Table`` lays out its fingerprints (the bucket is still the whole fingerprint's),
    and each slot's position at ``4 * slot`` in its share of a temporary file.

    Sized once, never rehashed: an id that finds no room stays with the caller. A later id
    never lands before an earlier one in a run of buckets (buckets only fill, in order), so
    the first match of an id's 16 bits is its own slot unless an older id shares them:
    ``place`` says which ids those are, and the caller keeps them exactly.
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

    def positions(self, slots: np.ndarray) -> np.ndarray:
        return self.file.read(self.base + slots)

    def place(self, prints: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Store sorted, distinct fingerprints with their positions; whether each one is
        placed so that ``find`` answers its own slot (else the caller keeps it)."""
        buckets, low = self.bucket(prints), _low(prints)
        slots = np.full(len(prints), -1, dtype=np.int64)
        todo = np.arange(len(prints))
        last = len(self.fill) - 1  # never filled, so that every search ends
        while len(todo):
            room = buckets < last
            todo, low, buckets = todo[room], low[room], buckets[room]
            if not len(todo):
                break
            edge = np.empty(len(todo), dtype=bool)
            edge[0] = True
            np.not_equal(buckets[1:], buckets[:-1], out=edge[1:])
            start = np.flatnonzero(edge)
            sizes = np.diff(start, append=len(todo))
            slot = self.fill[buckets] + (np.arange(len(todo)) - np.repeat(start, sizes))
            fits = slot < _WIDTH
            self.prints[buckets[fits], slot[fits]] = low[fits]
            slots[todo[fits]] = buckets[fits] * _WIDTH + slot[fits]
            firsts = buckets[start]
            self.fill[firsts] = np.minimum(self.fill[firsts] + sizes, _WIDTH)
            rest = ~fits
            todo, low, buckets = todo[rest], low[rest], buckets[rest]
            free = self.fill[np.minimum(buckets[:, None] + _AHEAD, last)] < _WIDTH
            buckets = buckets + np.where(free.any(axis=1), free.argmax(axis=1) + 1, len(_AHEAD))
        stored = slots >= 0
        self.file.write(self.base + slots[stored], positions[stored])
        # an older id, or one of this batch placed earlier in the run of buckets, may
        # share its 16 bits and answer for it
        stored[stored] = self.find(prints[stored]) == slots[stored]
        return stored


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
        try:
            self._file: IO[bytes] = tempfile.TemporaryFile(prefix="churn-connector-")  # noqa: SIM115
            os.ftruncate(self._file.fileno(), 4 * slots)  # sparse: blocks come as written
        except OSError as exc:
            raise _error(exc) from None
        weakref.finalize(self, self._file.close)

    def write(self, slots: np.ndarray, positions: np.ndarray) -> None:
        """Set the positions of ``slots``: read, change and write back a window at a time
        (a slice's ids land all over the file)."""
        if len(slots) == 0:
            return
        order = np.argsort(slots, kind="stable")
        slots, positions = slots[order], positions[order].astype(np.uint32)
        fd = self._file.fileno()
        windows = slots >> _WINDOW_BITS
        bounds = np.flatnonzero(np.diff(windows)) + 1
        raw = bytearray(4 << _WINDOW_BITS)  # a window is read into it, changed, written
        window = np.frombuffer(raw, dtype=np.uint32)
        try:
            for part, values in zip(
                np.split(slots, bounds), np.split(positions, bounds), strict=True
            ):
                lo, hi = int(part[0]), int(part[-1]) + 1
                data = memoryview(raw)[: 4 * (hi - lo)]
                if os.preadv(fd, [data], 4 * lo) != len(data):
                    raise OSError(errno.EIO, "the temporary file is shorter than written")
                window[part - lo] = values
                os.pwrite(fd, data, 4 * lo)
        except OSError as exc:
            raise _error(exc) from None

    def read(self, slots: np.ndarray) -> np.ndarray:
        """The positions at ``slots``, as int64."""
        fd = self._file.fileno()
        try:
            data = b"".join(os.pread(fd, 4, 4 * slot) for slot in slots.tolist())
        except OSError as exc:
            raise _error(exc) from None
        return np.frombuffer(data, dtype=np.uint32).astype(np.int64)


def _error(exc: OSError) -> Exception:
    return storage_error(
        "the temporary file of the message ids in",
        tempfile.gettempdir(),
        exc,
        fix="free space there, or point TMPDIR at a folder with room (5 bytes a row)",
    )


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64 bits
_PART_BITS = 4  # 16 tables
_WIDTH = 16  # slots a bucket
_MIN_BUCKETS = 16
_SPARE = 32  # buckets past the last, for overflow
_AHEAD = np.arange(1, 17)
_MAX_LOAD = 0.85
_GROWN_LOAD = 0.5
_RESERVED_LOAD = 0.8
_HOT_IDS = 1 << 21  # ids the tables hold before they move to the frozen tier
_FROZEN_FROM = 2 * _HOT_IDS  # an input reserved for more ids has a frozen tier
_WINDOW_BITS = 20  # the position file is changed 1M slots (4 MB) at a time
