"""Valid event rows -> exact wire bytes: the per-row path, and which path a slice takes.

Only rows that passed validation reach this module, so it converts without re-checking.
Each event is serialised once, canonically (sorted keys, compact, UTF-8); its message id is
hashed from those bytes and spliced into ``context`` as its first key, so each event is
encoded exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from .._json import NO_PARSES, ParsedTexts, format_ms, normalize_timestamps
from .._options import EventOptions
from .._validate import ids_to_wire, merged_objects
from . import column_wise as columnar
from . import ids as _ids
from .canonical import canonical
from .natural_keys import NATURAL_PREFIX

_BLOCK = 1024
log = logging.getLogger("churn_connector")

WirePath = Literal["columnar", "per_row"]


@dataclass
class WireEvents:
    """Wire form of a slice's valid rows, in row order."""

    body: pa.BinaryArray  # each event's wire bytes, $message_id included
    digests: np.ndarray  # (k, 16) uint8: hashed ids (or, for given ids, of their text)
    given: list[str] | None  # the caller's message ids, when a message_id column was given
    content: np.ndarray  # (k, 16) uint8: digests of the content without the id
    ms: np.ndarray  # occurred_at in epoch milliseconds
    path: WirePath | None = None  # which path wrote them (None: no rows)
    natural: np.ndarray | None = None  # (k, 16) uint8: id_columns' natural keys, when asked

    @property
    def id_keys(self) -> np.ndarray:
        """64-bit keys of the ids, for de-duplication across slices."""
        return key64(self.digests)

    @property
    def content_keys(self) -> np.ndarray:
        return key64(self.content)

    def ids(self) -> Sequence[str]:
        """The message ids as text (formatted only when read)."""
        return self.given if self.given is not None else _ids.IdTexts(self.digests)


def key64(digests: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each digest as an int64."""
    keys: np.ndarray = np.ascontiguousarray(digests[:, :8]).view("<i8").ravel()
    return keys


_EMPTY = np.empty((0, 16), dtype=np.uint8)


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
    work: pd.DataFrame,
    options: EventOptions,
    ms: np.ndarray | None = None,
    *,
    natural: bool = False,
    parsed: ParsedTexts = NO_PARSES,
) -> WireEvents:
    """Wire events for validated rows of ``work`` (a RangeIndex frame).

    Slices ``columnar.fallback_reason`` finds no reason against take the column-wise path;
    the rest (object columns, given message ids, ``id_columns``, ...) the per-row one, with
    the reason logged at DEBUG. Both produce the same bytes; ``path`` says which ran.
    ``ms``: occurred_at of these rows in epoch ms, when the caller has it already.
    ``natural``: with ``id_columns``, also hash the natural keys (``natural_keys``) the id
    columns' values make, while their canonical form is at hand. ``parsed``: validation's
    parse of ``work``'s JSON-object text columns, which the column-wise path writes from.
    """
    if len(work) == 0:
        return WireEvents(pa.array([], pa.binary()), _EMPTY, None, _EMPTY, np.empty(0, np.int64))
    if ms is None:
        tz = options.rules.naive_timezone
        ms = normalize_timestamps(work["occurred_at"], tz, options.epoch_unit).ms
    try:
        body, digests = columnar.build(work, options, ms, parsed)
    except columnar.Unsupported as exc:
        log.debug("wire: %s rows take the per-row path: %s", f"{len(work):,}", exc)
        return build_events_per_row(work, options, ms, natural=natural)
    return WireEvents(body, digests, None, digests, ms, "columnar")


def build_events_per_row(
    work: pd.DataFrame, options: EventOptions, ms: np.ndarray, *, natural: bool = False
) -> WireEvents:
    """Wire events row by row, as dicts serialised canonically: any column type."""
    rules = options.rules
    n = len(work)
    user_ids = ids_to_wire(work["external_user_id"])
    event_types = work["event_type"].tolist()
    times = format_ms(ms)
    properties = merged_objects(work, "properties", rules)
    context = merged_objects(work, "context", rules)
    events = [
        event_object(u, e, t, p, c)
        for c, e, u, t, p in zip(context, event_types, user_ids, times, properties, strict=True)
    ]
    given = [str(v) for v in work["message_id"].tolist()] if "message_id" in work else None
    body: list[bytes] = []
    ids: list[np.ndarray] = []
    content: list[np.ndarray] = []
    # a given message id is the caller's own: no natural key guards it
    keys: list[np.ndarray] | None = [] if natural and options.id_columns and given is None else None
    for lo in range(0, n, _BLOCK):
        block_ids = given[lo : lo + _BLOCK] if given is not None else None
        written = write_events(events[lo : lo + _BLOCK], block_ids, options, body, keys)
        ids.append(written.digests)
        content.append(written.content)
    rows = pa.array(body, pa.binary())
    return WireEvents(
        rows,
        np.concatenate(ids),
        given,
        np.concatenate(content),
        ms,
        "per_row",
        None if keys is None else np.concatenate(keys),
    )


def event_object(
    user: str, event_type: str, occurred_at: str, properties: Any, context: Any
) -> dict[str, Any]:
    """The five members of a wire event (contract 2.1) from values already made wire, in the
    canonical order; its ``$message_id`` comes with its bytes (``write_events``)."""
    return {
        "context": context,
        "event_type": event_type,
        "external_user_id": user,
        "occurred_at": occurred_at,
        "properties": properties,
    }


class Written(NamedTuple):
    """What ``write_events`` made besides the bytes: each event's id as JSON text
    (``quoted``), and the digests of the ids and of the contents (``digests``,
    ``content``; (k, 16) uint8, empty when not asked for)."""

    quoted: list[bytes]
    digests: np.ndarray
    content: np.ndarray


def write_events(
    events: Sequence[dict[str, Any]],
    given: Sequence[str] | None,
    options: EventOptions,
    body: list[bytes],
    natural: list[np.ndarray] | None = None,
    *,
    keys: bool = True,
) -> Written:
    """The one writer of events' bytes, for a block of rows and for a single event: each
    event serialised once, canonically; its message id hashed from those bytes (or the
    caller's: ``given``), spliced in as its context's first member; the wire bytes appended
    to ``body``. ``natural``: where the id columns' natural keys go. ``keys``: also the
    digests that de-duplication and a ledger compare; a one-off event, which meets
    neither, skips those that are not its id (its declared fast path, with ``_ids``' for a
    few rows).

    Each orjson result keeps a ~4 KB allocation alive, so canonical bytes are only held
    for one small block; the spliced bytes that are kept are exact-size copies.
    """
    rows = [canonical(e) for e in events]
    prefix = _ids.PREFIXES[options.id_format]
    hashed = given is None and not options.id_columns
    if hashed and not keys and len(rows) < _ids.FEW:
        # one event alone: its id from the hash's bytes, no arrays (ten times the hash)
        quoted = _ids.quoted_few(_ids.few_digests(_ids.head_of(options.namespace, prefix), rows))
        body += [_ids.with_id(row, q) for row, q in zip(rows, quoted, strict=True)]
        return Written(quoted, _EMPTY, _EMPTY)
    content = _EMPTY
    if keys or hashed:
        # a hashed id is the content's digest; otherwise the content digest keeps the v1
        # salt in every id format, so the ledger's digest of an unchanged event stays
        content = _ids.digests(rows, options.namespace, prefix if hashed else _ids.CONTENT_PREFIX)
    if given is not None:
        quoted = [orjson.dumps(i) for i in given]  # caller's ids may need escaping
        digests = _EMPTY
        if keys:  # de-duplication compares ids by a digest of their exact JSON text
            joined = b"".join(_ids.given_digest(q) for q in quoted)
            digests = np.frombuffer(joined, dtype=np.uint8).reshape(-1, 16)
    else:
        if options.id_columns:
            payloads = [canonical(_id_payload(e, options.id_columns)) for e in events]
            digests = _ids.digests(payloads, options.namespace, prefix)
            if natural is not None:  # the same values, without namespace or id format
                natural.append(_ids.digests(payloads, None, NATURAL_PREFIX))
        else:
            digests = content
        quoted = _ids.quoted_ids(digests)  # hex and dashes need no escaping
    body += [_ids.with_id(row, q) for row, q in zip(rows, quoted, strict=True)]
    return Written(quoted, digests, content)
