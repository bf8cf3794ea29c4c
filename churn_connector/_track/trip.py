"""One request of a tracker, as a small run: its events are the rows of a ``RowBook``.

A tracker takes up to ``batch_size`` queued events and sends them as one request; the
events become rows of a ``RowBook`` of their own (labelled by message id) and go out
through the batch path's ``Landing``: the same send-time expiry, the same size limit learned
from 413s, the same bisection of a refused batch within ``max_split_requests``, the same
states and texts on each row, the API's own word on the events it names. So a tracked event
ends with the state and the text a row of a batch would have; ``Book.land`` reads them back
for the event's handle, its spool row and the flush report. The book lives as long as its
request: a tracker that runs for months keeps no row of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._core import EVENTS_PATH, DeliveryError, RowBook, RowState
from .._delivery import Landing, Outcome, Request, Spend
from .send import TrackResult, not_delivered

__all__ = ["Trip"]


class Trip:
    """A tracker's request: its entries as rows 0..n-1 of ``rows``, the ``request`` to send,
    the ``landing`` that sends it, and per row what ended it."""

    def __init__(
        self, message_ids: Sequence[str], bodies: Sequence[bytes], ms: Sequence[int], spend: Spend
    ) -> None:
        self.message_ids = list(message_ids)
        self.rows = RowBook()
        self.rows.extend(self.message_ids)
        n = len(self.message_ids)
        # the bodies as a list, not an Arrow array: no Arrow allocation on a sender thread,
        # which a fork could copy into a child while it holds the allocator's lock
        self.request = Request(
            EVENTS_PATH, list(range(n)), list(bodies), times=np.asarray(ms, dtype=np.int64)
        )
        self.landing = Landing(self.rows, spend, on_landed=self._landed)
        self._outcomes: dict[int, Outcome | None] = {}  # the request that ended each row
        self._stop: BaseException | None = None

    def _landed(self, positions: Sequence[int], state: RowState, outcome: Outcome | None) -> None:
        for position in positions:
            self._outcomes[position] = outcome

    def stop(self, error: BaseException) -> None:
        """The request ended without landing (the run was stopped, a cancel, a bug): its rows
        still pending are ``failed`` with ``error``'s text, and their handles get ``error``."""
        self._stop = error
        pending = np.flatnonzero(self.rows.status == RowState.PENDING)
        self.rows.set(pending, RowState.FAILED, error=str(error))

    def ends(self) -> list[tuple[RowState, str | None, TrackResult | BaseException]]:
        """Each row's state, its text (a batch row's ``error``) and what its handle gets."""
        status = self.rows.status.tolist()
        errors = self.rows.errors
        out: list[tuple[RowState, str | None, TrackResult | BaseException]] = []
        for position, (message_id, code) in enumerate(zip(self.message_ids, status, strict=True)):
            state = RowState(code)
            outcome = self._outcomes.get(position)
            text = errors.get(position)
            if state == RowState.SENT:
                assert outcome is not None
                result = TrackResult(
                    message_id, outcome.http_status, outcome.attempts, outcome.elapsed_s
                )
                out.append((state, None, result))
            elif position not in self._outcomes and self._stop is not None:
                out.append((state, text, self._stop))
            else:
                attempts = 0 if outcome is None else outcome.attempts
                out.append((state, text, not_delivered(message_id, state.label, text, attempts)))
        return out

    def cancelled(self) -> DeliveryError:
        """The error of a request cancelled in flight (the tracker closed by a cancelled
        task): outcome unknown, never in limbo."""
        return DeliveryError(
            "cancelled in flight; outcome unknown, safe to re-send", counts={"failed": 1}
        )
