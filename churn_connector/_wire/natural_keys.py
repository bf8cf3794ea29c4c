"""Natural keys: what makes an event the same event whatever its message id says.

An event's natural key is its user, event type and ``occurred_at`` to the millisecond (with
``id_columns``: the values of those columns). A message id also covers everything else the
event carries and the id settings (namespace, id format), so a re-run whose export gained a
column, or whose ``rename`` or namespace changed, gives the same events new ids; the
ledger's re-id guard (``_ledger.stage``) finds them by their natural keys instead.

The key is hashed, never stored as it is: SHA-256 of a fixed prefix and
``event_type <US> occurred_at_ms <US> external_user_id`` (US: the unit separator, U+001F,
which an event type and a number never hold, so the one free-text part last keeps the join
unambiguous), or of the id columns' canonical JSON. A ledger records it as 32 hex digits:
the hour of ``occurred_at`` (6 digits, hours since 1970) and 104 bits of the hash. The hour
adds nothing to the key (the hash covers the time) but keeps the keys of one export's hours
together in a ledger's index: an export written in time order inserts into a few places of
the index, not into every page of it (1M keys into SQLite: 2.9 s, against 8.1 s for keys in
random order). Keys are hashed only when a ledger asks: a send without one pays nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._json import contiguous
from .._validate import ids_to_wire, is_int_dtype, is_text_dtype
from . import ids as _ids

__all__ = ["NATURAL_PREFIX", "NaturalKeys", "column_digest", "hex_keys", "natural_keys_of"]

# a compatibility promise, like the message ids': a changed prefix forgets every guard
NATURAL_PREFIX = b"churn-connector/natural-key/v1\n"
_UNIT = "\x1f"
_HOUR_MS = 3_600_000


@dataclass
class NaturalKeys:
    """The natural keys of a batch's events, in its order: the columns they are made of
    (hashed when asked), or their digests already (``id_columns``)."""

    ms: np.ndarray  # occurred_at in epoch ms
    users: pd.Series | None = None
    types: pd.Series | None = None
    hashed: np.ndarray | None = None  # (k, 16) uint8, when made elsewhere (id columns)
    columns: str = ""  # a digest of the slice's properties/context column names

    def __len__(self) -> int:
        return len(self.ms)

    def take(self, indices: np.ndarray | list[int]) -> NaturalKeys:
        """The keys at ``indices`` (positions in this batch)."""
        at = np.asarray(indices, dtype=np.int64)
        if self.hashed is not None:
            return NaturalKeys(self.ms[at], hashed=self.hashed[at], columns=self.columns)
        assert self.users is not None
        assert self.types is not None
        return NaturalKeys(
            self.ms[at], self.users.iloc[at], self.types.iloc[at], columns=self.columns
        )

    def digests(self) -> np.ndarray:
        """(k, 16) uint8: each key's digest."""
        if self.hashed is not None:
            return self.hashed
        if not len(self):
            return np.empty((0, 16), dtype=np.uint8)
        assert self.users is not None
        assert self.types is not None
        texts = pc.binary_join_element_wise(
            _texts(self.types),
            pc.cast(pa.array(self.ms, pa.int64()), pa.string()),
            _user_texts(self.users),
            _UNIT,
        )
        return _ids.digests(texts, None, NATURAL_PREFIX)

    def hex(self) -> list[str]:
        """Each key as a ledger records it: 32 hex digits (see the module)."""
        return hex_keys(self.digests(), self.ms)


def hex_keys(digests: np.ndarray, ms: np.ndarray) -> list[str]:
    """(k, 16) uint8 digests and their events' epoch ms as 32-digit texts: the hour, then
    the digest's first 104 bits."""
    if not len(digests):
        return []
    hours = (np.asarray(ms, dtype=np.int64) // _HOUR_MS).clip(0, 0xFFFFFF)
    # a slice spans few hours: each is spelled once
    distinct, at = np.unique(hours, return_inverse=True)
    spelled = [f"{h:06x}" for h in distinct.tolist()]
    head = [spelled[i] for i in at.ravel().tolist()]
    joined = np.ascontiguousarray(digests[:, :13]).tobytes().hex()
    return [h + joined[i : i + 26] for h, i in zip(head, range(0, len(joined), 26), strict=True)]


def _texts(s: pd.Series) -> pa.Array:
    if is_text_dtype(s):
        return contiguous(s).cast(pa.string())
    return pa.array([str(v) for v in s.tolist()], pa.string())


def _user_texts(s: pd.Series) -> pa.Array:
    """The ids as the wire spells them (integers as their digits)."""
    if is_int_dtype(s):
        return pc.cast(contiguous(s), pa.string())
    if is_text_dtype(s):
        return contiguous(s).cast(pa.string())
    return pa.array(ids_to_wire(s), pa.string())


def natural_keys_of(work: pd.DataFrame, ms: np.ndarray, hashed: np.ndarray | None) -> NaturalKeys:
    """The natural keys of validated rows (``work``, a RangeIndex frame; ``ms``: their
    occurred_at in epoch ms; ``hashed``: the id columns' keys, when ``id_columns`` made
    them). Only references are kept: nothing is hashed until asked."""
    columns = column_digest(work.columns)
    if hashed is not None:
        return NaturalKeys(ms, hashed=hashed, columns=columns)
    return NaturalKeys(ms, work["external_user_id"], work["event_type"], columns=columns)


def column_digest(columns: Iterable[object]) -> str:
    """Four hex digits naming a set of ``properties``/``context`` column names: two runs
    whose digests differ wrote their events from other columns (one added, dropped or
    renamed)."""
    names = sorted(str(c) for c in columns if str(c).split(".", 1)[0] in ("properties", "context"))
    return hashlib.sha256(_UNIT.join(names).encode("utf-8", "surrogatepass")).hexdigest()[:4]
