"""The stage between wire and chunking: skip what was acknowledged, record what is now."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence

from .._core.exceptions import LedgerError
from .._core.types import Kind, RowState
from .._stream import WireBatch
from .._validate.report import FailureLog
from .base import digest
from .scoped import ScopedLedger

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


class LedgerStage:
    """Skip what the ledger holds; record what the API acknowledges.

    Events: an id acknowledged with the same content is ``skipped``; with other content it is
    a ``message_id_conflict`` (the API keeps the first). Identities: a user whose body is
    unchanged since its last acknowledgement is ``skipped``; a changed one is sent, and its
    old record dropped first, so an unknown outcome never makes a later run skip.
    """

    def __init__(self, ledger: ScopedLedger, kind: Kind, failures: FailureLog) -> None:
        self.ledger = ledger
        self.kind = kind
        self.failures = failures
        self._pending: dict[int, tuple[str, str]] = {}  # position -> entry, once acknowledged
        self._lock = threading.Lock()

    def apply(self, batches: Iterable[WireBatch]) -> Iterator[WireBatch]:
        for batch in batches:
            yield self.filter(batch)

    def filter(self, batch: WireBatch) -> WireBatch:
        """The entries of ``batch`` still to be sent."""
        if not len(batch):
            return batch
        keys = list(batch.keys)  # one pass: message ids are formatted as they are read
        known = self.ledger.known(self.kind, keys)  # one query for the slice
        if batch.content is not None:
            digests = [f"{k & _MASK64:016x}" for k in batch.content.tolist()]
        else:
            digests = [digest(b) for b in batch.bodies]
        book = self.failures.book
        keep: list[int] = []
        resent: list[str] = []
        skipped: list[int] = []
        for i, (pos, key, dig) in enumerate(zip(batch.positions, keys, digests, strict=True)):
            previous = known.get(key)
            if previous == dig and pos not in batch.always_send:
                skipped.append(pos)
                continue
            if previous is not None and self.kind == "events" and previous != dig:
                message = (
                    f"message id {key!r} was acknowledged before with different content "
                    "(ledger): the API keeps the first; give this event its own id"
                )
                self.failures.fail(pos, "message_id", "message_id_conflict", key, message)
                continue
            if previous is not None:
                resent.append(key)
            keep.append(i)
        if skipped:
            book.set(skipped, RowState.SKIPPED)
            book.add_errors(skipped, _SKIP_NOTE[self.kind])
        with self._lock:
            for i in keep:
                self._pending[batch.positions[i]] = (keys[i], digests[i])
        # until the new body is acknowledged, the API's state is unknown for these keys
        self.ledger.forget(self.kind, resent)
        return batch.select(keep)

    def acknowledged(self, positions: Sequence[int]) -> None:
        """Record the entries of an acknowledged request."""
        with self._lock:
            entries = [self._pending.pop(p) for p in positions]
        self.ledger.record(self.kind, entries)

    def finish(self) -> None:
        """Write what the ledger buffered: a failure stops the run like any failed write."""
        self.ledger.flush()

    def settle(self) -> None:
        """A stopped run: write what the ledger buffered if it can (what stopped the run is
        what the caller hears of; an unwritten record costs a re-send, never data)."""
        with contextlib.suppress(LedgerError):
            self.ledger.flush()


_SKIP_NOTE = {
    "events": "already delivered (ledger)",
    "identities": "unchanged since its last acknowledgement (ledger)",
}
