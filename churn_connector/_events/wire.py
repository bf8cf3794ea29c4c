"""Valid rows -> exact wire objects and their serialised bytes.

Only rows that passed validation reach this module, so it converts without re-checking.
Each event is serialised once, canonically (sorted keys, compact, UTF-8); its message id is
hashed from those bytes and spliced into ``context`` as its first key, so each event is
encoded exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .. import _columns, _timestamps
from .._values import canonical
from . import ids as _ids
from .options import EventOptions

_CONTEXT_OPEN = b'{"context":{'
_BLOCK = 1024


@dataclass
class WireEvents:
    """Wire form of a slice's valid rows, in row order."""

    body: list[bytes]  # each event's wire bytes, $message_id included
    ids: list[str]
    id_keys: list[int]  # 64-bit keys of the ids, for de-duplication across slices
    content_keys: list[int]  # 64-bit keys of the content without the id
    ms: np.ndarray  # occurred_at in epoch milliseconds


def _keys(digests: np.ndarray) -> list[int]:
    keys: list[int] = np.ascontiguousarray(digests[:, :8]).view("<i8").ravel().tolist()
    return keys


def _splice(row: bytes, id_json: bytes) -> bytes:
    rest = row[len(_CONTEXT_OPEN) :]
    sep = b"" if rest[:1] == b"}" else b","
    return b'{"context":{"$message_id":' + id_json + sep + rest


def _id_payload(event: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column in columns:
        kind, _, key = column.partition(".")
        if key and kind in ("properties", "context"):
            out[column] = event[kind].get(key)
        else:
            out[column] = event[column]
    return out


def build_events(
    work: pd.DataFrame, options: EventOptions, ms: np.ndarray | None = None
) -> WireEvents:
    """Wire events for validated rows of ``work`` (a RangeIndex frame).

    ``ms``: occurred_at of these rows in epoch ms, when the caller has it already.
    """
    rules = options.rules
    n = len(work)
    if n == 0:
        return WireEvents([], [], [], [], np.empty(0, dtype=np.int64))
    user_ids = _columns.ids_to_wire(work["external_user_id"])
    event_types = work["event_type"].tolist()
    if ms is None:
        ms = _timestamps.normalize(work["occurred_at"], rules.naive_timezone, options.epoch_unit).ms
    times = _timestamps.format_ms(ms)
    properties = _columns.merged_objects(work, "properties", rules)
    context = _columns.merged_objects(work, "context", rules)
    events = [
        {
            "context": c,
            "event_type": e,
            "external_user_id": u,
            "occurred_at": t,
            "properties": p,
        }
        for c, e, u, t, p in zip(context, event_types, user_ids, times, properties, strict=True)
    ]
    given = [str(v) for v in work["message_id"].tolist()] if "message_id" in work else None
    out = WireEvents([], [], [], [], ms)
    for lo in range(0, n, _BLOCK):
        block_ids = given[lo : lo + _BLOCK] if given is not None else None
        _serialise(events[lo : lo + _BLOCK], block_ids, options, out)
    return out


def _serialise(
    events: list[dict[str, Any]], given: list[str] | None, options: EventOptions, out: WireEvents
) -> None:
    """Serialise, hash and splice one block of events into ``out``.

    Each orjson result keeps a ~4 KB allocation alive, so canonical bytes are only held
    for one small block; the spliced bytes that are kept are exact-size copies.
    """
    rows = [canonical(e) for e in events]
    content = _ids.digests(rows, options.namespace)
    if given is not None:
        ids = given
        id_keys = [hash(v) for v in ids]
        quoted = [orjson.dumps(i) for i in ids]  # caller's ids may need escaping
    else:
        if options.id_columns:
            payloads = [canonical(_id_payload(e, options.id_columns)) for e in events]
            digests = _ids.digests(payloads, options.namespace)
        else:
            digests = content
        uuids = _ids.format_uuids(digests)
        ids = uuids.astype("U36").tolist()
        id_keys = _keys(digests)
        quoted = [b'"' + u + b'"' for u in uuids.tolist()]  # hex and dashes need no escaping
    out.body.extend(_splice(row, q) for row, q in zip(rows, quoted, strict=True))
    out.ids.extend(ids)
    out.id_keys.extend(id_keys)
    out.content_keys.extend(_keys(content))
