"""Stable message ids: a UUID-formatted hash of the canonical wire event.

The canonical form is a compatibility promise (golden vectors in the tests pin it):

    digest = SHA-256( b"churn-connector/message-id/v1\\n" + NAMESPACE_UTF8 + b"\\n" + CANONICAL )
    id     = digest[:16] with the version nibble set to 8 and the RFC 4122 variant bits,
             printed as a lowercase 8-4-4-4-12 UUID (an RFC 9562 UUIDv8)

where CANONICAL is the wire event without ``context.$message_id`` serialised as JSON with
keys sorted by code point, no insignificant white space, UTF-8 (orjson ``OPT_SORT_KEYS``),
and NAMESPACE is the caller's namespace or the empty string. With ``id_columns`` the
canonical object is ``{column: wire value}`` for the chosen columns instead (a
``properties.<key>`` that is absent on a row is ``null``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._values import canonical

ID_PREFIX = b"churn-connector/message-id/v1\n"
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_DASHES = (8, 12, 16, 20)


def digests(rows: Sequence[bytes], namespace: str | None = None) -> np.ndarray:
    """(n, 16) uint8 array: the UUIDv8 bytes for each canonical row."""
    base = hashlib.sha256(ID_PREFIX + (namespace or "").encode("utf-8") + b"\n")
    out = bytearray()
    for row in rows:
        h = base.copy()
        h.update(row)
        out += h.digest()[:16]
    arr = np.frombuffer(bytes(out), dtype=np.uint8).reshape(-1, 16).copy()
    arr[:, 6] = (arr[:, 6] & 0x0F) | 0x80
    arr[:, 8] = (arr[:, 8] & 0x3F) | 0x80
    return arr


def format_uuids(arr: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 -> (n,) array of 36-byte lowercase UUID strings (``S36``), vectorised."""
    n = arr.shape[0]
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[arr >> 4]
    hexed[:, 1::2] = _HEX[arr & 0x0F]
    parts = np.split(hexed, _DASHES, axis=1)
    dash = np.full((n, 1), ord("-"), dtype=np.uint8)
    joined = np.concatenate([p for part in parts for p in (part, dash)][:-1], axis=1)
    return np.ascontiguousarray(joined).view("S36").ravel()


def message_ids(rows: Sequence[bytes], namespace: str | None = None) -> list[str]:
    """Message ids (str) for canonical rows; see the module docstring for the format."""
    if not rows:
        return []
    return format_uuids(digests(rows, namespace)).astype("U36").tolist()  # type: ignore[no-any-return]


def message_id(event: dict[str, Any], namespace: str | None = None) -> str:
    """The id of one wire event (its ``$message_id``, if any, is ignored)."""
    context = {k: v for k, v in event.get("context", {}).items() if k != "$message_id"}
    return message_ids([canonical({**event, "context": context})], namespace)[0]
