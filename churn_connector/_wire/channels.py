"""Channel items (contract 2.3) and the convenience columns that build them (2.4).

Shared by the identities schema (which checks them) and the identify bodies (``identities``,
which build them), so both read a row the same way. CRM exports spell things their own way;
what is unambiguous is read: flags as booleans, integer 0/1 or the words true/false, t/f,
yes/no, y/n, 1/0 (any case); E.164 numbers written with a leading ``+`` and spaces, dots,
dashes or parentheses between digit groups (national numbers only with ``phone_region``,
which ``phonenumbers`` decides); emails without surrounding white space (case kept);
``channels`` as a list or as JSON text.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._core import CHANNELS, BlankConsent
from .._json import is_missing, repeat_in
from .._options import (
    ADDRESS_COLUMNS,
    CONSENT_COLUMNS,
    E164_PATTERN,
    EMAIL_PATTERN,
    ITEM_FIELDS,
    PUSH_COLUMNS,
)
from .consent import Consent, Marks, consent_marks, decide

_EMAIL = re.compile(EMAIL_PATTERN)
_E164 = re.compile(E164_PATTERN)
# a local number may hold digits and punctuation only: letters (vanity numbers, "ext")
# would be translated or dropped by phonenumbers, which is guessing
_PHONE_CHARS = re.compile(r"[\d\s()+\-./]+")
# '+', the country code, then digit groups, each after at most one space, dot or dash and
# optionally in parentheses; "(0)", a national trunk prefix (+44 (0)20 ...), is refused
_WRITTEN_E164 = r"^\+[0-9]+(?:[ .\-]?(?:\([0-9]+\)|[0-9]+))*$"
TRUE_WORDS = ("true", "t", "yes", "y", "1")
FALSE_WORDS = ("false", "f", "no", "n", "0")
FLAG_SPELLINGS = "true/false, t/f, yes/no, y/n, 1/0 (any case), or a boolean"
_FLAG_KINDS = (bool, np.bool_, int, np.integer, float, np.floating, str)


def _strings(s: pd.Series) -> pa.Array:
    """The column as Arrow strings, null where a cell is not a str."""
    if pd.api.types.is_object_dtype(s.dtype):
        values = [v if isinstance(v, str) else None for v in s.tolist()]
        try:
            return pa.array(values, pa.string())
        except (UnicodeEncodeError, pa.ArrowException):
            values = [v if v is None or v.isascii() or _encodes(v) else None for v in values]
            return pa.array(values, pa.string())
    arr = pa.array(s, pa.string(), from_pandas=True)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bools(arr: pa.Array) -> np.ndarray:
    return arr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)  # type: ignore[no-any-return]


def blank_cells(s: pd.Series) -> np.ndarray:
    """True where a cell is blank: None, NaN, NaT, pd.NA, or text of white space only (an
    empty CSV cell is null already; ``"  "`` is not, and means nothing either)."""
    null = s.isna().to_numpy(dtype=bool)
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        return null
    text = pc.utf8_trim_whitespace(_strings(s))
    blank: np.ndarray = null | _bools(pc.equal(text, ""))
    return blank


def flag_values(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(value, ok) per cell of a flag column; blank cells are ok (and False)."""
    null = blank_cells(s)
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return s.fillna(False).to_numpy(dtype=bool), np.ones(len(s), dtype=bool)
    if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_float_dtype(dtype):
        # floats too: an integer column with nulls arrives as float (1.0 / 0.0)
        v = s.to_numpy(dtype="float64", na_value=0.0)
        return v == 1, null | (v == 0) | (v == 1)
    if pd.api.types.is_object_dtype(dtype):
        values = s.tolist()
        # a number or a bool is a spelling by its value; Decimals, bytes and others are not
        kinds = np.array([isinstance(v, _FLAG_KINDS) for v in values], dtype=bool)
        text = [
            None if not k else v if isinstance(v, str) else _number_word(v)
            for v, k in zip(values, kinds, strict=True)
        ]
        arr = pa.array(text, pa.string())
    else:
        kinds = np.ones(len(s), dtype=bool)
        arr = _strings(s)
    low = pc.utf8_lower(arr)
    is_true = _bools(pc.is_in(low, pa.array(TRUE_WORDS)))
    is_false = _bools(pc.is_in(low, pa.array(FALSE_WORDS)))
    return is_true, null | (kinds & (is_true | is_false))


def _number_word(value: Any) -> str | None:
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if value == 1:
        return "1"
    return "0" if value == 0 else None


def phone_addresses(s: pd.Series, region: str | None) -> list[str | None]:
    """Wire addresses of a phone column: E.164 (punctuation removed), or a national number
    valid in ``region``; None where null, not a string, or not a valid number."""
    arr = _strings(s)
    digits = pc.replace_substring_regex(arr, r"[ .\-()]", "")
    written = pc.and_(
        pc.match_substring_regex(arr, _WRITTEN_E164),
        pc.match_substring_regex(digits, "^" + E164_PATTERN + "$"),
    )
    ok = _bools(pc.and_(written, pc.invert(pc.match_substring(arr, "(0)"))))
    out: list[str | None] = digits.to_pylist()
    if region is None:
        return [v if k else None for v, k in zip(out, ok, strict=True)]
    texts = arr.to_pylist()
    return [
        v if k else None if text is None else local_phone(text, region)
        for v, k, text in zip(out, ok, texts, strict=True)
    ]


def email_addresses(s: pd.Series) -> list[str | None]:
    """An email column with surrounding white space trimmed (case kept); None where null."""
    return pc.utf8_trim_whitespace(_strings(s)).to_pylist()  # type: ignore[no-any-return]


def local_phone(value: str, region: str) -> str | None:
    """A non-E.164 phone number -> E.164 when it is a valid number read in ``region``."""
    if not _PHONE_CHARS.fullmatch(value):
        return None
    import phonenumbers  # noqa: PLC0415 - ~15 ms to import; only national numbers need it

    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException:
        return None
    if number.extension or not phonenumbers.is_valid_number(number):
        return None
    text: str = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return text


def _is_token(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _address_ok(channel: str, address: str) -> bool:
    if channel == "email":
        return _EMAIL.fullmatch(address) is not None
    if channel == "sms":
        return _E164.fullmatch(address) is not None
    return _is_token(address)


def is_flag(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def is_list(value: Any) -> bool:
    return isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim == 1)


def _present(item: dict[Any, Any]) -> dict[Any, Any]:
    """A channel item without its null fields: Arrow structs carry every field, unset ones null."""
    return {k: v for k, v in item.items() if not is_missing(v)}


def _item_problems(item: dict[Any, Any], where: str) -> list[str]:
    """What is wrong with one channel item (contract 2.3), each naming ``channels[i].field``."""
    item = _present(item)
    problems = []
    for key in item:
        if key == "type":
            problems.append(
                f"{where}.type: the field is named 'channel', not 'type': rename to channel"
            )
        elif key not in ITEM_FIELDS:
            problems.append(f"{where}.{key}: unknown field (allowed: {', '.join(ITEM_FIELDS)})")
    channel = item.get("channel")
    if channel is None:
        if "type" not in item:
            problems.append(f"{where}.channel: required (one of email, sms, push)")
    elif not (isinstance(channel, str) and channel in CHANNELS):
        problems.append(f"{where}.channel: {channel!r} is not one of email, sms, push")
        channel = None
    address = item.get("address")
    if address is None:
        problems.append(f"{where}.address: required")
    elif not isinstance(address, str):
        problems.append(f"{where}.address: must be a string, got {type(address).__name__}")
    elif channel is not None and not _address_ok(channel, address):
        rule = {"email": "an email address", "sms": "an E.164 number", "push": "a token"}
        problems.append(f"{where}.address: {address!r} is not {rule[channel]}")
    for flag in ("opted_in", "verified"):
        if flag in item and not is_flag(item[flag]):
            problems.append(f"{where}.{flag}: must be true or false, got {item[flag]!r}")
    return problems


class _NotJson:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Repeated:
    """JSON text that names a key twice in one item: its items would be a guess, so it has
    none; check ``repeated_key`` refuses it (the others pass it)."""


def channels_cell(value: Any) -> Any:
    """A ``channels`` cell as items: JSON text (CSV exports) is read like ``traits``."""
    if not isinstance(value, str):
        return value
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return _NotJson(str(exc))
    return _Repeated() if repeat_in(value, parsed) is not None else parsed


def channels_repeat(value: Any) -> bool:
    """A ``channels`` cell of JSON text that names a key twice in one item (check
    ``repeated_key``): ``{"channel": "email", "channel": "sms"}`` is a guess either way."""
    return isinstance(channels_cell(value), _Repeated)


def channels_problems(value: Any) -> list[str]:
    """Every problem of one ``channels`` cell's items (non-list cells: see channels_type)."""
    value = channels_cell(value)
    if not is_list(value):
        return []
    problems: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            problems.extend(_item_problems(item, f"channels[{i}]"))
    return problems


def channels_shape(value: Any) -> str | None:
    value = channels_cell(value)
    if isinstance(value, _NotJson):
        return f"channels is text but not valid JSON ({value.reason})"
    if isinstance(value, _Repeated):
        return None  # repeated_key's
    if not is_list(value):
        return f"channels must be a list of channel items, got {type(value).__name__}"
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            return f"channels[{i}] must be an object, got {type(item).__name__}"
    return None


def explicit_items(df: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """The ``channels`` items of each row as given, null fields left out; bad cells skipped."""
    if "channels" not in df.columns:
        return [[] for _ in range(len(df))]
    out: list[list[dict[str, Any]]] = []
    for cell in df["channels"].tolist():
        cell = channels_cell(cell)
        items = cell if is_list(cell) else []
        out.append([_plain(_present(i)) for i in items if isinstance(i, dict)])
    return out


def _plain(item: dict[Any, Any]) -> dict[str, Any]:
    # numpy scalars from Arrow become the exact Python types JSON and the API expect
    return {
        str(k): bool(v) if is_flag(v) else str(v) if isinstance(v, str) else v
        for k, v in item.items()
    }


def _addresses(s: pd.Series, channel: str, region: str | None) -> list[str | None]:
    """Wire addresses of one convenience column; None where null or not a string."""
    if channel == "sms":
        return phone_addresses(s, region)
    if channel == "email":
        return email_addresses(s)
    return [v if isinstance(v, str) else None for v in s.tolist()]


def consent_of(df: pd.DataFrame, channel: str) -> Consent:
    """The ``<channel>_opted_in`` cells of each row, as the consent rules read them."""
    column = CONSENT_COLUMNS[channel]
    if column not in df.columns:
        none = np.zeros(len(df), dtype=bool)
        return Consent(column, present=False, blank=none, value=none)
    blank = blank_cells(df[column])
    value, _ = flag_values(df[column])
    return Consent(column, present=True, blank=blank, value=value & ~blank)


def has_address(df: pd.DataFrame, channel: str) -> np.ndarray:
    """True where a row holds a non-blank cell in one of the channel's address columns (a
    bad address too: its own check reports it, and it needs its consent all the same)."""
    out = np.zeros(len(df), dtype=bool)
    for column in ADDRESS_COLUMNS[channel]:
        if column in df.columns:
            out |= ~blank_cells(df[column])
    return out


def items_without_consent(value: Any) -> list[tuple[int, Any]]:
    """(index, channel) of each item of a ``channels`` cell that has no ``opted_in``."""
    value = channels_cell(value)
    if not is_list(value):
        return []
    return [
        (i, item.get("channel"))
        for i, item in enumerate(value)
        if isinstance(item, dict) and is_missing(item.get("opted_in"))
    ]


def true_flags(df: pd.DataFrame, column: str) -> np.ndarray:
    """True where the flag column holds true (False where it is false, blank or absent)."""
    if column not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return flag_values(df[column])[0]


def convenience_items(
    df: pd.DataFrame, region: str | None, blank_consent: BlankConsent = "error"
) -> tuple[list[list[dict[str, Any]]], Marks]:
    """Items from the email/phone/push_token columns, in that order (contract 2.4), and per
    row what the consent notes count (``consent.consent_marks``). A blank consent cell never becomes
    ``opted_in: true`` unless ``blank_consent="opted_in"`` says so."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(len(df))]
    marks: Marks = {}
    for channel, columns in ADDRESS_COLUMNS.items():
        consent = consent_of(df, channel)
        verified = true_flags(df, f"{channel}_verified")
        addressed = np.zeros(len(df), dtype=bool)
        for column in columns:
            if column not in df.columns:
                continue
            addresses = _addresses(df[column], channel, region)
            found = np.array([a is not None for a in addresses], dtype=bool)
            addressed |= found
            send, opted_in = decide(found, consent, blank_consent)
            for i in np.flatnonzero(send).tolist():
                item: dict[str, Any] = {
                    "channel": channel,
                    "address": addresses[i],
                    "opted_in": bool(opted_in[i]),
                }
                if verified[i]:
                    item["verified"] = True
                out[i].append(item)
        marks.update(consent_marks(addressed, consent, blank_consent))
    return out, marks


def no_duplicate_items(
    df: pd.DataFrame, region: str | None, blank_consent: BlankConsent = "error"
) -> pd.Series:
    """False where one (channel, address) would appear twice in a row's ``channels``."""
    ok = np.ones(len(df), dtype=bool)
    if "channels" not in df.columns and not has_both_push_columns(df):
        return pd.Series(ok, index=df.index)  # one item per channel at most
    built, _ = convenience_items(df, region, blank_consent)
    rows = zip(explicit_items(df), built, strict=True)
    for i, (explicit, convenience) in enumerate(rows):
        pairs = [
            (item.get("channel"), item.get("address"))
            for item in explicit + convenience
            if isinstance(item.get("channel"), str) and isinstance(item.get("address"), str)
        ]
        ok[i] = len(pairs) == len(set(pairs))
    return pd.Series(ok, index=df.index)


def has_both_push_columns(df: pd.DataFrame) -> bool:
    return set(PUSH_COLUMNS) <= set(df.columns)
