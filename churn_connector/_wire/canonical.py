"""The canonical form: the one JSON spelling every wire body is written in and hashed from.

Keys sorted by code point, no insignificant white space, UTF-8 (orjson ``OPT_SORT_KEYS``),
numbers as JSON means them (``json_numbers``: in id format v2 a float that holds an integer
inside +-2**53 is that integer). It is a compatibility promise: message ids are hashes of it
(``ids``), golden vectors pin it. What a cell becomes before it is spelled is ``_json``'s
(``values``: free-form cells, ``arrow``: whole Arrow columns, byte for byte as here).
"""

from __future__ import annotations

from typing import Any

import orjson

from .._json import json_number

_NESTED = (dict, list)


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: keys sorted by code point, no white space, UTF-8."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def json_numbers(value: Any) -> Any:
    """A parsed JSON value with every integral float (|x| < 2**53) an int; nulls kept."""
    kind = type(value)
    if kind is dict:
        # members inline: one call per member would double the time of a flat object
        return {
            k: json_number(v) if type(v) is float else json_numbers(v) if type(v) in _NESTED else v
            for k, v in value.items()
        }
    if kind is float:
        return json_number(value)
    if kind is list:
        return [json_numbers(v) for v in value]
    return value
