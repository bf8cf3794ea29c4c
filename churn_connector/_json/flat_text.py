"""JSON-object texts of the plain form most exports write, checked and written column-wise.

A text is *plain* when it is one object whose members are strings without escapes, integers
of at most 18 digits (so within 64 bits) or booleans: ``{"plan": "pro", "seats": 3}``.
Spaces and tabs may surround any token; a repeated key is allowed by the form and refused by
Arrow's reader ("Column(/plan) was specified twice in row 0", for the whole read): the slice
then takes the per-text loop, which finds the texts that repeat a key and refuses them
(check ``repeated_key``). So reading the texts with Arrow is also the proof that none repeats.

For such a text, orjson's parse can only succeed and give a dict, so matching the form is the
whole validity check; and its sorted members (what the wire carries) are the same as those
Arrow's JSON reader and ``_json.arrow.struct_members`` write, because nothing in the form
reads two ways: no escapes, no floats (whose type Arrow would unify across rows), no nulls
(which a struct cannot tell from an absent key), no nested containers. Anything else is left
to the per-text loop of ``_validate.columns.text_objects_ok``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pjson

from .arrow import BIN, data_bytes, struct_members

__all__ = ["PLAIN", "plain_members", "plain_table", "plain_texts"]

_WS = r"[ \t]*"
_STRING = r'"[^"\\\x00-\x1f]*"'
_VALUE = rf"(?:{_STRING}|-?(?:0|[1-9][0-9]{{0,17}})|true|false)"
_MEMBER = rf"{_WS}{_STRING}{_WS}:{_WS}{_VALUE}{_WS}"
# RE2 (Arrow's regex engine): ``$`` is the end of the text only, never before a newline
PLAIN = rf"^{_WS}\{{(?:{_MEMBER}(?:,{_MEMBER})*|{_WS})\}}{_WS}$"

_TYPES = (pa.types.is_int64, pa.types.is_string, pa.types.is_boolean)


def plain_texts(arr: pa.Array) -> np.ndarray:
    """Which texts of a string column are plain (False for a null)."""
    matched = pc.match_substring_regex(arr, PLAIN).fill_null(False)
    out: np.ndarray = matched.to_numpy(zero_copy_only=False)
    return out


def plain_members(texts: pa.Array) -> pa.BinaryArray | None:
    """Each plain text's sorted members (its object without the braces), as orjson's
    ``dumps(loads(text), option=OPT_SORT_KEYS)[1:-1]``; None when Arrow's reader refuses
    the column (a repeated key, a key holding a number in one text and a string in another)
    or reads a type outside the form."""
    table = plain_table(texts)
    if table is None:
        return None
    n = len(texts)
    if table.num_columns == 0:  # only empty objects
        return pa.array(np.full(n, b"", dtype=object), BIN)
    struct = pa.StructArray.from_arrays(
        [column.combine_chunks() for column in table.columns], names=table.column_names
    )
    members = struct_members(struct, None, v2=True)  # no nulls, no floats: v1 writes the same
    assert members is not None
    return members.cast(BIN)


def plain_table(texts: pa.Array) -> pa.Table | None:
    """Plain texts read by Arrow's JSON reader, a row each; None when the reader refuses
    them (a key named twice in a text, a key's type differing between texts) or reads a
    type outside the form. A table is the proof that no text names a key twice."""
    n = len(texts)
    lines = pc.binary_join_element_wise(texts.cast(BIN), b"\n", b"")
    ndjson = data_bytes(lines)
    options = pjson.ReadOptions(use_threads=False, block_size=max(len(ndjson), 1 << 16) + 1)
    try:
        table = pjson.read_json(pa.BufferReader(pa.py_buffer(ndjson)), read_options=options)
        timestamps = [f for f in table.schema if pa.types.is_timestamp(f.type)]
        if timestamps:  # Arrow reads date-like strings as times: read them as the strings
            parse = pjson.ParseOptions(
                explicit_schema=pa.schema([(f.name, pa.string()) for f in timestamps]),
                unexpected_field_behavior="infer",
            )
            table = pjson.read_json(
                pa.BufferReader(pa.py_buffer(ndjson)), read_options=options, parse_options=parse
            )
    except pa.ArrowInvalid:
        return None
    if table.num_rows != n or not all(any(t(f.type) for t in _TYPES) for f in table.schema):
        return None
    return table
