"""Consent: a blank consent cell is never taken for consent.

A channel item built from an address column (contract 2.4) gets its ``opted_in`` from the
row's ``<channel>_opted_in`` cell:

- a flag: that value (false records an opt-out);
- a blank cell (null, NaN, None, pd.NA, text of white space only): not consent. The row is
  invalid (check ``<channel>_opted_in_blank``) unless the caller chose ``blank_consent``:
  ``"omit_channel"`` leaves the channel out of the request (the API keeps what it holds),
  ``"opted_in"`` sends it opted in;
- no such column: the contract's default (2.4: opted in), said in a note;
  ``require_consent=True`` makes those rows invalid (``<channel>_opted_in_required``).

A consent cell on a row without the address sends nothing, since a channel item needs its
address; an opt-out there is said in a note, because the API never hears of it. Items of the
``channels`` column without ``opted_in`` go as given (the API's default applies), counted in
a note, or refused with ``require_consent=True``.

This module decides over whole columns (numpy arrays) and words the notes; ``channels``
reads the cells, ``_identities.schema`` checks them, ``identities`` builds the items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np

from .._core import CHANNELS, BlankConsent, Note, NoteKind, option
from .._options import ADDRESS_COLUMNS, CONSENT_COLUMNS

NoteKey = tuple[NoteKind, str]  # (kind, column)
Marks = dict[NoteKey, np.ndarray]  # per row of a slice: the items (or rows) a note counts
EXPLICIT = "channels"  # the column of explicit channel items
_KINDS: tuple[NoteKind, ...] = get_args(NoteKind)
_COLUMNS = (*CONSENT_COLUMNS.values(), EXPLICIT)


@dataclass(frozen=True)
class Consent:
    """One channel's consent cells over the rows of a slice."""

    column: str
    present: bool  # the table has the column
    blank: np.ndarray  # per row: the cell is blank (all False when the column is absent)
    value: np.ndarray  # per row: the cell says true (False where blank)


def decide(
    addressed: np.ndarray, consent: Consent, blank_consent: BlankConsent
) -> tuple[np.ndarray, np.ndarray]:
    """(send, opted_in) per row, for the rows whose address is ``addressed``.

    A blank cell is sent only with ``blank_consent="opted_in"``; with ``"error"`` its row is
    invalid and never reaches the wire, and nothing here turns a blank into consent.
    """
    if not consent.present:
        return addressed, np.ones(len(addressed), dtype=bool)  # contract 2.4's default
    send = addressed & (~consent.blank | (blank_consent == "opted_in"))
    return send, consent.value | consent.blank


def consent_marks(addressed: np.ndarray, consent: Consent, blank_consent: BlankConsent) -> Marks:
    """What the notes count on each row for one channel (see the module's docstring)."""
    column = consent.column
    if not consent.present:
        return {("opted_in_by_default", column): addressed}
    marks: Marks = {
        ("opt_out_without_address", column): ~addressed & ~consent.blank & ~consent.value
    }
    if blank_consent == "omit_channel":
        marks["blank_consent_omitted", column] = addressed & consent.blank
    elif blank_consent == "opted_in":
        marks["blank_consent_opted_in", column] = addressed & consent.blank
    return marks


class ConsentTally:
    """The notes' counts over the rows that go to the wire, slice after slice."""

    def __init__(self) -> None:
        self.totals: dict[NoteKey, int] = {}

    def add(self, marks: Marks, rows: np.ndarray) -> None:
        """Count ``marks`` on ``rows`` (positions within the slice) only."""
        for key, per_row in marks.items():
            n = int(per_row[rows].sum())
            if n:
                self.totals[key] = self.totals.get(key, 0) + n

    def notes(self) -> list[Note]:
        """One note per (kind, column) with a count, channel by channel."""
        keys = sorted(self.totals, key=lambda k: (_COLUMNS.index(k[1]), _KINDS.index(k[0])))
        return [
            Note(
                kind=kind,
                column=column,
                count=self.totals[kind, column],
                message=message(kind, column, self.totals[kind, column]),
            )
            for kind, column in keys
        ]


def message(kind: NoteKind, column: str, n: int) -> str:
    """The sentence of one note, its count first."""
    one = n == 1
    if column == EXPLICIT:
        return (
            f"{n:,} channels item{'' if one else 's'} {'has' if one else 'have'} no opted_in: "
            "sent as given, so the API's default applies (contract 2.3: opted in); give each "
            "item opted_in, or refuse such items with require_consent=True (--require-consent)"
        )
    channel = next(c for c in CHANNELS if CONSENT_COLUMNS[c] == column)
    items = f"{n:,} {channel} channel{'' if one else 's'} {'is' if one else 'are'}"
    if kind == "opted_in_by_default":
        return (
            f"{items} opted in by default: the table has no {column} column (the contract's "
            f"default for an address, 2.4); add {column}, or refuse such rows with "
            f"{option('require_consent')}"
        )
    if kind == "blank_consent_omitted":
        return (
            f"{items} left out of the request: {column} is blank "
            f"({option('blank_consent', 'omit_channel')}), so the API keeps what it holds for them"
        )
    if kind == "blank_consent_opted_in":
        return (
            f"{items} sent opted in although {column} is blank "
            f"({option('blank_consent', 'opted_in')})"
        )
    address = ADDRESS_COLUMNS[channel][0]
    rows = f"{n:,} row{'' if one else 's'} {'has' if one else 'have'}"
    return (
        f"{rows} {column} false but no {address}: the opt-out is not sent (a channel item "
        "needs its address)"
    )
