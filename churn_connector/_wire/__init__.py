"""The wire: validated rows -> the exact bytes the API receives, with stable message ids.

Its own room because the bytes are a promise: the canonical form (``canonical``) and the
message ids hashed from it (``ids``) are pinned by golden vectors, and every path that writes
them lives here, side by side: events row by row (``events``, which also picks the path a
slice takes) or column-wise (``column_wise``), one event without a DataFrame (``one_event``,
the per-row writer's fast path for one event), identify bodies (``identities``, with the
channel items of ``channels`` and the consent rules of ``consent``). ``natural_keys`` are
what the ledger's re-id guard compares; a slice's result is a ``WireBatch`` (``batch``).
"""

from __future__ import annotations

from .batch import WireBatch
from .channels import (
    FLAG_SPELLINGS,
    blank_cells,
    channels_problems,
    channels_repeat,
    channels_shape,
    email_addresses,
    flag_values,
    has_address,
    has_both_push_columns,
    items_without_consent,
    no_duplicate_items,
    phone_addresses,
)
from .consent import ConsentTally
from .events import build_events
from .identities import body_bytes, build_identities
from .ids import GivenIds, HashedIds, IdTexts, message_id
from .natural_keys import natural_keys_of
from .one_event import Event, make_event

__all__ = [
    "FLAG_SPELLINGS",
    "ConsentTally",
    "Event",
    "GivenIds",
    "HashedIds",
    "IdTexts",
    "WireBatch",
    "blank_cells",
    "body_bytes",
    "build_events",
    "build_identities",
    "channels_problems",
    "channels_repeat",
    "channels_shape",
    "email_addresses",
    "flag_values",
    "has_address",
    "has_both_push_columns",
    "items_without_consent",
    "make_event",
    "message_id",
    "natural_keys_of",
    "no_duplicate_items",
    "phone_addresses",
]
