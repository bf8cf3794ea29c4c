"""Column-level helpers shared by validation and the wire transform (one place for each rule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._json import (
    MAX_DEPTH,
    NAME_END,
    OBJECT_LEVEL,
    InexactValue,
    RepeatedKey,
    RepeatedKeyError,
    TimestampProblem,
    ValueRules,
    arrow_backed,
    first_repeat,
    format_ms,
    has_surrogate,
    is_missing,
    json_floats,
    normalize_timestamps,
    object_value,
    plain_members,
    plain_table,
    plain_texts,
    to_json,
)
from .._read import marked_pylist

MISSING: Any = object()  # a cell that is omitted from the wire (null, NaN, NA)


def is_float_dtype(s: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(s.dtype)


def is_int_dtype(s: pd.Series) -> bool:
    dtype = s.dtype
    return pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _is_object(dtype: Any) -> bool:
    return pd.api.types.is_object_dtype(dtype)


def is_text_dtype(s: pd.Series) -> bool:
    """A dedicated string dtype (``str``, ``string``, pyarrow strings), not ``object``."""
    return not _is_object(s.dtype) and pd.api.types.is_string_dtype(s.dtype)


def is_nested_arrow(s: pd.Series) -> bool:
    """An Arrow-typed column of lists, structs or maps (pandas' ``dtype_backend="pyarrow"``,
    or a struct an Arrow input kept)."""
    dtype = s.dtype
    return isinstance(dtype, pd.ArrowDtype) and pa.types.is_nested(dtype.pyarrow_dtype)


def values_of(s: pd.Series) -> list[Any]:
    """The Python values of a column as the wire reads them. An Arrow column of lists,
    structs or maps gives Arrow's own values: a null in a list stays None and an int an int
    (``to_numpy`` would give pandas' NaN and floats), and a map is a dict, as it is in an
    Arrow input's flat columns, on every supported pyarrow (a map with a repeated key is a
    ``RepeatedKey``, which validation refuses by name)."""
    if not is_nested_arrow(s):
        return s.tolist()
    chunked = pa.array(s)
    arr = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    # a map that repeats a key is a RepeatedKey in its place: its row is invalid, by name
    return marked_pylist(arr)


def elementwise(s: pd.Series, test: Callable[[Any], bool]) -> pd.Series:
    """Apply ``test`` to each non-null cell; null cells pass (``not_nullable`` reports them)."""
    out = np.ones(len(s), dtype=bool)
    values = values_of(s) if isinstance(s.dtype, pd.ArrowDtype) else s.to_numpy(dtype=object)
    for i, v in enumerate(values):
        if not is_missing(v):
            try:
                out[i] = test(v)
            except Exception:
                out[i] = False
    return pd.Series(out, index=s.index)


def _is_id_value(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | np.integer):
        return True
    # lone surrogates cannot be encoded as UTF-8 JSON
    return isinstance(v, str) and not has_surrogate(v)


def id_type_ok(s: pd.Series) -> pd.Series:
    """external_user_id: strings or integers; floats are a warehouse bug, never accepted."""
    if is_int_dtype(s) or is_text_dtype(s):
        return pd.Series(True, index=s.index)
    if is_float_dtype(s) or pd.api.types.is_bool_dtype(s.dtype):
        return s.isna()
    return elementwise(s, _is_id_value)


def not_blank(s: pd.Series) -> pd.Series:
    """Strings hold more than white space (nulls and non-strings pass: other checks own them)."""
    if is_int_dtype(s):
        return pd.Series(True, index=s.index)
    if is_text_dtype(s):  # vectorised: this runs on every id of every row
        filled = (s.str.strip().str.len() > 0).fillna(True)
        return pd.Series(filled.to_numpy(dtype=bool), index=s.index)
    return elementwise(s, lambda v: not isinstance(v, str) or bool(v.strip()))


def ids_to_wire(s: pd.Series) -> list[str]:
    """Ids as wire strings: integers rendered as their decimal digits, never ``12.0``."""
    if is_int_dtype(s):
        return [str(v) for v in s.tolist()]
    return [v if isinstance(v, str) else str(int(v)) for v in s.tolist()]


def strings_ok(s: pd.Series) -> pd.Series:
    if is_text_dtype(s):
        return pd.Series(True, index=s.index)
    return elementwise(s, lambda v: isinstance(v, str) and not has_surrogate(v))


def fullmatch(s: pd.Series, pattern: str) -> pd.Series:
    """Whole-string match; non-strings pass here because the type check reports them."""
    objects = _is_object(s.dtype)
    text = s.astype("string[python]") if objects else s
    is_str = s.map(lambda v: isinstance(v, str)) if objects else s.notna()
    matched = text.where(is_str).str.fullmatch(pattern)
    return pd.Series(
        matched.fillna(True).to_numpy(dtype=bool) | ~is_str.to_numpy(dtype=bool), index=s.index
    )


def scalar_column(s: pd.Series, path: str, rules: ValueRules) -> tuple[list[Any], dict[int, str]]:
    """A flattened ``properties.<key>``-style column -> (wire values or MISSING, problems by pos).

    Nulls are omitted (MISSING), never sent as null. Vectorised by dtype; object columns are
    checked cell by cell because they may hold anything.
    """
    n = len(s)
    null = s.isna().to_numpy(dtype=bool)
    problems: dict[int, str] = {}
    dtype = s.dtype
    values: list[Any]
    if isinstance(dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(dtype):
        norm = normalize_timestamps(s, rules.naive_timezone)
        texts = format_ms(norm.ms)
        values = [MISSING] * n
        for i in range(n):
            code = norm.problem[i]
            if code == TimestampProblem.OK:
                values[i] = texts[i]
            elif code != TimestampProblem.NULL:
                problems[i] = f"{path}: naive or invalid local datetime; pass naive_timezone"
        return values, problems
    if pd.api.types.is_timedelta64_dtype(dtype) or isinstance(
        dtype, pd.PeriodDtype | pd.IntervalDtype
    ):
        for i in np.flatnonzero(~null).tolist():
            problems[i] = f"{path}: a {dtype} value has no exact JSON form; convert it"
        return [MISSING] * n, problems
    if isinstance(dtype, pd.CategoricalDtype):
        s = s.astype(object)
        dtype = s.dtype
    if pd.api.types.is_float_dtype(dtype):
        arr = s.to_numpy(dtype="float64", na_value=np.nan)
        for i in np.flatnonzero(np.isinf(arr)).tolist():
            problems[i] = f"{path}: {arr[i]} is not a JSON number (infinity)"
        # v2: 3.0 is sent as 3, whichever reader made an int column with nulls float64
        numbers = json_floats(arr) if rules.v2 else arr.tolist()
        values = [MISSING if (null[i] or i in problems) else v for i, v in enumerate(numbers)]
        return values, problems
    raw = values_of(s)
    if not _is_object(dtype) and not is_nested_arrow(s):
        # int, bool, nullable and string dtypes: every non-null value is already exact
        return [MISSING if null[i] else v for i, v in enumerate(raw)], problems
    values = [MISSING] * n
    for i, v in enumerate(raw):
        if is_missing(v):
            continue
        try:
            values[i] = to_json(v, path, rules, OBJECT_LEVEL + 1)
        except RepeatedKeyError as exc:
            problems[i] = RepeatProblem(exc)
        except InexactValue as exc:
            problems[i] = str(exc)
    return values, problems


class RepeatProblem(str):
    """A flat cell's problem that is a key named twice: check ``repeated_key``'s, not the
    value check's."""

    __slots__ = ()


def column_repeats(s: pd.Series) -> np.ndarray:
    """Positions of the cells of a flat column that name a key twice: JSON text read with
    ``dtypes={...: "json"}`` (a ``RepeatedKey`` in its place) or an Arrow map, anywhere in
    a nested Arrow value. Other dtypes cannot hold one."""
    if not (is_nested_arrow(s) or _is_object(s.dtype)):
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero([_holds_repeat(v) for v in values_of(s)]).astype(np.int64)


def _holds_repeat(value: Any) -> bool:
    kind = type(value)
    if kind is RepeatedKey:
        return True
    if kind is dict:
        return any(_holds_repeat(v) for v in value.values())
    if kind is list or kind is tuple:
        return any(_holds_repeat(v) for v in value)
    return False


def column_problems(s: pd.Series, path: str, rules: ValueRules) -> np.ndarray:
    """Positions of the cells of a flat column that cannot be sent exactly: the keys of
    ``scalar_column``'s problems, without building the wire values where the dtype says
    enough (exact dtypes have none, floats only their infinities)."""
    dtype = s.dtype
    if pd.api.types.is_float_dtype(dtype):
        return np.flatnonzero(np.isinf(s.to_numpy(dtype="float64", na_value=np.nan)))
    exact = (
        pd.api.types.is_integer_dtype(dtype)
        or pd.api.types.is_bool_dtype(dtype)
        or is_text_dtype(s)
    )
    if exact and not isinstance(dtype, pd.CategoricalDtype):
        return np.empty(0, dtype=np.int64)
    problems = scalar_column(s, path, rules)[1].items()
    # a key named twice is check repeated_key's (column_repeats)
    return np.fromiter((i for i, m in problems if type(m) is not RepeatProblem), dtype=np.int64)


# the largest magnitude below which a float64 holds every integer exactly
EXACT_FLOAT_INTEGERS = 2**53


def floats_beyond_exact(s: pd.Series) -> np.ndarray:
    """Positions of a numpy or pandas float column's values beyond +-2**53.

    Such a float may be an int64 a reader rounded (pandas reads an integer column with
    nulls as float64: 9007199254741003 becomes 9007199254741004.0), and nothing in the
    value says which. An Arrow float column is left alone: Arrow never turns integers
    into floats, so its floats are the source's own."""
    dtype = s.dtype
    if isinstance(dtype, pd.ArrowDtype) or not pd.api.types.is_float_dtype(dtype):
        return np.empty(0, dtype=np.int64)
    values = s.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(invalid="ignore"):
        # infinities are check <kind>_value_json's (no JSON form at all)
        return np.flatnonzero((np.abs(values) > EXACT_FLOAT_INTEGERS) & np.isfinite(values))


def is_struct(s: pd.Series) -> bool:
    """An Arrow struct column (what a Parquet or Arrow input's nested object becomes)."""
    dtype = s.dtype
    return isinstance(dtype, pd.ArrowDtype) and pa.types.is_struct(dtype.pyarrow_dtype)


def struct_lacks(s: pd.Series, key: str) -> pd.Series:
    """True where a struct column's value does not hold ``key`` (null values hold nothing)."""
    struct = s.dtype.pyarrow_dtype  # type: ignore[union-attr]
    if struct.get_field_index(key) < 0:
        return pd.Series(True, index=s.index)
    return s.isna()


def struct_problems(s: pd.Series, rules: ValueRules) -> np.ndarray | None:
    """Positions of an Arrow struct column's values that cannot be sent exactly, read from
    the field types (a float's NaN or infinity, a naive timestamp without a zone); None when
    a field's type needs the per-value check (lists, maps, decimals, bytes, local times)."""
    if not is_struct(s):
        return None
    chunked = pa.array(s)
    arr = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    bad = np.zeros(len(s), dtype=bool)
    return np.flatnonzero(bad) if _struct_ok(arr, rules, bad, depth=OBJECT_LEVEL) else None


def text_objects_ok(s: pd.Series, path: str, rules: ValueRules) -> np.ndarray | None:
    """Which cells of a text column of JSON objects can be sent exactly (nulls pass);
    None when ``s`` is not a text column (``text_objects`` says why a cell cannot)."""
    found = text_objects(s, path, rules)
    return None if found is None else found.ok & ~found.repeated


@dataclass(frozen=True)
class TextObjects:
    """A text column's verdicts: ``ok`` False where a text is not an exact JSON object
    (check ``<kind>_json``); ``repeated`` True where an otherwise good text names a key
    twice in one object (check ``repeated_key``). With ``hand_over``: ``members``, each
    valid object's sorted members (null for a null or refused text), parsed from
    ``texts``."""

    ok: np.ndarray
    repeated: np.ndarray
    texts: pa.Array | None = None
    members: pa.BinaryArray | None = None


def text_objects(
    s: pd.Series, path: str, rules: ValueRules, *, hand_over: bool = False
) -> TextObjects | None:
    """The verdicts on a text column of JSON objects (nulls pass); None when ``s`` is not
    a text column. ``hand_over``: give each valid object's sorted members too, for the wire
    step (``_json.parsed``), from this one parse (when the column is Arrow's: only its
    buffers can be found again).

    A plain text (``_json.flat_text``) is valid by its form, and Arrow writes its members;
    Arrow's reader refuses a repeated key, so a table read is the proof that none repeats.
    Of the others, a text with no ``[`` and one ``{`` holds no nested container and, without
    a run of 19+ digits, no integer beyond 64 bits, so parsing it is the whole check (orjson
    refuses NaN literals, infinities and lone surrogates) with the count of names it writes
    (``names_written``): a parse that kept fewer may have dropped a repeat, and only such a
    text is parsed again keeping repeats. Other texts take the full walk.
    """
    if not is_text_dtype(s):
        return None
    try:
        chunked = pa.array(s)
    except (pa.ArrowInvalid, UnicodeEncodeError):
        return None  # Python strings Arrow cannot hold (a lone surrogate): the full walk
    arr = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    ok = np.ones(len(arr), dtype=bool)
    repeated = np.zeros(len(arr), dtype=bool)
    # the wire step needs each object's members sorted: written here from the one parse
    # and handed over (``_json.parsed``), so no text is parsed twice
    hand_over = hand_over and arrow_backed(s)
    # plain texts (most exports' objects) are valid by their form and written by Arrow's
    # JSON reader; the others, and all of them if Arrow refuses the column, parsed here
    plain = plain_texts(arr)
    fast = np.flatnonzero(plain)
    fast_members = None
    if len(fast):
        texts = arr if len(fast) == len(arr) else arr.take(fast)
        if hand_over:
            fast_members = plain_members(texts)
            if fast_members is None:
                fast = fast[:0]
        elif plain_table(texts) is None:  # read to prove no key repeats
            fast = fast[:0]
    rest = np.flatnonzero(arr.is_valid().to_numpy(zero_copy_only=False))
    if len(fast):
        rest = np.setdiff1d(rest, fast, assume_unique=True)
    others = arr.take(rest)
    nested = pc.or_(
        pc.greater(pc.count_substring(others, "{"), 1),
        pc.greater(pc.count_substring(others, "["), 0),
    )
    slow = pc.or_(nested, pc.match_substring_regex(others, "[0-9]{19}"))
    walk = slow.fill_null(False).to_numpy(zero_copy_only=False)
    names = pc.count_substring_regex(others, NAME_END).fill_null(0).to_numpy()
    members: list[bytes | None] = [None] * len(rest)
    loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
    for k, (i, text) in enumerate(zip(rest.tolist(), others.to_pylist(), strict=True)):
        if walk[k]:
            try:
                object_value(text, path, rules)
            except RepeatedKeyError:
                repeated[i] = True
            except Exception:
                ok[i] = False
            else:  # an exact value: every integer fits 64 bits, so orjson reads it exactly
                if hand_over:
                    members[k] = dumps(loads(text), option=sort)[1:-1]
            continue
        try:
            parsed = loads(text)
        except orjson.JSONDecodeError:
            ok[i] = False
            continue
        if type(parsed) is not dict:
            ok[i] = False
        elif len(parsed) != names[k] and first_repeat(text) is not None:
            repeated[i] = True
        elif hand_over:
            members[k] = dumps(parsed, option=sort)[1:-1]
    if not hand_over:
        return TextObjects(ok, repeated)
    if fast_members is not None and len(fast) == len(arr):
        # every text plain: the members are in row order
        return TextObjects(ok, repeated, arr, fast_members)
    # row i's members: from Arrow for a plain text, from the loop for the rest
    where = np.full(len(arr), -1, dtype=np.int64)
    where[rest] = np.arange(len(rest))
    slow_members = pa.array(members, pa.binary())
    if fast_members is not None:
        where[fast] = len(rest) + np.arange(len(fast))
        slow_members = pa.concat_arrays([slow_members, fast_members])
    return TextObjects(ok, repeated, arr, slow_members.take(pa.array(where, mask=where < 0)))


def _struct_ok(arr: pa.StructArray, rules: ValueRules, bad: np.ndarray, *, depth: int) -> bool:
    """Mark the rows of ``bad`` whose struct value cannot be sent; False to give up."""
    if depth >= MAX_DEPTH:
        return False
    types = pa.types
    for child in arr.flatten():  # the parent's nulls applied: only values that exist
        t = child.type
        valid = child.is_valid().to_numpy(zero_copy_only=False)
        if types.is_floating(t):
            values = child.to_numpy(zero_copy_only=False).astype(np.float64)
            bad |= valid & ~np.isfinite(np.where(valid, values, 0.0))
        elif types.is_timestamp(t) and t.tz is None:
            if rules.naive_timezone is not None:
                return False  # a local time: DST gaps and repeats are checked value by value
            bad |= valid
        elif types.is_struct(t):
            if not _struct_ok(child, rules, bad, depth=depth + 1):
                return False
        elif not (
            types.is_integer(t)
            or types.is_boolean(t)
            or types.is_string(t)
            or types.is_large_string(t)
            or types.is_timestamp(t)
            or types.is_null(t)
        ):
            return False
    return True


def flat_columns(df: pd.DataFrame, kind: str) -> list[str]:
    """The ``<kind>.<key>`` columns of a frame, in column order."""
    prefix = kind + "."
    return [
        c
        for c in df.columns
        if isinstance(c, str) and c.startswith(prefix) and len(c) > len(prefix)
    ]


def key_conflicts(df: pd.DataFrame, kind: str, rules: ValueRules) -> pd.Series:
    """True where a row's ``<kind>`` object and a non-null ``<kind>.<key>`` both set one key."""
    ok = pd.Series(True, index=df.index)
    flats = flat_columns(df, kind)
    if kind not in df.columns or not flats:
        return ok
    objects = values_of(df[kind])
    for column in flats:
        key = column[len(kind) + 1 :]
        for i in np.flatnonzero(df[column].notna().to_numpy(dtype=bool)).tolist():
            try:
                obj = object_value(objects[i], kind, rules)
            except InexactValue:
                continue  # reported by the object's own check
            if key in obj:
                ok.iloc[i] = False
    return ok


def merged_objects(df: pd.DataFrame, kind: str, rules: ValueRules) -> list[dict[str, Any]]:
    """Per row: the ``<kind>`` object merged with its flattened columns (validated rows only)."""
    flats = sorted(flat_columns(df, kind))
    keys = [c[len(kind) + 1 :] for c in flats]
    columns = [scalar_column(df[c], c, rules)[0] for c in flats]
    # one dict per row built in a single comprehension: far fewer interpreter steps
    # than assigning column by column
    if columns:
        flat = [
            {k: v for k, v in zip(keys, row, strict=True) if v is not MISSING}
            for row in zip(*columns, strict=True)
        ]
    else:
        flat = [{} for _ in range(len(df))]
    if kind not in df.columns:
        return flat
    objects = [object_value(v, kind, rules) for v in values_of(df[kind])]
    if columns:
        for obj, extra in zip(objects, flat, strict=True):
            obj.update(extra)
    return objects
