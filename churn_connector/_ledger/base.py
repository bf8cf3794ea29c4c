"""The ledger's one API, whatever keeps it: a SQLite file, a PostgreSQL table, or segment
files under an object-storage prefix.

``Ledger(location)`` picks the backend from the location: a path (or ``sqlite:///path``) is
a SQLite file; ``postgresql://…`` a table in PostgreSQL; ``s3://``, ``gs://``, ``az://``,
``file://`` (and the other fsspec URLs) append-only segment files under a prefix. Every
backend means the same: records of (scope, kind, key) → digest, the time of their
acknowledgement, nothing else.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pandas as pd
import pyarrow as pa

from .._core import ConfigurationError, Secret

# event records older than this are dead weight: the API refuses events more than 30 days
# old, so such an event is invalid (or expired) before a ledger is asked about it
EVENT_RETENTION_DAYS = 35

# the natural keys of delivered events (user, event type, occurred_at; or id columns),
# each with the message id it was sent under: the re-id guard's records (``stage``)
NATURAL_KIND = "event_keys"
# the kinds that hold event records: retention drops them alike, and forgetting a scope's
# events forgets both (a natural key without its event would hold back a re-send)
EVENT_KINDS = ("events", NATURAL_KIND)


def kinds_of(kind: str | None) -> tuple[str, ...] | None:
    """The record kinds ``kind`` means in ``drop`` (None: every kind)."""
    if kind is None:
        return None
    return EVENT_KINDS if kind == "events" else (kind,)


# what every backend exports (``ledger export``), one row per live record
EXPORT_SCHEMA = pa.schema(
    [
        ("scope", pa.string()),
        ("kind", pa.string()),
        ("key", pa.string()),
        ("digest", pa.string()),
        ("acknowledged_at", pa.timestamp("ms", tz="UTC")),
    ]
)
STATS_COLUMNS = ["scope", "kind", "records", "last_acknowledged"]

# scheme -> (backend module, class, the extra that installs its library)
_POSTGRES = ("postgres", "PostgresLedger", "postgres")
_OBJECTS = ("objects", "ObjectLedger", "s3")
_SCHEMES: dict[str, tuple[str, str, str]] = {
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "s3": _OBJECTS,
    "s3a": _OBJECTS,
    "gs": ("objects", "ObjectLedger", "gcs"),
    "gcs": ("objects", "ObjectLedger", "gcs"),
    "az": ("objects", "ObjectLedger", "azure"),
    "abfs": ("objects", "ObjectLedger", "azure"),
    "abfss": ("objects", "ObjectLedger", "azure"),
    "file": _OBJECTS,
    "memory": _OBJECTS,
}


def digest(body: bytes) -> str:
    """The digest recorded for a request body (SHA-256, 128 bits in hex)."""
    return hashlib.sha256(body).hexdigest()[:32]


def scope_of(base_url: str, api_key: Secret) -> str:
    """Which API and application a record belongs to (the key only as a hash)."""
    return f"{base_url}#{api_key.fingerprint()}"


def scheme_of(location: str | os.PathLike[str]) -> str | None:
    """The URL scheme of a ledger location (None: a path, so a SQLite file); libpq's
    ``key=value`` settings (``host=db dbname=ledger user=churn``) are PostgreSQL's."""
    if isinstance(location, str) and is_conninfo(location):
        return "postgresql"
    if not isinstance(location, str) or "://" not in location:
        return None
    return location.split("://", 1)[0].lower()


# libpq's connection keywords (PostgreSQL 15's, and those of later versions we know)
_LIBPQ_KEYS = frozenset(
    (
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "require_auth",
        "channel_binding",
        "connect_timeout",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "replication",
        "gssencmode",
        "sslmode",
        "requiressl",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslpassword",
        "sslcertmode",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "requirepeer",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "service",
        "target_session_attrs",
        "load_balance_hosts",
        "sslnegotiation",
    )
)
_CONNINFO_PAIR = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)")
_SECRET_KEYS = ("password", "sslpassword")  # what messages never show


def _pairs(text: str) -> list[tuple[str, str]] | None:
    """libpq ``key=value`` settings as pairs (quotes and backslashes undone); None when
    ``text`` is not such settings throughout."""
    pairs, at = [], 0
    while at < len(text.rstrip()):
        found = _CONNINFO_PAIR.match(text, at)
        if found is None or found.end() == at:
            return None
        key, value = found.groups()
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        pairs.append((key.lower(), value))
        at = found.end()
    return pairs or None


def is_conninfo(text: str) -> bool:
    """``text`` is libpq's ``key=value`` connection settings (never a file's path)."""
    if "://" in text or "=" not in text:
        return False
    pairs = _pairs(text)
    return pairs is not None and all(key in _LIBPQ_KEYS for key, _ in pairs)


_USER_PASSWORD = re.compile(r"(://[^/:@?#]*):[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_CONNINFO_PASSWORD = re.compile(
    r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']*)", re.IGNORECASE
)


def redact(url: str) -> str:
    """``url`` as messages show it: a password in it (user info, query or libpq setting;
    ``sslpassword`` too) replaced by ***."""
    if is_conninfo(url):
        return _CONNINFO_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            name = user.split(":", 1)[0]
            netloc = f"{name}:***@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in pairs], safe="*/:"
            )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # a URL urllib cannot split (a broken IPv6 host): by pattern
        url = _USER_PASSWORD.sub(r"\1:***@", url)
        return _QUERY_PASSWORD.sub(r"\1***", url)


def password_in(url: str) -> str | None:
    """The password a ledger URL holds (user info, ``password=`` or ``sslpassword=``, in
    its query or as libpq settings), if any."""
    found = secrets_in(url)
    return found[0] if found else None


def secrets_in(url: str) -> list[str]:
    """Every password a ledger URL or libpq settings hold (``sslpassword`` too)."""
    if is_conninfo(url):
        return [v for k, v in _pairs(url) or () if k in _SECRET_KEYS and v]
    try:
        parts = urlsplit(url)
        found = [parts.password] if parts.password else []
        found += [
            value
            for key, value in parse_qsl(parts.query, keep_blank_values=True)
            if key.lower() in _SECRET_KEYS and value
        ]
    except ValueError:
        return []
    return found


PASSWORD_ADVICE = (
    "give the password through PGPASSWORD or ~/.pgpass (libpq reads both), or an open "  # noqa: S105 - advice
    "cc.Ledger(url, password=...)"
)


def without_password(location: str, where: str, advice: str = PASSWORD_ADVICE) -> str:
    """``location``, refused (ValueError) when it holds a password: ``where`` says why a
    password must not be given there (never echoing it)."""
    if isinstance(location, str) and password_in(location):
        raise ValueError(f"ledger {redact(location)}: a password in a ledger URL {where}: {advice}")
    return location


def command_line_location(text: str) -> str:
    """A ledger location given on the command line (``--ledger``, ``churn-connector ledger``)."""
    return without_password(
        text, "is not taken from the command line (shell history and process lists keep it)"
    )


class LedgerUnavailable(Exception):
    """A backend could not read or write just now: ``message`` names the ledger (never its
    password); ``retryable`` says whether a later try may succeed as things are."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


def extra_of(location: str | os.PathLike[str]) -> str:
    """The extra that installs what ``location``'s backend needs ("" for SQLite)."""
    scheme = scheme_of(location)
    return _SCHEMES[scheme][2] if scheme in _SCHEMES else ""


def install_advice(location: str | os.PathLike[str]) -> str:
    """``pip install "churn-connector[extra]"`` for ``location``'s backend."""
    return f'pip install "churn-connector[{extra_of(location)}]"'


def backend_of(location: str | os.PathLike[str]) -> type[Ledger]:
    """The Ledger class for ``location`` (its library imported only now)."""
    scheme = scheme_of(location)
    if scheme is None or scheme == "sqlite":
        module, name, extra = "sqlite", "SqliteLedger", ""
    elif scheme in _SCHEMES:
        module, name, extra = _SCHEMES[scheme]
    else:
        known = ", ".join(f"{s}://" for s in sorted({"sqlite", *_SCHEMES}))
        raise ConfigurationError(
            f"ledger {redact(str(location))}: unknown scheme {scheme!r}; a ledger is a SQLite "
            f"file path or a URL of {known}"
        )
    try:
        found = importlib.import_module(f"{__package__}.{module}")
    except ImportError as exc:
        raise ConfigurationError(
            f"ledger {redact(str(location))} needs the {extra!r} extra ({exc}): "
            + install_advice(location)
        ) from None
    backend: type[Ledger] = getattr(found, name)
    return backend


class Ledger:
    """What the API acknowledged, by scope, kind (``events``/``identities``) and key.

    ``Ledger(location)`` opens the backend the location names: a SQLite file path (or
    ``sqlite:///path``), ``postgresql://user@host/db`` (psycopg 3: the ``postgres`` extra;
    the password from the URL, ``PGPASSWORD`` or ``~/.pgpass``), or an object-storage
    prefix ``s3://bucket/prefix/`` (also ``gs://``, ``az://``, ``file://``; fsspec: the
    ``s3``, ``gcs`` or ``azure`` extra). ``read_only`` consults without changing anything
    (dry runs). A missing extra is a ``ConfigurationError`` naming the ``pip install``.
    """

    location: str  # how messages name it: a path, or the URL without its password
    read_only: bool
    kind_name: ClassVar[str] = "ledger"  # "SQLite file", "PostgreSQL table", ...

    # the backends implement every method below but flush and count (a plain class, not
    # an ABC: ``cc.Ledger(location)`` must type-check where users call it)

    def __new__(
        cls, location: str | os.PathLike[str] | None = None, *args: Any, **options: Any
    ) -> Self:
        if cls is Ledger:
            if location is None:
                raise TypeError("Ledger() needs a location: a SQLite path or a ledger URL")
            cls = backend_of(location)  # type: ignore[assignment]
        return object.__new__(cls)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- what a run uses

    def known(self, scope: str, kind: str, keys: Sequence[str]) -> dict[str, str]:
        """The recorded digest of each of ``keys`` that was acknowledged before (one query
        for all of them, not one per key)."""
        raise NotImplementedError

    def record(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        """Record acknowledged (key, digest) pairs; a later acknowledgement replaces one."""
        raise NotImplementedError

    def record_now(self, scope: str, kind: str, entries: Iterable[tuple[str, str]]) -> None:
        """Record (key, digest) pairs and write them before returning (the re-id guard's
        records, which must hold before their requests leave); what is buffered for
        ``record`` may stay buffered."""
        self.record(scope, kind, entries)
        self.flush()

    def forget(self, scope: str, kind: str, keys: Iterable[str]) -> None:
        """Drop records before their keys are sent again: if that send's outcome is
        unknown (stored, response lost), an old record must not make a later run skip."""
        raise NotImplementedError

    def flush(self) -> None:
        """Write what is buffered (object storage buffers records; the others write each
        acknowledgement as it comes)."""

    def bound_by(self, deadline: float | None) -> None:
        """Bound every call from now on by ``deadline`` (on ``time.monotonic()``'s clock;
        None: by the ledger's own bounds only): a run hands its deadline over, so a ledger
        that stops answering ends the run near it. A server's ledger (PostgreSQL) uses it."""

    def close(self) -> None:
        """Release the file, connection or buffers (a ledger given by location is closed
        after each run)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- operations

    def stats(self) -> pd.DataFrame:
        """Records per scope and kind, and the last acknowledgement of each (UTC)."""
        raise NotImplementedError

    def drop(
        self, scope: str, *, kind: str | None = None, before: datetime | date | None = None
    ) -> int:
        """Forget the records of ``scope`` (of ``kind`` only; acknowledged before
        ``before`` only): retention. Returns how many were dropped."""
        raise NotImplementedError

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every live record, as batches of :data:`EXPORT_SCHEMA` (``ledger export``)."""
        raise NotImplementedError

    def compact(self, *, keep_events_days: int = EVENT_RETENTION_DAYS) -> str:
        """Apply the retention default (drop event records acknowledged more than
        ``keep_events_days`` ago) and tidy the storage; safe while others write. Returns
        one line saying what was done."""
        raise NotImplementedError

    def count(self, kind: str) -> int:
        """How many keys of ``kind`` (``"events"``/``"identities"``) are recorded, all scopes."""
        frame = self.stats()
        return int(frame.loc[frame["kind"] == kind, "records"].sum())

    def describe(self) -> str:
        """One line: what and where this ledger is (never a password)."""
        return f"{self.kind_name} {self.location}"


def cutoff(before: datetime | date | None) -> datetime | None:
    """``before`` as an aware UTC datetime (a date means its midnight, UTC)."""
    if before is None:
        return None
    if not isinstance(before, datetime):
        return datetime(before.year, before.month, before.day, tzinfo=UTC)
    if before.tzinfo is None:
        raise ConfigurationError(
            f"before={before.isoformat()} has no time zone: give an aware datetime (UTC)"
        )
    return before.astimezone(UTC)


def retention_cutoff(keep_events_days: int) -> datetime:
    """The acknowledgement time before which event records are dropped by ``compact``."""
    if isinstance(keep_events_days, bool) or keep_events_days < 31:
        raise ConfigurationError(
            f"keep_events_days must be at least 31 (the API takes events up to 30 days old: a "
            f"younger record may still skip a re-sent event), not {keep_events_days!r}"
        )
    return datetime.now(UTC) - timedelta(days=keep_events_days)


def export_batch(rows: Sequence[tuple[Any, ...]] | pd.DataFrame) -> pa.RecordBatch:
    """Records (scope, kind, key, digest, acknowledged_at) as a batch of EXPORT_SCHEMA."""
    frame = pd.DataFrame(rows, columns=EXPORT_SCHEMA.names)
    at = pd.to_datetime(frame["acknowledged_at"], utc=True)
    frame["acknowledged_at"] = at.dt.floor("ms")
    table = pa.Table.from_pandas(frame, schema=EXPORT_SCHEMA, preserve_index=False)
    batches = table.combine_chunks().to_batches()  # pandas' Arrow-backed text: chunked
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=EXPORT_SCHEMA)


def stats_frame(rows: Iterable[tuple[str, str, int, Any]]) -> pd.DataFrame:
    """The ``stats()`` frame from (scope, kind, records, last acknowledgement) rows."""
    frame = pd.DataFrame(list(rows), columns=STATS_COLUMNS)
    frame["records"] = frame["records"].astype("int64")
    frame["last_acknowledged"] = pd.to_datetime(frame["last_acknowledged"], utc=True)
    return frame.sort_values(["scope", "kind"], ignore_index=True)
