"""The column-wise wire path: validated rows -> the exact bytes of the per-row path (wire.py).

For every field a column of JSON fragments (``"key":value``, null where the key is omitted)
is built with Arrow/numpy kernels and the fragments are joined row-wise in C, in canonical
key order. The SHA-256 ids are one native call over the column with the ``fast`` extra
(polars-hash), else a hashlib loop over the rows (the reference; both give the same bytes).

    canonical(row) = b'{"context":{' + TAIL[row]                    (what is hashed)
    wire(row)      = b'{"context":{"$message_id":"' + UUID + b'"' + [b","] + TAIL[row]

Byte identity with orjson rests on the rules of ``_arrowjson`` (tests hold both).
An Arrow struct ``properties``/``context`` column is written from its fields.

A text column of JSON objects is parsed (validation checked it) and written back sorted.

Id format v2 (``_values``): integral floats are written as integers and a struct's null
fields are omitted; v1 keeps 0.1's spelling. Both paths follow ``options.id_format``.

Anything else (object columns of dicts, a struct or JSON text beside flat columns, a
``message_id`` column, ``id_columns``) raises Unsupported: the caller uses the per-row path,
which stays the reference (tests/events/test_wire_columnar.py holds the two to the same bytes).
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import itertools
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._json import timestamps as _timestamps
from .._json.arrow import (
    BIN,
    NotColumnar,
    contiguous,
    data_bytes,
    fixed_width,
    floats,
    format_ms,
    needs_escape,
    quote,
    struct_members,
    with_nulls,
)
from .._json.timestamps import TimestampProblem
from .._json.values import json_numbers
from .._validate import columns as _columns
from .ids import PREFIXES
from .options import EventOptions

_CONTEXT_OPEN = b'{"context":{'
_ID_OPEN = b'{"context":{"$message_id":"'
# where each of the 36 UUID characters comes from in 32 hex digits plus a dash (index 32)
_UUID_IDX = np.array(
    [*range(0, 8), 32, *range(8, 12), 32, *range(12, 16), 32, *range(16, 20), 32, *range(20, 32)]
)


Unsupported = NotColumnar  # this slice needs the per-row path


# -- building blocks ----------------------------------------------------------------------


def value_json(
    s: pd.Series, naive_timezone: str | None, *, v2: bool = True
) -> tuple[pa.Array, bytes]:
    """(values, quote): JSON text of each cell of a flat column is quote + value + quote
    (null where the key is omitted). Strings needing no escape are returned raw; in v2
    integral floats are integers."""
    dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
        norm = _timestamps.normalize(s, naive_timezone)
        return with_nulls(format_ms(norm.ms), norm.problem != TimestampProblem.OK), b'"'
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
        raise Unsupported("object or categorical column")
    if pd.api.types.is_float_dtype(dtype):
        arr = s.to_numpy(dtype="float64", na_value=np.nan)
        return with_nulls(floats(arr, whole_as_int=v2), np.isnan(arr)), b""
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return pc.cast(contiguous(s), pa.string()).cast(BIN), b""
    if pd.api.types.is_string_dtype(dtype):
        arr = contiguous(s)
        if needs_escape(arr):
            return quote(arr), b""
        return arr.cast(BIN), b'"'
    raise Unsupported(f"dtype {dtype}")


def _object_fragments(
    work: pd.DataFrame, kind: str, naive_timezone: str | None, *, v2: bool
) -> list[pa.Array | bytes]:
    """Pieces of the sorted ``"key":value`` members of the flat ``<kind>.<key>`` columns,
    to be spliced into the row join: a column without omitted cells goes in inline
    (key scalar, values, closing quote); a column with omitted cells as one fragment
    array, null where the key is omitted.

    With an always-present column (the anchor), keys before it carry a trailing comma and
    keys after it a leading one. Otherwise the comma depends on whether an earlier key is
    present in that row (if_else).
    """
    if kind in work.columns:
        if _columns.flat_columns(work, kind):
            raise Unsupported(f"{kind} object and {kind}.<key> columns together")
        cells = work[kind]
        if _columns.is_text_dtype(cells):
            return [_text_members(cells, v2=v2)]
        members = struct_members(_struct_of(cells), naive_timezone, v2=v2)
        return [members] if members is not None else []
    keyed = sorted((c[len(kind) + 1 :], c) for c in _columns.flat_columns(work, kind))
    columns = []
    for key, column in keyed:
        values, quote = value_json(work[column], naive_timezone, v2=v2)
        columns.append((orjson.dumps(key) + b":" + quote, values, quote))
    anchor = next((i for i, (_, v, _) in enumerate(columns) if v.null_count == 0), None)
    out: list[pa.Array | bytes] = []
    if anchor is not None:
        for i, (name, values, quote) in enumerate(columns):
            if i < anchor:
                out.append(pc.binary_join_element_wise(name, values, quote + b",", b""))
                continue
            lead = b"," if i > anchor else b""
            if values.null_count == 0:
                out += [lead + name, values, quote]
            else:
                out.append(pc.binary_join_element_wise(lead + name, values, quote, b""))
        return out
    seen = np.zeros(len(work), dtype=bool)
    for name, values, quote in columns:
        if not seen.any():
            frag = pc.binary_join_element_wise(name, values, quote, b"")
        else:
            frag = pc.if_else(
                pa.array(seen),
                pc.binary_join_element_wise(b"," + name, values, quote, b""),
                pc.binary_join_element_wise(name, values, quote, b""),
            )
        out.append(frag)
        seen |= values.is_valid().to_numpy(zero_copy_only=False)
    return out


def _text_members(s: pd.Series, *, v2: bool) -> pa.Array:
    """The sorted members of each validated JSON-object text (null for a null cell); its
    nulls are written data and stay, in v2 its integral floats become integers."""
    # validation refused integers beyond 64 bits, so orjson reads every integer exactly
    loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
    texts = contiguous(s).to_pylist()
    members = pa.array(
        [None if t is None else dumps(loads(t), option=sort)[1:-1] for t in texts], BIN
    )
    if not v2:
        return members
    # orjson spells a float that holds an integer below 2**53 as digits and ".0" before a
    # delimiter: only the objects with that spelling (in a string too) are walked
    whole = pc.match_substring_regex(members, _WHOLE_FLOAT).fill_null(False)
    rows = np.flatnonzero(whole.to_numpy(zero_copy_only=False))
    if not len(rows):
        return members
    # parsed again, not kept from above: holding every parsed object costs more than this
    fixed = [dumps(json_numbers(loads(texts[i])), option=sort)[1:-1] for i in rows.tolist()]
    return pc.replace_with_mask(members, whole, pa.array(fixed, BIN))


_WHOLE_FLOAT = r"[0-9]\.0(?:[,}\]]|$)"


def _struct_of(s: pd.Series) -> pa.StructArray:
    """The Arrow struct array behind an object column, or Unsupported (dicts, JSON text)."""
    dtype = s.dtype
    if not (isinstance(dtype, pd.ArrowDtype) and pa.types.is_struct(dtype.pyarrow_dtype)):
        raise Unsupported("an object column that is not an Arrow struct")
    arr = contiguous(s)
    assert isinstance(arr, pa.StructArray)
    return arr


def _user_ids(s: pd.Series) -> tuple[pa.BinaryArray, bytes]:
    """(values, quote) of the ids: JSON is quote + value + quote."""
    if _columns.is_int_dtype(s):
        return pc.cast(contiguous(s), pa.string()).cast(BIN), b'"'
    arr = (
        contiguous(s)
        if _columns.is_text_dtype(s)
        else pa.array(_columns.ids_to_wire(s), pa.string())
    )
    if needs_escape(arr):
        return quote(arr), b""
    return arr.cast(BIN), b'"'


def _event_types(s: pd.Series) -> pa.BinaryArray:
    # validated: ^[a-z0-9]+(?:_[a-z0-9]+)*$, nothing to escape
    if pd.api.types.is_object_dtype(s.dtype):
        return pa.array(s.tolist(), pa.string()).cast(BIN)
    return contiguous(s).cast(BIN)


# -- hashing and ids ----------------------------------------------------------------------


def _digests(tails: pa.BinaryArray, namespace: str | None, prefix: bytes) -> np.ndarray:
    head = prefix + (namespace or "").encode("utf-8") + b"\n" + _CONTEXT_OPEN
    full = native_sha256(head, tails)
    if full is None:
        full = python_sha256(head, tails)
    arr = full[:, :16].copy()
    arr[:, 6] = (arr[:, 6] & 0x0F) | 0x80
    arr[:, 8] = (arr[:, 8] & 0x3F) | 0x80
    return arr


def python_sha256(head: bytes, tails: pa.BinaryArray) -> np.ndarray:
    """(n, 32) uint8: SHA-256(head + tail) of each row, hashlib row by row (the reference)."""
    base = hashlib.sha256(head)
    copy = base.copy
    data = bytes(data_bytes(tails))  # one copy; slicing bytes beats to_pylist/memoryview
    offsets = np.frombuffer(tails.buffers()[1], dtype=np.int32)
    bounds = offsets[tails.offset : tails.offset + len(tails) + 1] - offsets[tails.offset]
    bounds = bounds.tolist()
    out: list[bytes] = []
    append = out.append
    for lo, hi in itertools.pairwise(bounds):
        h = copy()
        h.update(data[lo:hi])
        append(h.digest())
    return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(-1, 32)


def native_sha256(head: bytes, tails: pa.BinaryArray) -> np.ndarray | None:
    """The same as python_sha256 in one native call over the column (polars-hash, Rust,
    with the CPU's SHA instructions where it has them); None without the ``fast`` extra,
    for text that is not UTF-8 (it hashes strings) or when the plugin fails."""
    native = _native()
    if native is None:
        return None
    if len(tails) == 0:
        return np.empty((0, 32), dtype=np.uint8)
    pl, plh = native
    try:
        texts = pc.binary_join_element_wise(head, tails, b"").cast(pa.string())
        hexed = pc.cast(
            pl.from_arrow(pa.table({"c": texts}))
            .select(plh.col("c").chash.sha2_256())
            .to_series()
            .to_arrow(),
            pa.large_string(),
        )
    except Exception:  # an accelerator: whatever fails falls back to hashlib
        return None
    n = len(hexed)
    offsets = np.frombuffer(hexed.buffers()[1], dtype=np.int64)[hexed.offset : hexed.offset + n + 1]
    if hexed.null_count or not np.array_equal(offsets - offsets[0], np.arange(n + 1) * 64):
        return None
    data = memoryview(hexed.buffers()[2])[offsets[0] : offsets[0] + 64 * n]
    return np.frombuffer(binascii.unhexlify(data), dtype=np.uint8).reshape(n, 32)


@functools.cache
def _native() -> tuple[Any, Any] | None:
    try:
        import polars as pl  # noqa: PLC0415 - heavy optional dependency (the fast extra)
        import polars_hash as plh  # noqa: PLC0415 - optional, with polars (the fast extra)
    except ImportError:
        return None
    return pl, plh


def uuid_text(digests: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 -> (n, 36) uint8 lowercase UUID text (hexlify + one gather)."""
    n = digests.shape[0]
    hexed = np.empty((n, 33), dtype=np.uint8)
    hexed[:, :32] = np.frombuffer(binascii.hexlify(digests.tobytes()), dtype=np.uint8).reshape(
        n, 32
    )
    hexed[:, 32] = 45
    return np.ascontiguousarray(hexed[:, _UUID_IDX])


# -- the slice -----------------------------------------------------------------------------


def build(
    work: pd.DataFrame, options: EventOptions, occurred_ms: np.ndarray
) -> tuple[pa.BinaryArray, np.ndarray]:
    """Wire bytes and id digests of validated rows of ``work``, in row order; raises
    Unsupported when the per-row path must do it. ``occurred_ms``: the rows' occurred_at
    in epoch ms (validation normalised the column already)."""
    if options.id_columns or "message_id" in work.columns:
        raise Unsupported("message_id column or id_columns")
    n = len(work)
    tz = options.rules.naive_timezone
    v2 = options.id_format == "v2"
    context = _object_fragments(work, "context", tz, v2=v2)
    properties = _object_fragments(work, "properties", tz, v2=v2)
    times = format_ms(occurred_ms)
    user_ids, quote = _user_ids(work["external_user_id"])
    tails = pc.binary_join_element_wise(
        *context,
        b'},"event_type":"',
        _event_types(work["event_type"]),
        b'","external_user_id":' + quote,
        user_ids,
        quote + b',"occurred_at":"',
        times,
        b'","properties":{',
        *properties,
        b"}}",
        b"",
        null_handling="skip",
    )
    if len(tails) != n:  # a pyarrow join that dropped rows would change every id after it
        raise Unsupported("the row join lost rows")
    digests = _digests(tails, options.namespace, PREFIXES[options.id_format])
    uuids = fixed_width(uuid_text(digests))
    if context:
        if any(isinstance(c, bytes) for c in context):
            comma: pa.Array | bytes = b","  # an always-present context key
        else:
            present = pc.binary_join_element_wise(*context, b"", b"", null_handling="skip")
            comma = pc.if_else(pc.greater(pc.binary_length(present), 0), b",", None)
        rows = pc.binary_join_element_wise(
            _ID_OPEN, uuids, b'"', comma, tails, b"", null_handling="skip"
        )
    else:
        rows = pc.binary_join_element_wise(_ID_OPEN, uuids, b'"', tails, b"")
    return rows, digests
