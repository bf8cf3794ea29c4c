"""The column-wise events path: validated rows -> the exact bytes of the per-row path (events).

For every field a column of JSON fragments (``"key":value``, null where the key is omitted)
is built with Arrow/numpy kernels and the fragments are joined row-wise in C, in canonical
key order. The ids are hashed by ``ids.digests``: one native call a slice with the ``fast``
extra, else a hashlib loop over the rows.

    canonical(row) = CONTEXT_OPEN + TAIL[row]                       (what is hashed)
    wire(row)      = ID_OPEN + b'"' + UUID + b'"' + [b","] + TAIL[row]

Both paths share their primitives (``ids``: the hashing loop, the UUID bits and text, the
context opening; ``ms_text``: the millisecond spelling); byte identity of the
values rests on the rules of ``_json.arrow`` (tests hold both paths to the same bytes).

Which slices take this path (``fallback_reason`` declares it, from the columns alone):
``external_user_id``, ``event_type`` and ``occurred_at`` of any validated dtype, and
``properties`` / ``context`` as flat ``<kind>.<key>`` columns of integers, booleans, floats,
strings or datetimes; or as one Arrow struct column whose fields are integers, booleans,
floats, strings, zoned timestamps or structs of them; or as one column of JSON-object text
(parsed, validation checked it, and written back sorted). Id format v2 (``_json.values``):
integral floats are written as integers and a struct's null fields are omitted; v1 keeps
0.1's spelling. Both paths follow ``options.id_format``.

Everything else takes the per-row path, which stays the reference: ``message_id`` columns,
``id_columns``, object or categorical columns (dicts, mixed values), an object column beside
flat columns of the same kind, struct fields of other types (lists, maps, naive timestamps,
decimals, ...). ``events.build_events`` logs the reason at DEBUG and counts the paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._json import (
    BIN,
    NO_PARSES,
    NotColumnar,
    ParsedTexts,
    TimestampProblem,
    contiguous,
    field_problem,
    fixed_width,
    floats,
    format_ms_binary,
    needs_escape,
    normalize_timestamps,
    quote,
    struct_members,
    with_nulls,
)
from .._options import EventOptions
from .._validate import flat_columns, ids_to_wire, is_int_dtype, is_text_dtype
from . import ids as _ids
from .canonical import json_numbers

_ID_OPEN = _ids.ID_OPEN + b'"'  # the id is a UUID: its JSON is the text in quotes

Unsupported = NotColumnar  # this slice needs the per-row path


# -- which slices this path takes -----------------------------------------------------------


def fallback_reason(work: pd.DataFrame, options: EventOptions) -> str | None:
    """Why a slice with these columns and options needs the per-row path, in a few words;
    None when this path writes it. Decided from the options and dtypes alone (the module
    docstring lists what is covered); ``build`` refuses exactly these slices."""
    if options.id_columns:
        return "id_columns hash chosen columns"
    if "message_id" in work.columns:
        return "a message_id column"
    for kind in ("context", "properties"):
        flat = flat_columns(work, kind)
        if kind in work.columns:
            if flat:
                return f"a {kind} column beside {kind}.<key> columns"
            cells = work[kind]
            if is_text_dtype(cells):
                continue
            dtype = cells.dtype
            if not (isinstance(dtype, pd.ArrowDtype) and pa.types.is_struct(dtype.pyarrow_dtype)):
                return f"{kind} is a column of {_dtype_words(dtype)}, not an Arrow struct"
            problem = field_problem(dtype.pyarrow_dtype)
            if problem is not None:
                return f"{kind}: {problem}"
            continue
        for column in flat:
            if _flat_kind(work[column].dtype) is None:
                return f"{column} is a column of {_dtype_words(work[column].dtype)}"
    return None


def _flat_kind(dtype: Any) -> str | None:
    """How ``value_json`` writes a flat column of this dtype; None: the per-row path must."""
    if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
        return "time"
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
        return None
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        return "exact"
    if pd.api.types.is_string_dtype(dtype):
        return "string"
    return None


def _dtype_words(dtype: Any) -> str:
    if pd.api.types.is_object_dtype(dtype):
        return "Python objects (object dtype)"
    if isinstance(dtype, pd.CategoricalDtype):
        return "categories"
    return f"dtype {dtype}"


# -- building blocks ----------------------------------------------------------------------


def value_json(
    s: pd.Series, naive_timezone: str | None, *, v2: bool = True
) -> tuple[pa.Array, bytes]:
    """(values, quote): JSON text of each cell of a flat column is quote + value + quote
    (null where the key is omitted). Strings needing no escape are returned raw; in v2
    integral floats are integers."""
    kind = _flat_kind(s.dtype)
    if kind == "time":
        norm = normalize_timestamps(s, naive_timezone)
        return with_nulls(format_ms_binary(norm.ms), norm.problem != TimestampProblem.OK), b'"'
    if kind == "float":
        arr = s.to_numpy(dtype="float64", na_value=np.nan)
        return with_nulls(floats(arr, whole_as_int=v2), np.isnan(arr)), b""
    if kind == "exact":
        return pc.cast(contiguous(s), pa.string()).cast(BIN), b""
    if kind == "string":
        arr = contiguous(s)
        if needs_escape(arr):
            return quote(arr), b""
        return arr.cast(BIN), b'"'
    raise Unsupported(f"dtype {s.dtype}")  # fallback_reason says so first


def _object_fragments(
    work: pd.DataFrame,
    kind: str,
    naive_timezone: str | None,
    *,
    v2: bool,
    parsed: ParsedTexts = NO_PARSES,
) -> list[pa.Array | bytes]:
    """Pieces of the sorted ``"key":value`` members of the flat ``<kind>.<key>`` columns,
    to be spliced into the row join: a column without omitted cells goes in inline
    (key scalar, values, closing quote); a column with omitted cells as one fragment
    array, null where the key is omitted.

    With an always-present column (the anchor), keys before it carry a trailing comma and
    keys after it a leading one. Otherwise the comma depends on whether an earlier key is
    present in that row (if_else). ``parsed``: validation's parse of a JSON-text column.
    """
    if kind in work.columns:  # alone, as JSON text or an Arrow struct (fallback_reason)
        cells = work[kind]
        if is_text_dtype(cells):
            arr = contiguous(cells)
            return [_text_members(arr, parsed.members(kind, arr), v2=v2)]
        struct = contiguous(cells)
        assert isinstance(struct, pa.StructArray)
        members = struct_members(struct, naive_timezone, v2=v2)
        return [members] if members is not None else []
    keyed = sorted((c[len(kind) + 1 :], c) for c in flat_columns(work, kind))
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


def _text_members(arr: pa.Array, members: pa.BinaryArray | None, *, v2: bool) -> pa.Array:
    """The sorted members of each validated JSON-object text of ``arr`` (null for a null
    cell): ``members`` when validation's parse of these texts was handed over, else parsed
    here. Its nulls are written data and stay, in v2 its integral floats become integers."""
    # validation refused integers beyond 64 bits, so orjson reads every integer exactly
    loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
    if members is None:
        members = pa.array(
            [None if t is None else dumps(loads(t), option=sort)[1:-1] for t in arr.to_pylist()],
            BIN,
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
    texts = arr.take(pa.array(rows, pa.int64())).to_pylist()
    fixed = [dumps(json_numbers(loads(t)), option=sort)[1:-1] for t in texts]
    return pc.replace_with_mask(members, whole, pa.array(fixed, BIN))


_WHOLE_FLOAT = r"[0-9]\.0(?:[,}\]]|$)"


def _user_ids(s: pd.Series) -> tuple[pa.BinaryArray, bytes]:
    """(values, quote) of the ids: JSON is quote + value + quote."""
    if is_int_dtype(s):
        return pc.cast(contiguous(s), pa.string()).cast(BIN), b'"'
    arr = contiguous(s) if is_text_dtype(s) else pa.array(ids_to_wire(s), pa.string())
    if needs_escape(arr):
        return quote(arr), b""
    return arr.cast(BIN), b'"'


def _event_types(s: pd.Series) -> pa.BinaryArray:
    # validated: ^[a-z0-9]+(?:_[a-z0-9]+)*$, nothing to escape
    if pd.api.types.is_object_dtype(s.dtype):
        return pa.array(s.tolist(), pa.string()).cast(BIN)
    return contiguous(s).cast(BIN)


# -- the slice -----------------------------------------------------------------------------


def build(
    work: pd.DataFrame,
    options: EventOptions,
    occurred_ms: np.ndarray,
    parsed: ParsedTexts = NO_PARSES,
) -> tuple[pa.BinaryArray, np.ndarray]:
    """Wire bytes and id digests of validated rows of ``work``, in row order; raises
    Unsupported when the per-row path must do it. ``occurred_ms``: the rows' occurred_at
    in epoch ms (validation normalised the column already); ``parsed``: validation's parse
    of its JSON-object text columns (``_json.parsed``), written from instead of parsing the
    texts again."""
    reason = fallback_reason(work, options)
    if reason is not None:
        raise Unsupported(reason)
    n = len(work)
    tz = options.rules.naive_timezone
    v2 = options.id_format == "v2"
    context = _object_fragments(work, "context", tz, v2=v2, parsed=parsed)
    properties = _object_fragments(work, "properties", tz, v2=v2, parsed=parsed)
    times = format_ms_binary(occurred_ms)
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
    prefix = _ids.PREFIXES[options.id_format]
    digests = _ids.digests(tails, options.namespace, prefix, lead=_ids.CONTEXT_OPEN)
    uuids = fixed_width(_ids.uuid_text(digests))
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
