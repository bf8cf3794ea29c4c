"""The package's shared vocabulary: row states, chunk statuses, what a user may hand in."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal, TypeAlias


class RowState(IntEnum):
    """The state of one input row; stored as int8 in the row book.

    Every row ends in exactly one state other than ``PENDING``.
    """

    PENDING = 0
    SENT = 1
    INVALID = 2
    REJECTED = 3
    FAILED = 4
    SKIPPED = 5
    EXPIRED = 6  # aged out of the API's 30-day window before its request was sent

    @property
    def label(self) -> str:
        """The lower-case name shown in result frames (``"sent"``, ``"invalid"``, ...)."""
        return self.name.lower()


STATE_NAMES: tuple[str, ...] = tuple(s.label for s in RowState)

ChunkStatus = Literal["sent", "rejected", "failed", "split", "dry_run"]
"""How one request ended: ``split`` was rejected and re-sent as two halves."""

Channel = Literal["email", "sms", "push"]
CHANNELS: tuple[Channel, ...] = ("email", "sms", "push")

ExtraColumns = Literal["error", "ignore"]
Duplicates = Literal["error", "keep_last", "in_order"]
Decimals = Literal["error", "float", "str"]
EpochUnit = Literal["s", "ms", "us", "ns"]
AuthHeader = Literal["bearer", "x-api-key"]
IdFormat = Literal["v1", "v2"]
"""The canonical form behind hashed message ids (README, "Message ids"): ``v2`` (default)
writes a float that holds an integer as that integer and omits null members of structs,
maps and dicts; ``v1`` makes the events and ids of 0.1 byte for byte (for backfills begun
with it)."""

DataSource: TypeAlias = Any
"""A DataFrame, anything Arrow-native, a file, folder or glob, or an iterable of them (_inputs)."""
