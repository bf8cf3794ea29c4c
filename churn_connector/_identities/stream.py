"""The identities stream: slices -> validation -> identify bodies, one per user and row.

Two rows for one user are a finding. Because input is streamed in slices, the rows of each
such user are found first by a pass over the id column (``duplicates.duplicate_users``),
then each slice marks them by the ``duplicates`` option: all invalid (``error``), all but the
last skipped (``keep_last``), or each sent in row order (``in_order``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow

from .._core import DataSource, Kind, Note, RowState, option, rows_text
from .._options import USER_ID, IdentityOptions
from .._read import ReadSpec, Slice, iter_frames, iter_slices, pinned, replayable
from .._slices import SliceStream
from .._validate import id_type_ok, ids_to_wire, not_blank
from .._wire import ConsentTally, WireBatch, body_bytes, build_identities
from .schema import build_schema


class IdentityStream(SliceStream):
    """Validates and converts slices of one identities input; knows its duplicate users."""

    kind: Kind = "identities"

    def __init__(self, data: DataSource, options: IdentityOptions) -> None:
        super().__init__(build_schema(options))
        # read twice (the id pre-pass, then the slices): one-shot sources are spooled, a
        # Delta or Iceberg table pinned at its version
        self.data = replayable(pinned(data, options.reading))
        self.options = options
        users = duplicate_users(self.data, options.reading)
        self._users = {u: sorted(ps) for u, ps in users.items()}
        self._user_at = {p: u for u, ps in self._users.items() for p in ps}
        self._dup_positions = np.array(sorted(self._user_at), dtype=np.int64)
        self.consent = ConsentTally()

    def slices(self) -> Iterator[Slice]:
        return self.tapped(iter_slices(self.data, self.options.reading))

    def process(self, part: Slice | pd.DataFrame) -> WireBatch:
        """Validate and convert one slice; return one identify body per row to send."""
        positions, bodies = self._bodies(part)
        users = [body[USER_ID] for body in bodies]
        always = set()
        if self.options.duplicates == "in_order":
            # a ledger must not skip one of them: that would reorder what the API merges
            always = {p for p, u in zip(positions, users, strict=True) if u in self._users}
        return WireBatch(positions, users, [body_bytes(b) for b in bodies], always_send=always)

    def objects(self, part: Slice | pd.DataFrame) -> list[dict[str, Any]]:
        """Like ``process``, but the identify bodies as objects."""
        return self._bodies(part)[1]

    def _bodies(self, part: Slice | pd.DataFrame) -> tuple[list[int], list[dict[str, Any]]]:
        begun = self.begin(part)
        start = begun.start
        bodies, marks = build_identities(begun.work, self.options)
        self._mark_duplicates(start, start + len(part))
        # rows of the work frame still to be sent (not invalid or skipped as duplicates)
        kept = np.flatnonzero(self.book.status[start + begun.valid] == RowState.PENDING)
        self.consent.add(marks, kept)
        positions = (start + begun.valid[kept]).tolist()
        return positions, [bodies[i] for i in kept.tolist()]

    def notes(self) -> list[Note]:
        """What the report says that is not a failure: consent defaults and choices."""
        return [*super().notes(), *self.consent.notes()]

    def _mark_duplicates(self, start: int, stop: int) -> None:
        """States of this slice's rows of duplicate users; notes once a user's rows are all seen."""
        lo, hi = np.searchsorted(self._dup_positions, [start, stop])
        mode = self.options.duplicates
        for pos in self._dup_positions[lo:hi].tolist():
            user = self._user_at[pos]
            last = self._users[user][-1]
            if mode == "error":
                self.book.set([pos], RowState.INVALID)
            elif mode == "keep_last" and pos != last and self.book.status[pos] != RowState.INVALID:
                self.book.set([pos], RowState.SKIPPED)
            if pos == last:
                self._note_duplicates(user)

    def _note_duplicates(self, user: str) -> None:
        positions = self._users[user]
        labels = self.book.labels
        if self.options.duplicates == "keep_last":
            last = positions[-1]
            last_invalid = self.book.status[last] == RowState.INVALID
            for pos in positions[:-1]:
                if self.book.status[pos] != RowState.SKIPPED:
                    continue
                if not last_invalid:
                    self.book.add_error(pos, f"superseded by {rows_text([labels[last]])}")
                    continue
                # sending an older row instead would present stale data as current
                message = (
                    f"the last row for external_user_id {user!r} ({rows_text([labels[last]])}) "
                    "is invalid, so nothing is sent for this user: fix that row"
                )
                self.failures.fail(pos, USER_ID, "external_user_id_last_row_invalid", user, message)
        elif self.options.duplicates == "error":
            for pos in positions:
                others = rows_text([labels[p] for p in positions if p != pos])
                message = (
                    f"external_user_id {user!r} is also on {others}: one row per user, or pass "
                    f"{option('duplicates', 'keep_last')} (the last row wins) or "
                    f"{option('duplicates', 'in_order')} (each row is sent, one after another "
                    "in row order)"
                )
                self.failures.fail(
                    pos, USER_ID, "external_user_id_duplicate", user, message, state=None
                )


# ------------------------------------------------------------------------------------------
# Users with several rows, found by a cheap pass over the id column before validation.


def duplicate_users(data: DataSource, reading: ReadSpec) -> dict[str, list[int]]:
    """Wire user id -> row positions (0-based, ascending), for users with two rows or more.

    Reads only ``external_user_id`` where the input allows; rows whose id is invalid are
    left out (validation reports them). ``data`` is read again later, so it must be
    replayable (``_inputs.replayable``).
    """
    ids: list[pyarrow.Array] = []
    positions: list[np.ndarray] = []
    offset = 0
    for df in iter_frames(data, reading, columns=[USER_ID]):
        if USER_ID in df.columns:
            s = df[USER_ID]
            ok = (id_type_ok(s) & s.notna() & not_blank(s)).to_numpy(bool)
            ids.append(pyarrow.array(ids_to_wire(s[ok]), type=pyarrow.string()))
            positions.append(offset + np.flatnonzero(ok))
        offset += len(df)
    if not ids:
        return {}
    # Arrow-backed strings keep millions of ids compact; duplicated() is vectorised
    wire = pd.Series(pd.arrays.ArrowExtensionArray(pyarrow.chunked_array(ids)))
    repeated = wire.duplicated(keep=False).to_numpy(dtype=bool)
    out: dict[str, list[int]] = {}
    for user, pos in zip(
        wire[repeated].tolist(), np.concatenate(positions)[repeated].tolist(), strict=True
    ):
        out.setdefault(user, []).append(pos)
    return out
