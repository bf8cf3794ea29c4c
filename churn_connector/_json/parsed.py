"""JSON-object texts parsed once: validation leaves each text column's sorted members here,
and the wire step takes them instead of parsing every text a second time.

An entry is keyed by the Arrow buffers of the column it was parsed from (their addresses,
the array's offset and length) and holds that array, so its buffers stay alive and no other
array can take their addresses: a key found is the same immutable bytes. Only Arrow-backed
columns are kept (a NumPy-backed one is copied afresh each time Arrow reads it, so it could
never be found). A miss is never wrong, only slower: the wire step parses the texts itself.
At most ``LIMIT`` entries are kept (validation without a wire step leaves its last ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pandas as pd
import pyarrow as pa

from .arrow import contiguous

__all__ = ["LIMIT", "arrow_backed", "carry_parsed", "keep_parsed", "take_parsed"]

LIMIT = 4  # a slice's properties and context, and the next slice's, in flight at once

_Key = tuple[object, ...]
_lock = threading.Lock()
_kept: OrderedDict[_Key, tuple[pa.Array, pa.BinaryArray]] = OrderedDict()


def _key(arr: pa.Array) -> _Key:
    return (
        str(arr.type),
        arr.offset,
        len(arr),
        *(0 if b is None else b.address for b in arr.buffers()),
    )


def arrow_backed(s: pd.Series) -> bool:
    """Arrow holds the column's values (reading it as Arrow copies nothing)."""
    return isinstance(s.array, pd.arrays.ArrowExtensionArray)


def keep_parsed(arr: pa.Array, members: pa.BinaryArray) -> None:
    """Remember the sorted members (``members[i]``: row i's object without its braces,
    null for a null or refused text) parsed from ``arr``."""
    with _lock:
        _kept[_key(arr)] = (arr, members)
        while len(_kept) > LIMIT:
            _kept.popitem(last=False)


def take_parsed(arr: pa.Array) -> pa.BinaryArray | None:
    """The members kept for exactly these buffers (and forget them); None if none."""
    with _lock:
        found = _kept.pop(_key(arr), None)
    return None if found is None else found[1]


def carry_parsed(before: pd.DataFrame, after: pd.DataFrame, rows: np.ndarray) -> None:
    """Re-key the entries of ``before``'s columns to ``after``'s, which holds ``rows`` of
    them (a slice's valid rows), so the wire step finds them."""
    for j in range(after.shape[1]):  # by position: a name may repeat
        old, new = before.iloc[:, j], after.iloc[:, j]
        if not (
            arrow_backed(old) and arrow_backed(new) and pd.api.types.is_string_dtype(new.dtype)
        ):
            continue
        old_arr, new_arr = contiguous(old), contiguous(new)
        members = take_parsed(old_arr)
        if members is not None and len(new_arr) == len(rows):
            keep_parsed(new_arr, members.take(pa.array(rows, pa.int64())))
