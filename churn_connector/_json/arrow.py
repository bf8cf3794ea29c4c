"""Arrow columns -> JSON text, byte for byte as orjson (``OPT_SORT_KEYS``) writes it.

The building blocks of the column-wise wire path: every value of a column turned into its
JSON text by Arrow and numpy kernels, so a slice of events becomes bytes without a Python
object per row. Byte identity with orjson rests on these rules (tests hold them):

- strings: only '"', '\\' and U+0000..U+001F are escaped (\\b \\t \\n \\f \\r short forms,
  others \\u00xx lowercase); DEL, '/', U+2028/9 and all non-ASCII go out as raw UTF-8. Columns
  are scanned for those bytes; the rare values that need escaping are encoded by orjson
  itself, so the escaping rules are orjson's by construction.
- floats: orjson's own spelling, obtained by encoding the whole float64 column once with
  OPT_SERIALIZE_NUMPY and cutting at the commas; in id format v2 a float that holds an
  integer (|x| < 2**53) is that integer's digits (``_values.json_number``).
- struct members: a null field is ``null`` in v1 and omitted in v2 (``_values.to_json``).
- ints: decimal digits (Arrow cast); bools: true/false; keys sorted by code point;
  timestamps: ``YYYY-MM-DDTHH:MM:SS.mmmZ``, UTC, floored to the millisecond: the one
  spelling of ``_timestamps.ms_text``, which the per-row path uses too.

Pitfall (pyarrow 26): ``binary_join_element_wise(..., null_handling="skip")`` DROPS output
rows whose inputs are all null; every join here has a non-null scalar among its inputs.
"""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import timestamps as _timestamps
from .values import whole_floats

BIN = pa.binary()
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


class NotColumnar(Exception):
    """These values need the per-row path."""


def fixed_width(data: np.ndarray) -> pa.BinaryArray:
    """(n, w) uint8 -> binary array of n values of w bytes (zero-copy)."""
    n, w = data.shape
    offsets = np.arange(0, n * w + 1, w, dtype=np.int32)
    return pa.Array.from_buffers(
        BIN, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


_ESCAPED = np.zeros(256, dtype=bool)
_ESCAPED[:0x20] = True
_ESCAPED[[0x22, 0x5C]] = True


def format_ms_binary(ms: np.ndarray) -> pa.BinaryArray:
    """Epoch ms -> the wire spelling of each (``_timestamps.ms_text``), as Arrow binary."""
    text = _timestamps.ms_text(ms)
    if text is None:  # outside years 1..9999: never sent, spelled only for messages
        return pa.array(_timestamps.format_ms(ms), BIN)
    return fixed_width(text)


def contiguous(s: pd.Series) -> pa.Array:
    """One contiguous Arrow array of a column (pandas may hold it in several chunks)."""
    arr = pa.array(s, from_pandas=True)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def data_bytes(arr: pa.Array) -> np.ndarray:
    """The value bytes an Arrow (large_)string/binary array uses."""
    _, offsets_buf, data = arr.buffers()
    if data is None:
        return np.empty(0, dtype=np.uint8)
    kind = (
        np.int64
        if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
        else np.int32
    )
    offsets = np.frombuffer(offsets_buf, dtype=kind)
    lo, hi = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    return np.frombuffer(data, dtype=np.uint8)[lo:hi]


def needs_escape(arr: pa.Array) -> bool:
    return bool(_ESCAPED[data_bytes(arr)].any())


def quote(arr: pa.Array) -> pa.BinaryArray:
    """JSON strings for an Arrow string column (nulls stay null)."""
    quoted = pc.binary_join_element_wise(b'"', arr.cast(BIN), b'"', b"")
    if needs_escape(arr):
        bad = pc.match_substring_regex(arr, _NEEDS_ESCAPE).fill_null(False)
        idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        escaped = pa.array([orjson.dumps(v) for v in arr.take(idx).to_pylist()], BIN)
        quoted = pc.replace_with_mask(quoted, bad, escaped)
    return quoted


def floats(values: np.ndarray, *, whole_as_int: bool = False) -> pa.Array:
    """float64 values -> orjson's spelling of each (NaN rows give b"null"; caller masks);
    with ``whole_as_int`` a value that holds an integer (|x| < 2**53) is its digits."""
    n = len(values)
    if n == 0:
        return pa.array([], BIN)
    if whole_as_int:
        whole = whole_floats(values)
        if whole.any():
            digits = pc.cast(pa.array(values[whole].astype(np.int64)), pa.string()).cast(BIN)
            if whole.all():
                return digits
            spelled = floats(values)
            return pc.replace_with_mask(spelled, pa.array(whole), digits)
    text = np.frombuffer(
        orjson.dumps(
            np.ascontiguousarray(values, dtype=np.float64), option=orjson.OPT_SERIALIZE_NUMPY
        ),
        dtype=np.uint8,
    )[1:-1]
    commas = np.flatnonzero(text == 44)
    assert len(commas) == n - 1
    data = np.delete(text, commas)
    offsets = np.empty(n + 1, dtype=np.int32)
    offsets[0] = 0
    offsets[1:n] = commas - np.arange(n - 1)
    offsets[n] = len(data)
    return pa.Array.from_buffers(BIN, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def with_nulls(values: pa.Array, omit: np.ndarray) -> pa.Array:
    if not omit.any():
        return values
    return pc.if_else(pa.array(omit), pa.scalar(None, values.type), values)


def join_members(members: list[tuple[bytes, pa.Array]]) -> pa.Array:
    """``"key":value,...`` of each row from (``"key":``, JSON values) pairs in key order,
    a member omitted where its value is null; b"" where none is present.

    With a member present in every row (the anchor), members before it carry a trailing
    comma and members after it a leading one; otherwise a member's comma depends on
    whether an earlier one is present in that row (if_else).
    """
    anchor = next((i for i, (_, values) in enumerate(members) if values.null_count == 0), None)
    pieces: list[pa.Array | bytes] = []
    if anchor is not None:
        for i, (name, values) in enumerate(members):
            if i < anchor:
                pieces.append(pc.binary_join_element_wise(name, values, b",", b""))
            elif values.null_count == 0:
                pieces += [(b"," if i > anchor else b"") + name, values]
            else:
                pieces.append(pc.binary_join_element_wise(b"," + name, values, b""))
    else:
        seen = np.zeros(len(members[0][1]), dtype=bool)
        for name, values in members:
            bare = pc.binary_join_element_wise(name, values, b"")
            if seen.any():
                led = pc.binary_join_element_wise(b"," + name, values, b"")
                bare = pc.if_else(pa.array(seen), led, bare)
            pieces.append(bare)
            seen |= values.is_valid().to_numpy(zero_copy_only=False)
    # "replace", not "skip": skip drops the rows whose pieces are all null
    return pc.binary_join_element_wise(*pieces, b"", null_handling="replace", null_replacement=b"")


def struct_members(
    arr: pa.StructArray, naive_timezone: str | None, *, v2: bool = True
) -> pa.Array | None:
    """The ``"key":value,...`` members of each struct value, keys sorted by code point, a
    null field omitted (v2) or ``null`` (v1, as a dict's None was); null where the struct
    itself is null (it stands for an empty object). None when the struct has no fields."""
    fields = sorted(range(arr.type.num_fields), key=lambda i: arr.type.field(i).name)
    if not fields:
        return None
    children = arr.flatten()  # the fields as sliced with the struct (offsets applied)
    members = [
        (orjson.dumps(arr.type.field(i).name) + b":", json_of(children[i], naive_timezone, v2=v2))
        for i in fields
    ]
    return with_nulls(join_members(members), ~arr.is_valid().to_numpy(zero_copy_only=False))


def json_of(arr: pa.Array, naive_timezone: str | None, *, v2: bool = True) -> pa.Array:
    """The JSON text of every value of a struct field, as the per-row path writes a dict's
    values: a null is null in v2 (the member is omitted) and ``null`` in v1; NotColumnar
    for types it leaves to that path."""
    text = _json_of(arr, naive_timezone, v2=v2)
    return text if v2 else text.fill_null(pa.scalar(b"null", BIN))


def field_problem(t: pa.DataType, name: str = "") -> str | None:
    """Why a struct field of type ``t`` needs the per-row path; None when ``json_of``
    writes it (integers, booleans, floats, strings, zoned timestamps, structs of them)."""
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            field = t.field(i)
            problem = field_problem(field.type, f"{name}.{field.name}" if name else field.name)
            if problem is not None:
                return problem
        return None
    if _leaf_kind(t) is None:
        return f"field {name!r} is of type {t}"
    return None


def _leaf_kind(t: pa.DataType) -> str | None:
    types = pa.types
    if types.is_integer(t) or types.is_boolean(t):
        return "exact"
    if types.is_floating(t):
        return "float"
    if types.is_string(t) or types.is_large_string(t):
        return "string"
    if types.is_timestamp(t) and t.tz is not None:
        return "time"
    return None


def _json_of(arr: pa.Array, naive_timezone: str | None, *, v2: bool) -> pa.Array:
    t = arr.type
    if pa.types.is_struct(t):
        assert isinstance(arr, pa.StructArray)
        members = struct_members(arr, naive_timezone, v2=v2)
        body = pc.binary_join_element_wise(b"{", members, b"}", b"") if members else None
        objects = body if body is not None else pa.array([b"{}"] * len(arr), BIN)
        return with_nulls(objects, ~arr.is_valid().to_numpy(zero_copy_only=False))
    kind = _leaf_kind(t)
    if kind == "exact":
        return pc.cast(pc.cast(arr, pa.string()), BIN)
    if kind == "float":
        values = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        if not np.isfinite(values[valid]).all():
            raise NotColumnar("NaN or infinity in a struct field")  # validation refuses it
        return with_nulls(floats(np.where(valid, values, 0.0), whole_as_int=v2), ~valid)
    if kind == "string":
        return quote(arr.cast(pa.string()))
    if kind == "time":
        assert isinstance(t, pa.TimestampType)
        per_ms = {"s": 0, "ms": 1, "us": 1_000, "ns": 1_000_000}[t.unit]
        ints = arr.cast(pa.int64())
        present = ints.drop_null()
        # nulls borrow a present value: dates spelled once per day stay a short table
        fill = present[0] if len(present) else pa.scalar(0, pa.int64())
        raw = ints.fill_null(fill).to_numpy(zero_copy_only=False)
        ms = raw * 1000 if per_ms == 0 else raw // per_ms  # floor, before 1970 too
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        text = pc.binary_join_element_wise(b'"', format_ms_binary(ms), b'"', b"")
        return with_nulls(text, ~valid)
    raise NotColumnar(f"struct field of type {t}")  # field_problem says so first
