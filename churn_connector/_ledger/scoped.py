"""A ledger seen from one run: one API's scope, reads that fail soft, writes that stop it."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeAlias, TypeVar

from .._core import LedgerError
from .base import NATURAL_KIND, Ledger, LedgerUnavailable, scheme_of

log = logging.getLogger("churn_connector")
_ACKNOWLEDGED = "record what the API acknowledged"
# the re-id guard's records, written before their events are sent (``stage``)
_INTENT = "record the natural keys of the events it was about to send"
T = TypeVar("T")

LedgerArg: TypeAlias = "str | os.PathLike[str] | Ledger | None"
"""A SQLite file path, a ledger URL (``postgresql://…``, ``s3://…``) or an open Ledger;
None for no ledger."""


class ScopedLedger:
    """A ledger seen from one API.

    A failed read sends what was perhaps delivered (the API de-duplicates); a failed write
    stops the run with ``LedgerError``, because a ledger that silently stops recording
    would make the next run re-send everything it was meant to skip.
    """

    def __init__(self, ledger: Ledger, scope: str, *, writable: bool = True) -> None:
        self.ledger = ledger
        self.scope = scope
        self.writable = writable  # False for dry runs: consult, never change
        self._reads = threading.Condition()
        self._reading = 0  # reads under way (the input's reader may be a thread of its own)
        self._ended = False

    def known(self, kind: str, keys: Sequence[str]) -> dict[str, str]:
        with self._reads:
            if self._ended:
                return {}  # the run ended: what is read now is never sent
            self._reading += 1
        try:
            return self.ledger.known(self.scope, kind, keys)
        except LedgerUnavailable as exc:
            # sending what was perhaps delivered costs requests, never data (the API dedups)
            log.warning("ledger read failed (%s); these rows are sent", exc.message)
            return {}
        finally:
            with self._reads:
                self._reading -= 1
                self._reads.notify_all()

    def end(self, seconds: float = 30.0) -> None:
        """The run ended: no read starts from now on, and this returns once none is under
        way (or after ``seconds``), so the ledger can be closed under no reader's feet (a
        read on a closed ledger logged "ledger read failed (Cannot operate on a closed
        database)" after an interrupt)."""
        with self._reads:
            self._ended = True
            self._reads.wait_for(lambda: self._reading == 0, timeout=seconds)

    def record(self, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        items = list(entries)
        what = _INTENT if kind == NATURAL_KIND else _ACKNOWLEDGED
        self._safely(lambda: self.ledger.record(self.scope, kind, items), what)

    def record_now(self, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        items = list(entries)
        what = _INTENT if kind == NATURAL_KIND else _ACKNOWLEDGED
        self._safely(lambda: self.ledger.record_now(self.scope, kind, items), what)

    def forget(self, kind: str, keys: Iterable[str]) -> None:
        items = list(keys)
        if items:
            self._safely(lambda: self.ledger.forget(self.scope, kind, items))

    def flush(self) -> None:
        self._safely(self.ledger.flush)

    def _safely(self, write: Callable[[], None], what: str = _ACKNOWLEDGED) -> None:
        if not self.writable:
            return
        try:
            write()
        except LedgerUnavailable as exc:
            where = self.ledger.location
            raise LedgerError(
                f"ledger {where}: cannot {what} ({exc.message}); "
                "the run was stopped. Fix the ledger (or pass another) and re-run: what "
                "was delivered is stored once",
                path=where,
                retryable=exc.retryable,
            ) from None


def open_ledger(
    ledger: LedgerArg, scope: str, *, dry_run: bool
) -> tuple[ScopedLedger | None, Ledger | None]:
    """The scoped ledger for a run, and the Ledger the run opened itself (to close)."""
    if ledger is None:
        return None, None
    if isinstance(ledger, Ledger):
        return ScopedLedger(ledger, scope, writable=not dry_run), None
    if dry_run and scheme_of(ledger) is None and not Path(ledger).exists():
        return None, None  # nothing recorded yet, and a dry run creates nothing
    opened = Ledger(ledger, read_only=dry_run)
    return ScopedLedger(opened, scope, writable=not dry_run), opened
