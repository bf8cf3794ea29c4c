"""What a tracker holds and what became of it, shared by the thread tracker and the async one.

``Book`` is the queue and the accounts behind one lock; it never waits (each tracker waits
its own way: a ``threading.Condition`` or asyncio). Every event tracked ends in exactly one
of a batch row's states, with a batch row's text: each request is a small run whose events
are rows of a ``RowBook`` (``trip``), landed by the batch path's code. The states a tracked
event can end in: ``sent``, ``rejected`` (the API refused it), ``failed`` (never
acknowledged: outcome unknown, safe to re-send; with a spool it stays there for the next
tracker), or ``expired`` (past the API's 30-day window when its request was sent: never
sent). Until then it is ``pending``: waiting in memory, in the spool only, or in a request
in flight. The flush report counts them as a send's result counts its rows.
"""

from __future__ import annotations

import collections
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._core import STATE_NAMES, ChurnConnectorError, DeliveryError, RowState
from .._delivery import Spend
from .send import TrackResult
from .spool import Spool
from .trip import Trip

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPORT_LIMIT", "Book", "Entry", "FlushReport", "State", "Undelivered"]

log = logging.getLogger("churn_connector")

State = Literal["rejected", "failed", "expired"]
"""The row states a tracked event that was not delivered can end in (``RowState`` labels)."""
# a report keeps the ids of at most this many delivered events (its count is exact): a
# service that never flushes must not grow without bound
REPORT_LIMIT = 100_000


Resolve = Callable[["TrackResult | None", "BaseException | None"], None]


@dataclass(eq=False)
class Entry:
    """One event in a tracker: its id, wire bytes, occurred_at (ms) and spool row."""

    message_id: str
    body: bytes
    ms: int
    seq: int | None = None
    resolve: Resolve | None = None  # a handle's bound method


@dataclass(frozen=True)
class Undelivered:
    """An event that was not delivered: its id, its state and why (``error``: the text a
    batch row in that state would carry)."""

    message_id: str
    state: State
    error: str


@dataclass(frozen=True)
class FlushReport:
    """What a tracker did since the previous report: ``delivered`` ids (the last
    100,000 of them; ``n_delivered`` counts all), ``undelivered`` events with their state
    and error, and ``pending`` ids still queued or in flight when the flush gave up waiting
    (with a spool they stay there). ``ok`` when nothing was left undelivered or pending."""

    delivered: tuple[str, ...]
    undelivered: tuple[Undelivered, ...]
    pending: tuple[str, ...]
    n_delivered: int
    spool: str | None = None

    @property
    def ok(self) -> bool:
        return not self.undelivered and not self.pending

    @property
    def counts(self) -> dict[str, int]:
        """Events by state, keyed as a send's ``counts`` (every row state), then ``pending``:
        still queued or in flight when the report was made."""
        out = {name: 0 for name in STATE_NAMES if name != "pending"}
        out["sent"] = self.n_delivered
        for item in self.undelivered:
            out[item.state] += 1
        out["pending"] = len(self.pending)
        return out

    def summary(self) -> str:
        counts = self.counts
        text = ", ".join(f"{n:,} {state}" for state, n in counts.items() if n)
        return text or "nothing tracked"

    def rows(self) -> pd.DataFrame:
        """One row per event not delivered: ``message_id``, ``status``, ``error``."""
        import pandas as pd  # noqa: PLC0415 - pandas (heavy) for the failure path only

        pending = [(m, "pending", "not delivered when the flush ended") for m in self.pending]
        items: list[tuple[str, str, str]] = [
            (u.message_id, u.state, u.error) for u in self.undelivered
        ]
        return pd.DataFrame(items + pending, columns=["message_id", "status", "error"])

    def raise_for_failures(self) -> None:
        """Raise ``DeliveryError`` listing the events not delivered (``.rows``)."""
        if self.ok:
            return
        missing = [u.message_id for u in self.undelivered] + list(self.pending)
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5:,} more" if len(missing) > 5 else ""
        )
        where = f"; those not acknowledged remain in the spool {self.spool}" if self.spool else ""
        counts = {k: v for k, v in self.counts.items() if k != "pending"}
        counts["failed"] += len(self.pending)
        raise DeliveryError(
            f"{len(missing):,} tracked event(s) were not delivered ({self.summary()}): "
            f"{shown}{where}",
            counts=counts,
            rows=self.rows(),
        )


@dataclass
class _Accounts:
    delivered: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=REPORT_LIMIT)
    )
    n_delivered: int = 0
    undelivered: list[Undelivered] = field(default_factory=list)


class Book:
    """A tracker's queue and accounts (see the module docstring). Memory holds at most
    ``max_queue`` events; with a spool, more may wait there only (``backlog``: rows after
    ``loaded``), and the spool's leftovers from an earlier process come first."""

    def __init__(self, max_queue: int, spool: Spool | None, batch_size: int) -> None:
        self.lock = threading.Lock()
        self.max_queue = max_queue
        self.spool = spool
        self.batch_size = batch_size
        self.waiting: collections.deque[Entry] = collections.deque()
        self.in_flight: dict[int, Entry] = {}
        self.loaded = 0  # the last spool row placed in memory
        self.backlog = spool.count() if spool is not None else 0
        self.loading = False
        self.accounts = _Accounts()
        # spilled events' handles, resolved when their rows come back from the spool; held
        # weakly: a handle nobody keeps costs no memory (spilling is for bounded memory)
        self.spilled: dict[int, weakref.WeakMethod[Resolve]] = {}

    # -- admitting (lock held) ----------------------------------------------------------
    def pending(self) -> int:
        return len(self.waiting) + self.backlog

    def has_room(self) -> bool:
        return self.pending() < self.max_queue

    def admit(self, entry: Entry) -> None:
        """Queue an event (its spool row written already, if any)."""
        if self.backlog == 0 and len(self.waiting) < self.max_queue:
            self.waiting.append(entry)
            if entry.seq is not None:
                self.loaded = entry.seq
        else:
            assert entry.seq is not None, "only a spooled event may wait on disk only"
            self.backlog += 1
            if entry.resolve is not None:
                self.spilled[entry.seq] = weakref.WeakMethod(entry.resolve)

    # -- taking (lock held) ---------------------------------------------------------------
    def needs_load(self) -> bool:
        return not self.waiting and self.backlog > 0 and not self.loading

    def load(self) -> None:
        """Read the next rows of the backlog from the spool (call without the lock)."""
        assert self.spool is not None
        rows = self.spool.after(self.loaded, min(self.batch_size * 4, max(self.max_queue, 1)))
        with self.lock:
            for row in rows:
                held = self.spilled.pop(row.seq, None)
                resolve = held() if held is not None else None
                self.waiting.append(Entry(row.message_id, row.body, row.ms, row.seq, resolve))
                self.loaded = row.seq
            self.backlog = max(0, self.backlog - len(rows)) if rows else 0
            self.loading = False

    def take(self) -> list[Entry]:
        """The next request's events (taken from the queue, in flight from now on)."""
        chunk: list[Entry] = []
        while self.waiting and len(chunk) < self.batch_size:
            chunk.append(self.waiting.popleft())
        for entry in chunk:
            self.in_flight[id(entry)] = entry
        return chunk

    def idle(self) -> bool:
        return not self.waiting and not self.backlog and not self.in_flight

    # -- settling -------------------------------------------------------------------------
    @staticmethod
    def trip(chunk: Sequence[Entry], spend: Spend) -> Trip:
        """The request that sends ``chunk``: its events as rows of a book of their own."""
        return Trip(
            [e.message_id for e in chunk], [e.body for e in chunk], [e.ms for e in chunk], spend
        )

    def land(self, chunk: Sequence[Entry], trip: Trip) -> None:
        """Record how ``chunk``'s events ended: the states and texts their rows got in
        ``trip`` (call without the lock)."""
        self._settle(chunk, trip.ends())

    def fail(self, entries: Sequence[Entry], error: BaseException) -> None:
        """``entries`` ended ``failed`` with ``error`` (the tracker closing, a cancel)."""
        self._settle(entries, [(RowState.FAILED, str(error), error)] * len(entries))

    def _settle(
        self,
        entries: Sequence[Entry],
        ends: Sequence[tuple[RowState, str | None, TrackResult | BaseException]],
    ) -> None:
        """Spool rows of events that need no more sending leave it first, in one
        transaction; then the accounts, then the handles."""
        if self.spool is not None:
            done = (
                e.seq for e, end in zip(entries, ends, strict=True) if end[0] != RowState.FAILED
            )
            try:
                self.spool.remove(seq for seq in done if seq is not None)
            except ChurnConnectorError as exc:
                # they were delivered: a later tracker re-sends them, the API keeps one
                log.warning("%s", exc)
        with self.lock:
            accounts = self.accounts
            for entry, (state, text, _) in zip(entries, ends, strict=True):
                self.in_flight.pop(id(entry), None)
                if state == RowState.SENT:
                    accounts.delivered.append(entry.message_id)
                    accounts.n_delivered += 1
                else:
                    label: Any = state.label
                    accounts.undelivered.append(Undelivered(entry.message_id, label, text or label))
        for entry, (_, _, end) in zip(entries, ends, strict=True):
            if entry.resolve is not None:
                if isinstance(end, TrackResult):
                    entry.resolve(end, None)
                else:
                    entry.resolve(None, end)

    def abandon(self, reason: str) -> list[Entry]:
        """Everything still waiting, settled ``failed`` (the tracker is closing); with a
        spool the rows stay for the next tracker."""
        with self.lock:
            left = list(self.waiting)
            self.waiting.clear()
            for entry in left:
                self.in_flight[id(entry)] = entry
            backlog_ids = self.spool.ids(self.loaded) if self.spool and self.backlog else []
            spilled = dict(self.spilled)
            self.spilled.clear()
            self.backlog = 0
        error = DeliveryError(f"not sent: {reason}", counts={"failed": 1})
        self.fail(left, error)
        with self.lock:
            for message_id in backlog_ids:
                self.accounts.undelivered.append(Undelivered(message_id, "failed", str(error)))
        for held in spilled.values():
            resolve = held()
            if resolve is not None:
                resolve(None, error)
        return left

    def report(self, *, reset: bool = True) -> FlushReport:
        with self.lock:
            accounts = self.accounts
            pending = [e.message_id for e in self.waiting]
            pending += [e.message_id for e in self.in_flight.values()]
            backlog = self.backlog
            if reset:
                self.accounts = _Accounts()
        if backlog and self.spool is not None:
            pending += self.spool.ids(self.loaded)
        return FlushReport(
            tuple(accounts.delivered),
            tuple(accounts.undelivered),
            tuple(pending),
            accounts.n_delivered,
            self.spool.path if self.spool is not None else None,
        )
