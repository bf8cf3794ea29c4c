"""What the wire hands on: the rows of one slice that are to be sent, as wire bytes.

A resource's stream turns each validated slice into one ``WireBatch``; the ledger stage
skips what was delivered (by ``keys``, ``content`` and, for hashed events, their natural
keys), and chunking cuts the rest into requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow

__all__ = ["NaturalKeyed", "WireBatch"]


class NaturalKeyed(Protocol):
    """An events batch's natural keys (``natural_keys.NaturalKeys``): what the ledger's
    re-id guard looks up, hashed only when it asks."""

    columns: str  # a digest of the slice's properties/context column names

    def __len__(self) -> int: ...

    def take(self, indices: np.ndarray | list[int]) -> NaturalKeyed: ...

    def hex(self) -> list[str]: ...


@dataclass
class WireBatch:
    """The rows of one slice that are to be sent, in row order, as wire bytes."""

    positions: list[int]
    keys: Sequence[str]  # message ids (events) or user ids: what a ledger records
    bodies: pyarrow.BinaryArray | list[bytes]  # serialised events (Arrow), or identify bodies
    content: np.ndarray | None = None  # events: 64-bit content keys (the ledger's digests)
    always_send: set[int] = field(default_factory=set)  # positions a ledger must not skip
    times: np.ndarray | None = None  # events: occurred_at in epoch ms (send-time window)
    # events with hashed ids: their natural keys, for a ledger's re-id guard (None: given
    # message ids, identities, or no ledger to guard)
    natural: NaturalKeyed | None = None

    def __len__(self) -> int:
        return len(self.positions)

    def select(self, keep: list[int], *, natural: bool = True) -> WireBatch:
        """The batch restricted to the entries at indices ``keep`` (without its natural
        keys unless ``natural``: past the ledger nothing needs them)."""
        keys = list(self.keys)  # one pass: ids may be formatted as they are read
        bodies = self.bodies
        return WireBatch(
            [self.positions[i] for i in keep],
            [keys[i] for i in keep],
            bodies.take(pyarrow.array(keep, pyarrow.int64()))
            if isinstance(bodies, pyarrow.Array)
            else [bodies[i] for i in keep],
            None if self.content is None else self.content[keep],
            self.always_send,
            None if self.times is None else self.times[keep],
            self.natural.take(keep) if natural and self.natural is not None else None,
        )
