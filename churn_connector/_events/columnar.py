"""The column-wise wire path: validated rows -> the exact bytes of the per-row path (wire.py).

For every field a column of JSON fragments (``"key":value``, null where the key is omitted)
is built with Arrow/numpy kernels and the fragments are joined row-wise in C, in canonical
key order. Only the SHA-256 loop touches rows one by one in Python.

    canonical(row) = b'{"context":{' + TAIL[row]                    (what is hashed)
    wire(row)      = b'{"context":{"$message_id":"' + UUID + b'"' + [b","] + TAIL[row]

Byte identity with orjson (OPT_SORT_KEYS) rests on these rules (see tests/):
- strings: only '"', '\\' and U+0000..U+001F are escaped (\\b \\t \\n \\f \\r short forms,
  others \\u00xx lowercase); DEL, '/', U+2028/9 and all non-ASCII go out as raw UTF-8.
  Columns are scanned for those bytes; the rare values that need escaping are encoded by
  orjson itself, so the escaping rules are orjson's by construction.
- floats: orjson's own spelling, obtained by encoding the whole float64 column once with
  OPT_SERIALIZE_NUMPY and cutting at the commas (numpy-vectorised, no per-row objects).
- ints: decimal digits (Arrow cast); bools: true/false; keys sorted by code point.

Anything else (object columns, ``properties``/``context`` object columns, ``message_id``
columns, ``id_columns``) raises Unsupported: the caller uses the per-row path, which stays
the reference (tests/test_wire_columnar.py holds the two to the same bytes).

Pitfall (pyarrow 26.0.1): ``binary_join_element_wise(..., null_handling="skip")`` DROPS
output rows whose inputs are all null (the result is shorter than the input). Every join
here has a non-null scalar among its inputs, which avoids it.
"""

from __future__ import annotations

import binascii
import hashlib
import itertools

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import _columns, _timestamps
from .._timestamps import TimestampProblem
from .ids import ID_PREFIX
from .options import EventOptions

BIN = pa.binary()
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_CONTEXT_OPEN = b'{"context":{'
_ID_OPEN = b'{"context":{"$message_id":"'
# where each of the 36 UUID characters comes from in 32 hex digits plus a dash (index 32)
_UUID_IDX = np.array(
    [*range(0, 8), 32, *range(8, 12), 32, *range(12, 16), 32, *range(16, 20), 32, *range(20, 32)]
)


class Unsupported(Exception):
    """This slice needs today's per-row path."""


# -- building blocks ----------------------------------------------------------------------


def _fixed_width(data: np.ndarray) -> pa.BinaryArray:
    """(n, w) uint8 -> binary array of n values of w bytes (zero-copy)."""
    n, w = data.shape
    offsets = np.arange(0, n * w + 1, w, dtype=np.int32)
    return pa.Array.from_buffers(
        BIN, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


_T2 = np.array([[48 + i // 10, 48 + i % 10] for i in range(100)], dtype=np.uint8)
_T3 = np.array([[48 + i // 100, 48 + i // 10 % 10, 48 + i % 10] for i in range(1000)], np.uint8)
_ESCAPED = np.zeros(256, dtype=bool)
_ESCAPED[:0x20] = True
_ESCAPED[[0x22, 0x5C]] = True


def format_ms(ms: np.ndarray) -> pa.BinaryArray:
    """Epoch ms -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (== _timestamps.format_ms, vectorised)."""
    n = len(ms)
    if n and not (ms.min() >= -62_135_596_800_000 and ms.max() <= 253_402_300_799_999):
        # outside years 1..9999: numpy's own spelling, as today
        return pa.array(_timestamps.format_ms(ms), BIN)
    days, rem = np.divmod(ms, 86_400_000)
    out = np.empty((n, 24), dtype=np.uint8)
    lo = int(days.min()) if n else 0
    span = int(days.max()) - lo + 1 if n else 0
    if span <= 4096:  # typical: a few weeks of events -> spell each date once
        table = (
            np.array(_timestamps.format_ms(np.arange(lo, lo + span) * 86_400_000), dtype="S24")
            .view(np.uint8)
            .reshape(span, 24)[:, :11]
        )
        out[:, :11] = table[days - lo]
    else:
        _civil(out, days)
    secs, milli = np.divmod(rem, 1000)
    mins, sec = np.divmod(secs, 60)
    hour, minute = np.divmod(mins, 60)
    out[:, 11:13] = _T2[hour]
    out[:, 14:16] = _T2[minute]
    out[:, 17:19] = _T2[sec]
    out[:, 20:23] = _T3[milli]
    out[:, 13] = out[:, 16] = 58
    out[:, 19] = 46
    out[:, 23] = 90
    return _fixed_width(out)


def _civil(out: np.ndarray, days: np.ndarray) -> None:
    """``YYYY-MM-DDT`` into out[:, :11] for days since 1970 (years 1..9999)."""
    z = days + 719_468  # civil_from_days (H. Hinnant), proleptic Gregorian
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    century, yy = np.divmod(year, 100)
    out[:, 0:2] = _T2[century]
    out[:, 2:4] = _T2[yy]
    out[:, 5:7] = _T2[month]
    out[:, 8:10] = _T2[day]
    out[:, 4] = out[:, 7] = 45
    out[:, 10] = 84


def _arrow(s: pd.Series) -> pa.Array:
    """One contiguous Arrow array of a column (pandas may hold it in several chunks)."""
    arr = pa.array(s, from_pandas=True)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _data_bytes(arr: pa.Array) -> np.ndarray:
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


def _needs_escape(arr: pa.Array) -> bool:
    return bool(_ESCAPED[_data_bytes(arr)].any())


def _quote(arr: pa.Array) -> pa.BinaryArray:
    """JSON strings for an Arrow string column (nulls stay null)."""
    quoted = pc.binary_join_element_wise(b'"', arr.cast(BIN), b'"', b"")
    if _needs_escape(arr):
        bad = pc.match_substring_regex(arr, _NEEDS_ESCAPE).fill_null(False)
        idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
        escaped = pa.array([orjson.dumps(v) for v in arr.take(idx).to_pylist()], BIN)
        quoted = pc.replace_with_mask(quoted, bad, escaped)
    return quoted


def _floats(values: np.ndarray) -> pa.BinaryArray:
    """float64 values -> orjson's spelling of each (NaN rows give b"null"; caller masks)."""
    n = len(values)
    if n == 0:
        return pa.array([], BIN)
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


def _with_nulls(values: pa.Array, omit: np.ndarray) -> pa.Array:
    if not omit.any():
        return values
    return pc.if_else(pa.array(omit), pa.scalar(None, values.type), values)


def value_json(s: pd.Series, naive_timezone: str | None) -> tuple[pa.Array, bytes]:
    """(values, quote): JSON text of each cell of a flat column is quote + value + quote
    (null where the key is omitted). Strings needing no escape are returned raw."""
    dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
        norm = _timestamps.normalize(s, naive_timezone)
        return _with_nulls(format_ms(norm.ms), norm.problem != TimestampProblem.OK), b'"'
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
        raise Unsupported("object or categorical column")
    if pd.api.types.is_float_dtype(dtype):
        arr = s.to_numpy(dtype="float64", na_value=np.nan)
        return _with_nulls(_floats(arr), np.isnan(arr)), b""
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return pc.cast(_arrow(s), pa.string()).cast(BIN), b""
    if pd.api.types.is_string_dtype(dtype):
        arr = _arrow(s)
        if _needs_escape(arr):
            return _quote(arr), b""
        return arr.cast(BIN), b'"'
    raise Unsupported(f"dtype {dtype}")


def _object_fragments(
    work: pd.DataFrame, kind: str, naive_timezone: str | None
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
        raise Unsupported(f"{kind} object column")
    keyed = sorted((c[len(kind) + 1 :], c) for c in _columns.flat_columns(work, kind))
    columns = []
    for key, column in keyed:
        values, quote = value_json(work[column], naive_timezone)
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


def _user_ids(s: pd.Series) -> tuple[pa.BinaryArray, bytes]:
    """(values, quote) of the ids: JSON is quote + value + quote."""
    if _columns.is_int_dtype(s):
        return pc.cast(_arrow(s), pa.string()).cast(BIN), b'"'
    arr = _arrow(s) if _columns.is_text_dtype(s) else pa.array(_columns.ids_to_wire(s), pa.string())
    if _needs_escape(arr):
        return _quote(arr), b""
    return arr.cast(BIN), b'"'


def _event_types(s: pd.Series) -> pa.BinaryArray:
    # validated: ^[a-z0-9]+(?:_[a-z0-9]+)*$, nothing to escape
    if pd.api.types.is_object_dtype(s.dtype):
        return pa.array(s.tolist(), pa.string()).cast(BIN)
    return _arrow(s).cast(BIN)


# -- hashing and ids ----------------------------------------------------------------------


def _digests(tails: pa.BinaryArray, namespace: str | None) -> np.ndarray:
    base = hashlib.sha256(ID_PREFIX + (namespace or "").encode("utf-8") + b"\n" + _CONTEXT_OPEN)
    copy = base.copy
    data = bytes(_data_bytes(tails))  # one copy; slicing bytes beats to_pylist/memoryview
    offsets = np.frombuffer(tails.buffers()[1], dtype=np.int32)
    bounds = offsets[tails.offset : tails.offset + len(tails) + 1] - offsets[tails.offset]
    bounds = bounds.tolist()
    out: list[bytes] = []
    append = out.append
    for lo, hi in itertools.pairwise(bounds):
        h = copy()
        h.update(data[lo:hi])
        append(h.digest())
    arr = np.frombuffer(b"".join(out), dtype=np.uint8).reshape(-1, 32)[:, :16].copy()
    arr[:, 6] = (arr[:, 6] & 0x0F) | 0x80
    arr[:, 8] = (arr[:, 8] & 0x3F) | 0x80
    return arr


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
) -> tuple[list[bytes], np.ndarray]:
    """Wire bytes and id digests of validated rows of ``work``, in row order; raises
    Unsupported when the per-row path must do it. ``occurred_ms``: the rows' occurred_at
    in epoch ms (validation normalised the column already)."""
    if options.id_columns or "message_id" in work.columns:
        raise Unsupported("message_id column or id_columns")
    n = len(work)
    tz = options.rules.naive_timezone
    context = _object_fragments(work, "context", tz)
    properties = _object_fragments(work, "properties", tz)
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
    digests = _digests(tails, options.namespace)
    uuids = _fixed_width(uuid_text(digests))
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
    body: list[bytes] = rows.to_pylist()
    return body, digests
