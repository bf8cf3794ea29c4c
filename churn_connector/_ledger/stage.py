"""The stage between wire and chunking: skip what was acknowledged, record what is now, and
hold back events that were delivered before under another message id (the re-id guard)."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .._core import Kind, LedgerError, RowState, option
from .._validate import FailureLog
from .._wire import WireBatch
from .base import NATURAL_KIND, digest
from .scoped import ScopedLedger

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_EARLIER = "\x00earlier\x00"  # where a held row's text names the earlier message id
_SETTLED = (RowState.REJECTED, RowState.EXPIRED)  # answered for good: never stored


@dataclass(frozen=True)
class Guard:
    """The re-id guard of one events send: the id settings its records name, and whether
    the caller said the new ids are meant (``new_ids``: send, and record them instead).

    A natural-key record's value is ``<message id>|<run>|<id format>|<namespace>|<id
    columns>|<columns>`` (the last three as 4-hex-digit digests): enough to say what changed
    when a later run gives the same event another id, and to tell this run's own records
    from an earlier run's."""

    new_ids: bool = False
    id_format: str = "v2"
    namespace: str | None = None
    id_columns: tuple[str, ...] | None = None
    by_columns: bool = False  # the natural key is the id columns' values
    run: str = field(default_factory=lambda: secrets.token_hex(4))

    def tail(self, columns: str) -> str:
        """What follows the message id in the records of a batch written from ``columns``
        (the same for all of its rows: made once)."""
        parts = (
            self.run,
            self.id_format,
            _short(self.namespace or ""),
            _short("\x1f".join(self.id_columns or ())),
            columns,
        )
        return "|" + "|".join(parts)


def _short(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:4]


class LedgerStage:
    """Skip what the ledger holds; record what the API acknowledges.

    Events: an id acknowledged with the same content is ``skipped``; with other content it is
    a ``message_id_conflict`` (the API keeps the first). With a ``Guard``, an event whose
    natural key an earlier run sent under another id is ``held`` (not sent: it would be
    stored twice), and the natural keys of the events to send are recorded, durably, before
    their requests leave: a run killed after the API stored them still leaves the record.
    Identities: a user whose body is unchanged since its last acknowledgement is
    ``skipped``; a changed one is sent, and its old record dropped first, so an unknown
    outcome never makes a later run skip.
    """

    def __init__(
        self,
        ledger: ScopedLedger,
        kind: Kind,
        failures: FailureLog,
        guard: Guard | None = None,
    ) -> None:
        self.ledger = ledger
        self.kind = kind
        self.failures = failures
        self.guard = guard
        # position -> (key, digest, natural key or None), until acknowledged
        self._pending: dict[int, tuple[str, str, str | None]] = {}
        self._lock = threading.Lock()

    def apply(self, batches: Iterable[WireBatch]) -> Iterator[WireBatch]:
        """The entries of each batch still to be sent. With a guard, a batch's natural keys
        are written on a thread of their own while the next batch is read and built, and
        the batch is passed on once they are written: before any of its requests leaves."""
        if self.guard is None:
            for batch in batches:
                yield self.filter(batch)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="churn-ledger-keys") as writer:
            ahead: tuple[WireBatch, Future[None]] | None = None
            for batch in batches:
                admitted, intents = self._admit(batch)
                written = writer.submit(self._intend, intents)
                if ahead is not None:
                    ahead[1].result()  # a ledger that cannot be written stops the run here
                    yield ahead[0]
                ahead = (admitted, written)
            if ahead is not None:
                ahead[1].result()
                yield ahead[0]

    def filter(self, batch: WireBatch) -> WireBatch:
        """The entries of ``batch`` still to be sent (its natural keys written first)."""
        admitted, intents = self._admit(batch)
        self._intend(intents)
        return admitted

    def _intend(self, intents: list[tuple[str, str]]) -> None:
        """Record natural keys of events about to be sent, on disk (or in the database)
        before they leave: a run killed after the API stored an event still leaves its
        natural key for the next run."""
        if intents:
            self.ledger.record_now(NATURAL_KIND, intents)

    def _admit(self, batch: WireBatch) -> tuple[WireBatch, list[tuple[str, str]]]:
        """The entries of ``batch`` to send, and the natural-key records to write first."""
        if not len(batch):
            return batch, []
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
        natural: list[str | None] = [None] * len(keep)
        intents: list[tuple[str, str]] = []
        if self.guard is not None and batch.natural is not None and keep:
            keep, natural, intents = self._guard(batch, keys, keep, self.guard)
        with self._lock:
            for i, nat in zip(keep, natural, strict=True):
                self._pending[batch.positions[i]] = (keys[i], digests[i], nat)
        # until the new body is acknowledged, the API's state is unknown for these keys
        self.ledger.forget(self.kind, resent)
        return batch.select(keep, natural=False), intents

    def _guard(
        self, batch: WireBatch, keys: Sequence[str], keep: list[int], guard: Guard
    ) -> tuple[list[int], list[str | None], list[tuple[str, str]]]:
        """Hold back the entries of ``keep`` whose natural key an earlier run sent under
        another id. Returns the entries to send, their natural keys, and the records to
        write before they are sent."""
        assert batch.natural is not None
        natural = batch.natural.take(keep)
        hexed = natural.hex()
        held: list[int] = []  # indexes into keep
        earlier: list[str] = []
        if not guard.new_ids:
            found = self.ledger.known(NATURAL_KIND, hexed)
            for j, key in enumerate(hexed):
                record = found.get(key)
                if record is None:
                    continue
                parts = record.split("|")
                if parts[0] == keys[keep[j]] or (len(parts) > 1 and parts[1] == guard.run):
                    continue  # the same event, or another event of this run at that moment
                held.append(j)
                earlier.append(record)
        if held:
            self._hold([batch.positions[keep[j]] for j in held], earlier, natural.columns)
            gone = set(held)
            keep = [i for j, i in enumerate(keep) if j not in gone]
            hexed = [h for j, h in enumerate(hexed) if j not in gone]
        columns = natural.columns
        tail = guard.tail(columns)
        intents = [(h, keys[i] + tail) for i, h in zip(keep, hexed, strict=True)]
        return keep, list(hexed), intents

    def _hold(self, positions: list[int], records: list[str], columns: str) -> None:
        """Mark ``positions`` held, their texts written when a frame asks (from the
        earlier records' message ids, whether those were acknowledged, what changed)."""
        guard = self.guard
        assert guard is not None
        parsed = [_Earlier.parse(r) for r in records]
        acknowledged = self.ledger.known("events", [e.message_id for e in parsed])
        changes: dict[str, int] = {}
        codes = np.empty(len(parsed), dtype=np.int32)
        for k, e in enumerate(parsed):
            text = e.changed(guard, columns, delivered=e.message_id in acknowledged)
            codes[k] = changes.setdefault(text, len(changes))
        # fixed-width bytes: a str object a row would cost more than the row's state
        ids = np.array([e.message_id.encode() for e in parsed], dtype=np.bytes_)
        texts = list(changes)
        order = np.argsort(positions, kind="stable")
        at = np.asarray(positions, dtype=np.int64)[order]
        ids, codes = ids[order], codes[order]

        def written(ks: list[int]) -> list[str]:
            return [texts[codes[k]].replace(_EARLIER, ids[k].decode()) for k in ks]

        book = self.failures.book
        book.set(at, RowState.HELD)
        book.add_deferred(at, written)

    def acknowledged(self, positions: Sequence[int]) -> None:
        """Record the entries of an acknowledged request."""
        with self._lock:
            entries = [self._pending.pop(p) for p in positions]
        self.ledger.record(self.kind, [(key, dig) for key, dig, _ in entries])

    def finish(self) -> None:
        """Write what the ledger buffered: a failure stops the run like any failed write."""
        self._release()
        self.ledger.flush()

    def settle(self) -> None:
        """A stopped run: write what the ledger buffered if it can (what stopped the run is
        what the caller hears of; an unwritten record costs a re-send, never data)."""
        with contextlib.suppress(LedgerError):
            self._release()
            self.ledger.flush()

    def _release(self) -> None:
        """Forget the natural keys this run recorded for events the API refused or that
        aged out unsent: they were never stored, so a corrected row must not be held."""
        book = self.failures.book
        with self._lock:
            unsent = [
                (p, nat)
                for p, (_, _, nat) in self._pending.items()
                if nat is not None and book.status[p] in _SETTLED
            ]
        if not unsent or self.guard is None:
            return
        mine = self.ledger.known(NATURAL_KIND, [nat for _, nat in unsent])
        run = self.guard.run
        self.ledger.forget(
            NATURAL_KIND,
            # only this run's own record: another event of the key may have been stored
            [k for k, record in mine.items() if record.split("|")[1:2] == [run]],
        )


@dataclass(frozen=True)
class _Earlier:
    """A natural-key record of an earlier run, read back."""

    message_id: str
    id_format: str | None = None
    namespace: str | None = None
    id_columns: str | None = None
    columns: str | None = None

    @classmethod
    def parse(cls, record: str) -> _Earlier:
        parts = record.split("|")
        if len(parts) != 6:
            return cls(parts[0])  # written otherwise: what changed is not known
        return cls(parts[0], *parts[2:])

    def changed(self, guard: Guard, columns: str, *, delivered: bool) -> str:
        """The held row's text, with ``_EARLIER`` where the earlier message id goes."""
        what = self.what_changed(guard, columns)
        key = "its id columns' values" if guard.by_columns else "user, event type, occurred_at"
        sent = (
            f"delivered before under message id {_EARLIER}"
            if delivered
            else f"sent before under message id {_EARLIER} by a run that did not hear the "
            "API's answer (it may be stored)"
        )
        return (
            f"held, not sent: the ledger says this event ({key}) was {sent}; its id is new "
            f"because {what}, and sending it would store the event twice. If the new ids "
            f"are meant, send again with {option('new_ids')}"
        )

    def what_changed(self, guard: Guard, columns: str) -> str:
        if self.id_format is None:
            return "its content or id settings changed"
        found = []
        if self.id_format != guard.id_format:
            found.append(f"the id format changed ({self.id_format} -> {guard.id_format})")
        if self.namespace != _short(guard.namespace or ""):
            found.append("the namespace changed")
        if self.id_columns != _short("\x1f".join(guard.id_columns or ())):
            found.append("id_columns changed")
        if self.columns != columns:
            found.append("the properties/context columns changed (one added, dropped or renamed)")
        if not found:
            return "a property or context value changed (same columns and id settings)"
        return " and ".join(found)


_SKIP_NOTE = {
    "events": "already delivered (ledger)",
    "identities": "unchanged since its last acknowledgement (ledger)",
}
