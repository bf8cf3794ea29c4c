"""The package's shared vocabulary: row states, chunk statuses, what a user may hand in."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal, TypeAlias, TypedDict


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
    # not sent: a ledger holds this event (user, type, time) delivered under another id
    HELD = 7

    @property
    def label(self) -> str:
        """The lower-case name shown in result frames (``"sent"``, ``"invalid"``, ...)."""
        return self.name.lower()


STATE_NAMES: tuple[str, ...] = tuple(s.label for s in RowState)

Kind = Literal["events", "identities"]
"""Which resource a table holds, a stream carries or a task sends."""
KINDS: tuple[Kind, ...] = ("events", "identities")


class ExitCode(IntEnum):
    """The command line's exit codes, and the tasks' summaries (the highest that applies
    wins): a contract for scripts and CI (docs/reference/exit-codes.md)."""

    OK = 0  # every row delivered (or skipped as already delivered); validate: all valid
    INVALID = 1  # some rows invalid (or expired, or held) and not sent; the rest delivered
    UNDELIVERED = 2  # some valid rows could not be delivered
    STOPPED = 3  # usage, configuration, input, authentication or ledger error; unreachable

    @staticmethod
    def interrupted(signal_number: int) -> int:
        """A run stopped by a signal: 128 + its number (130 Ctrl-C, 143 SIGTERM)."""
        return 128 + signal_number


ChunkStatus = Literal["sent", "rejected", "failed", "split", "dry_run"]
"""How one request ended: ``split`` was rejected and re-sent as two halves."""

Channel = Literal["email", "sms", "push"]
CHANNELS: tuple[Channel, ...] = ("email", "sms", "push")
ADDRESS_WORDS: dict[str, str] = {
    "email": "an email address",
    "sms": "a phone number",
    "push": "a push token",
}

ExtraColumns = Literal["error", "ignore"]
Duplicates = Literal["error", "keep_last", "in_order"]
Decimals = Literal["error", "float", "str"]
EpochUnit = Literal["s", "ms", "us", "ns"]
AuthHeader = Literal["bearer", "x-api-key"]
CaStore = Literal["certifi", "system"]
"""The CAs trusted when no bundle is named: certifi's, or the operating system's store."""
IdFormat = Literal["v1", "v2"]
"""The canonical form behind hashed message ids (docs/concepts/message-ids.md): ``v2``
(default) writes a float that holds an integer as that integer and omits null members of
structs, maps and dicts; ``v1`` makes the events and ids of 0.1 byte for byte (for
backfills begun with it)."""
Partitioning = Literal["hive", "none"]
"""How the ``key=value`` folders of part files are read (``"none"``, or None: not at all)."""
BlankConsent = Literal["error", "omit_channel", "opted_in"]
"""What a blank ``<channel>_opted_in`` cell beside an address means (a blank is not consent)."""

NoteKind = Literal[
    "opted_in_by_default",  # no consent column (or an item without opted_in): the default
    "blank_consent_omitted",  # blank_consent="omit_channel" left channels out
    "blank_consent_opted_in",  # blank_consent="opted_in" sent blanks as opted in
    "opt_out_without_address",  # an opt-out on a row without the address: nothing to send
    "event_types_restyled",  # event_type_style rewrote event types (each mapping counted)
    "no_final_newline",  # a text file's last line is whole but unterminated: cut or not?
    "plan_unknown_events",  # unknown_events="warn": event types the tracking plan lacks, sent
]


class Note(TypedDict):
    """Something a report says that is not a failure: plain JSON values, for machines too."""

    kind: NoteKind
    column: str  # the column it concerns (``email_opted_in``, ``channels``, ...)
    count: int  # channel items (or rows) it concerns
    message: str  # one sentence with the count, for people


DataSource: TypeAlias = Any
"""A DataFrame, anything Arrow-native, a Delta or Iceberg table, a file, folder or glob, or an
iterable of them (``_read``)."""
