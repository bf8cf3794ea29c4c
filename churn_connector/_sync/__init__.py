"""Incremental syncs: each run reads only what is new, and a watermark in the ledger that
never passes a row the API has not acknowledged or settled for good.

``options`` declares what makes a send a sync (``cursor``, ``lookback``, ``incremental``,
``sync_name``, ``full_refresh``, ``since`` / ``until``); ``cursor`` says what a cursor
column may hold and how its values are compared; ``record`` keeps the watermark as a ledger
record of its own kind; ``plan`` narrows the read, by source; ``tap`` watches the rows go
by; ``settle`` says how far the watermark may move after a run; ``sync`` is one run of it.
"""

from __future__ import annotations

from .cursor import CURSOR_TYPES, CursorType, Value
from .options import SyncOptions
from .record import (
    FILES_KIND,
    SYNC_COLUMNS,
    SYNC_KIND,
    Watermark,
    file_keys,
    syncs_frame,
    type_of,
)
from .sync import Sync

__all__ = [
    "CURSOR_TYPES",
    "FILES_KIND",
    "SYNC_COLUMNS",
    "SYNC_KIND",
    "CursorType",
    "Sync",
    "SyncOptions",
    "Value",
    "Watermark",
    "file_keys",
    "syncs_frame",
    "type_of",
]
