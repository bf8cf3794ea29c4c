"""Channel items (contract 2.3) and the convenience columns that build them (2.4).

Shared by the schema (which checks them) and the wire (which builds them), so both read a
row the same way. Nothing is coerced: flags must be real booleans, phones E.164 (or, with
``phone_region``, a number ``phonenumbers`` validates, normalised to E.164).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import phonenumbers

from .. import _columns
from .._types import CHANNELS
from .._values import is_missing
from .options import ADDRESS_COLUMNS, E164_PATTERN, EMAIL_PATTERN, ITEM_FIELDS, PUSH_COLUMNS

_EMAIL = re.compile(EMAIL_PATTERN)
_E164 = re.compile(E164_PATTERN)
# a local number may hold digits and punctuation only: letters (vanity numbers, "ext")
# would be translated or dropped by phonenumbers, which is guessing
_PHONE_CHARS = re.compile(r"[\d\s()+\-./]+")


def local_phone(value: str, region: str) -> str | None:
    """A non-E.164 phone number -> E.164 when it is a valid number read in ``region``."""
    if not _PHONE_CHARS.fullmatch(value):
        return None
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


def channels_problems(value: Any) -> list[str]:
    """Every problem of one ``channels`` cell's items (non-list cells: see channels_type)."""
    if not is_list(value):
        return []
    problems: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            problems.extend(_item_problems(item, f"channels[{i}]"))
    return problems


def channels_shape(value: Any) -> str | None:
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
    values = [v if isinstance(v, str) else None for v in s.tolist()]
    if channel != "sms" or region is None:
        return [None if v is None else str(v) for v in values]
    e164 = _columns.fullmatch(s, E164_PATTERN).to_numpy(dtype=bool)
    return [
        None if v is None else str(v) if e164[i] else local_phone(v, region)
        for i, v in enumerate(values)
    ]


def _flags(df: pd.DataFrame, column: str) -> list[bool | None]:
    if column not in df.columns:
        return [None] * len(df)
    return [None if is_missing(v) else bool(v) for v in df[column].tolist()]


def convenience_items(df: pd.DataFrame, region: str | None) -> list[list[dict[str, Any]]]:
    """Items from the email/phone/push_token columns, in that order (contract 2.4)."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(len(df))]
    for channel, columns in ADDRESS_COLUMNS.items():
        opted_in = _flags(df, f"{channel}_opted_in")
        verified = _flags(df, f"{channel}_verified")
        for column in columns:
            if column not in df.columns:
                continue
            for i, address in enumerate(_addresses(df[column], channel, region)):
                if address is None:
                    continue
                item: dict[str, Any] = {
                    "channel": channel,
                    "address": address,
                    "opted_in": opted_in[i] is not False,
                }
                if verified[i] is True:
                    item["verified"] = True
                out[i].append(item)
    return out


def no_duplicate_items(df: pd.DataFrame, region: str | None) -> pd.Series:
    """False where one (channel, address) would appear twice in a row's ``channels``."""
    ok = np.ones(len(df), dtype=bool)
    if "channels" not in df.columns and not has_both_push_columns(df):
        return pd.Series(ok, index=df.index)  # one item per channel at most
    rows = zip(explicit_items(df), convenience_items(df, region), strict=True)
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
