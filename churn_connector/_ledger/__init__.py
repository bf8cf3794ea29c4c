"""The ledger: an opt-in record of what the API acknowledged, shared by the runs that use it.

With a ledger, a re-run skips events whose message id was already acknowledged, and
identify sends only users whose body changed since their last acknowledgement. Only keys
and digests are stored (message ids, user ids, hashes of bodies), never the data itself.
Records are scoped to one API (base URL and a hash of the key): a ledger used against
another API or application skips nothing there.

One API, three homes, chosen by the location (``base``): a SQLite file (``sqlite``), a
PostgreSQL table shared by concurrent workers (``postgres``), or immutable segment files
under an object-storage prefix (``objects``). ``scoped`` is a ledger seen from one run;
``stage`` the step of the pipeline that consults and feeds it.
"""

from __future__ import annotations

from .base import (
    EVENT_RETENTION_DAYS,
    EXPORT_SCHEMA,
    NATURAL_KIND,
    Ledger,
    LedgerUnavailable,
    backend_of,
    command_line_location,
    digest,
    password_in,
    redact,
    scheme_of,
    scope_of,
    without_password,
)
from .scoped import LedgerArg, ScopedLedger, open_ledger
from .stage import Guard, LedgerStage

__all__ = [
    "EVENT_RETENTION_DAYS",
    "EXPORT_SCHEMA",
    "NATURAL_KIND",
    "Guard",
    "Ledger",
    "LedgerArg",
    "LedgerStage",
    "LedgerUnavailable",
    "ScopedLedger",
    "backend_of",
    "command_line_location",
    "digest",
    "open_ledger",
    "password_in",
    "redact",
    "scheme_of",
    "scope_of",
    "without_password",
]
