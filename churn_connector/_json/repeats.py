"""Does JSON text name a key twice in one object? Found cheaply, then exactly.

RFC 8259 says an object's names SHOULD be unique and that readers of one that repeats a name
differ (orjson, Python's json and pandas keep the last value; others the first, or refuse).
So such text is refused (check ``repeated_key``), never read as one reader would.

The cheap test needs the parse the caller made anyway: a parse keeps one member per name, so
a text that writes no more names than its parse holds repeats none. The names written are
bounded by the count of ':' (a value may hold more) and, exactly unless a string holds '":',
by the count of the names' ends. Only a text that fails both counts is parsed again, keeping
every member in order (``json``'s pairs hook), and searched for the repeat.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "NAME_END",
    "Repeat",
    "first_repeat",
    "key_count",
    "may_repeat",
    "names_per_line",
    "repeat_in",
]

# every name in JSON text ends with '"' and, after white space, ':' (a string's own '":'
# can add to the count, never take from it): the count bounds the names the text holds
NAME_END = r'"[ \t\n\r]*:'  # (RE2 and Python's re read it alike)
_NAME_END = re.compile(NAME_END)
_NAME_END_BYTES = re.compile(rb'"[ \t\n\r]*:')


def key_count(value: Any) -> int:
    """The names of every object in a parsed JSON value (each object's distinct keys)."""
    kind = type(value)
    if kind is dict:
        n = len(value)
        for v in value.values():
            inner = type(v)
            if inner is dict or inner is list:
                n += key_count(v)
        return n
    if kind is list:
        return sum(key_count(v) for v in value if type(v) is dict or type(v) is list)
    return 0


def names_written(text: str | bytes) -> int:
    """An upper bound of the names JSON ``text`` writes (exact unless a string holds '":')."""
    if isinstance(text, str):
        return len(_NAME_END.findall(text))
    return len(_NAME_END_BYTES.findall(text))


_QUOTE, _COLON = ord('"'), ord(":")
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[0x20, 0x09, 0x0A, 0x0D]] = True


def names_per_line(lines: list[bytes]) -> np.ndarray:
    """``names_written`` of each JSON text, counted for all of them at once (numpy): a ':'
    whose last byte before, white space aside, is '"'."""
    ends = np.cumsum([len(line) for line in lines], dtype=np.int64)
    buf = np.frombuffer(b"".join(lines), dtype=np.uint8)
    colons = np.flatnonzero(buf == _COLON)
    colons = colons[colons > 0]  # a text starts with its object, never with ':'
    before = colons - 1
    spaced = np.flatnonzero(_SPACE[buf[before]])
    for k in spaced.tolist():  # rare ("a" : 1): walk back over the white space
        j = int(before[k])
        while j > 0 and _SPACE[buf[j]]:
            j -= 1
        before[k] = j
    named = colons[buf[before] == _QUOTE]
    return np.bincount(np.searchsorted(ends, named, side="right"), minlength=len(lines))


def may_repeat(text: str | bytes, keys: int) -> bool:
    """False when JSON ``text`` whose parse holds ``keys`` names cannot repeat a name: it
    writes no more names than its parse kept (a repeat is kept once). Cheap: counting ':'
    settles most texts, '":' those whose values hold ':' (as times do) and that write no
    white space after a '"' (which a name's end may hold: ``"a" : 1``); the names' ends (a
    regex) the rest."""
    if isinstance(text, str):
        if text.count(":") == keys:
            return False
        if (
            text.count('":') == keys
            and '" ' not in text
            and '"\t' not in text
            and '"\n' not in text
            and '"\r' not in text
        ):
            return False
    else:
        if text.count(b":") == keys:
            return False
        if (
            text.count(b'":') == keys
            and b'" ' not in text
            and b'"\t' not in text
            and b'"\n' not in text
            and b'"\r' not in text
        ):
            return False
    return names_written(text) != keys


class _Pairs(list[tuple[str, Any]]):
    """An object's members in written order (the careful parse keeps repeats)."""


class Repeat(NamedTuple):
    """Where JSON text names a key twice: ``top``, the top-level member the object sits in
    (None: the top object itself), ``where`` its path below the top (``""``, ``.a``,
    ``.a[0]``), and the ``key``."""

    top: str | None
    where: str
    key: str


def first_repeat(text: str | bytes) -> Repeat | None:
    """The first object in JSON ``text`` that names a key twice (after decoding escapes:
    ``"plan"`` and ``"pl\\u0061n"`` are one key); None when no name repeats. ``text`` must
    parse."""
    top: str | None = None
    stack: list[tuple[str | None, str, Any]] = [
        (top, "", json.loads(text, object_pairs_hook=_Pairs))
    ]
    while stack:
        top, where, value = stack.pop()
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, _ in value:
                if key in seen:
                    return Repeat(top, where, key)
                seen.add(key)
            stack.extend(
                (k if top is None and not where else top, f"{where}.{k}", v)
                for k, v in reversed(value)
            )
        elif isinstance(value, list):
            stack.extend((top, f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def repeat_in(text: str | bytes, parsed: Any) -> Repeat | None:
    """The first key JSON ``text`` (parsed as ``parsed``) names twice in one of its objects,
    at any depth; None when it names none (a cheap count settles most texts)."""
    if not may_repeat(text, key_count(parsed)):
        return None
    try:
        return first_repeat(text)
    except RecursionError:  # deeper than Python's parser goes: refused for its depth
        return None
