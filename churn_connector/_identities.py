"""The identities path: schema, wire bodies, duplicate users and the IdentityStream.

One row per user becomes one ``POST /v1/identify`` body (contract 2.2): ``traits`` from a
``traits`` object and ``traits.<key>`` columns, ``preferred_channel``, and ``channels`` from an
explicit ``channels`` list followed by items built from the convenience columns ``email``,
``phone`` and ``push_token`` (alias ``pushToken``) and their ``*_opted_in``/``*_verified``
flags (contract 2.4). Nothing is coerced: flags must be real booleans, phones E.164 (or, with
``phone_region``, a number ``phonenumbers`` validates, normalised to E.164).

Two rows for one user are a finding. Because input is streamed in slices, the rows of each
such user are found first by a cheap pass over the id column (``duplicate_users``), so
every slice size gives the same result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pandera.pandas as pa
import phonenumbers
import pyarrow
import pyarrow.parquet as pq

from . import _columns, _ids
from ._exceptions import ConfigurationError
from ._ledger import ScopedLedger
from ._ledger import digest as ledger_digest
from ._readers import DEFAULT_SLICE_ROWS, _arrow_to_pandas, iter_frames
from ._results import INVALID, PENDING, SKIPPED, RowBook
from ._schemas import (
    CHANNELS,
    E164_PATTERN,
    EMAIL_PATTERN,
    EXPLAIN_KEY,
    FLAGS,
    OWNERS_KEY,
    Duplicates,
    Explain,
    ExtraColumns,
    _Checks,
    _unknown_column,
    _utc_now,
    check_timezone,
)
from ._validation import (
    FailureLog,
    ValidationReport,
    failure_record,
    run_schema,
    streamed_report,
)
from ._values import is_missing

Item = tuple[int, str, bytes]  # (row position, wire user id, identify body bytes)

USER_ID = "external_user_id"
ITEM_FIELDS = ("channel", "address", "opted_in", "verified")
PUSH_COLUMNS = ("push_token", "pushToken")
# convenience columns in wire order: channel -> the columns that carry its address
ADDRESS_COLUMNS = {"email": ("email",), "sms": ("phone",), "push": PUSH_COLUMNS}

_FLAT_TRAITS = r"^traits\..+$"
_EMAIL = re.compile(EMAIL_PATTERN)
_E164 = re.compile(E164_PATTERN)
# a local number may hold digits and punctuation only: letters (vanity numbers, "ext")
# would be translated or dropped by phonenumbers, which is guessing
_PHONE_CHARS = re.compile(r"[\d\s()+\-./]+")
_DUPLICATE_OPTIONS = ("error", "keep_last", "in_order")

# frame-level checks: pandera reports them once per column (row-level) or under the schema
# name (table-level); each is reported once, under the column it concerns
_CHECK_COLUMN = {
    "traits_key_conflict": "traits",
    "channels_duplicate_item": "channels",
    "push_token_alias_conflict": "pushToken",
    **{f"{flag}_without_address": flag for flag in FLAGS},
}


# -- option checks ------------------------------------------------------------------------
def _region(phone_region: str | None) -> str | None:
    if phone_region is None:
        return None
    region = str(phone_region).upper()
    if region not in phonenumbers.SUPPORTED_REGIONS:
        raise ConfigurationError(
            f"phone_region {phone_region!r} is not a region phonenumbers knows; "
            "use an ISO 3166 code such as 'US' or 'GB'"
        )
    return region


def _check_options(extra_columns: str, duplicates: str) -> None:
    if extra_columns not in ("error", "ignore"):
        raise ConfigurationError(
            f"extra_columns must be 'error' or 'ignore', not {extra_columns!r}"
        )
    if duplicates not in _DUPLICATE_OPTIONS:
        raise ConfigurationError(
            f"duplicates must be one of {', '.join(map(repr, _DUPLICATE_OPTIONS))}, "
            f"not {duplicates!r}"
        )


# -- single values ------------------------------------------------------------------------
def local_phone(value: str, region: str) -> str | None:
    """A non-E.164 phone number -> E.164 when it is a valid number read in ``region``."""
    if not _PHONE_CHARS.fullmatch(value):
        return None
    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException:
        return None
    if number.extension or not phonenumbers.is_valid_number(number):
        return None
    text: str = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return text


def _is_token(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _address_ok(channel: str, address: str) -> bool:
    if channel == "email":
        return _EMAIL.fullmatch(address) is not None
    if channel == "sms":
        return _E164.fullmatch(address) is not None
    return _is_token(address)


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim == 1)


def _present(item: dict[Any, Any]) -> dict[Any, Any]:
    """A channel item without its null fields: Arrow structs carry every field, unset ones null."""
    return {k: v for k, v in item.items() if not is_missing(v)}


def _item_problems(item: dict[Any, Any], where: str) -> list[str]:
    """What is wrong with one channel item (contract 2.3), each naming ``channels[i].field``."""
    item = _present(item)
    problems = []
    for key in item:
        if key == "type":
            problems.append(
                f"{where}.type: the field is named 'channel', not 'type': rename to channel"
            )
        elif key not in ITEM_FIELDS:
            problems.append(f"{where}.{key}: unknown field (allowed: {', '.join(ITEM_FIELDS)})")
    channel = item.get("channel")
    if channel is None:
        if "type" not in item:
            problems.append(f"{where}.channel: required (one of email, sms, push)")
    elif not (isinstance(channel, str) and channel in CHANNELS):
        problems.append(f"{where}.channel: {channel!r} is not one of email, sms, push")
        channel = None
    address = item.get("address")
    if address is None:
        problems.append(f"{where}.address: required")
    elif not isinstance(address, str):
        problems.append(f"{where}.address: must be a string, got {type(address).__name__}")
    elif channel is not None and not _address_ok(channel, address):
        rule = {"email": "an email address", "sms": "an E.164 number", "push": "a token"}
        problems.append(f"{where}.address: {address!r} is not {rule[channel]}")
    for flag in ("opted_in", "verified"):
        if flag in item and not _is_flag(item[flag]):
            problems.append(f"{where}.{flag}: must be true or false, got {item[flag]!r}")
    return problems


def channels_problems(value: Any) -> list[str]:
    """Every problem of one ``channels`` cell's items (non-list cells: see channels_type)."""
    if not _is_list(value):
        return []
    problems: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            problems.extend(_item_problems(item, f"channels[{i}]"))
    return problems


def _channels_shape(value: Any) -> str | None:
    if not _is_list(value):
        return f"channels must be a list of channel items, got {type(value).__name__}"
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            return f"channels[{i}] must be an object, got {type(item).__name__}"
    return None


# -- per-row channel items (shared by the duplicate check and the wire) ------------------
def _explicit_items(df: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """The ``channels`` items of each row as given, null fields left out; bad cells skipped."""
    if "channels" not in df.columns:
        return [[] for _ in range(len(df))]
    out: list[list[dict[str, Any]]] = []
    for cell in df["channels"].tolist():
        items = cell if _is_list(cell) else []
        out.append([_plain(_present(i)) for i in items if isinstance(i, dict)])
    return out


def _plain(item: dict[Any, Any]) -> dict[str, Any]:
    # numpy scalars from Arrow become the exact Python types JSON and the API expect
    return {
        str(k): bool(v) if _is_flag(v) else str(v) if isinstance(v, str) else v
        for k, v in item.items()
    }


def _addresses(s: pd.Series, channel: str, region: str | None) -> list[str | None]:
    """Wire addresses of one convenience column; None where null or not a string."""
    values = [v if isinstance(v, str) else None for v in s.tolist()]
    if channel != "sms" or region is None:
        return [None if v is None else str(v) for v in values]
    e164 = _columns.fullmatch(s, E164_PATTERN).to_numpy(dtype=bool)
    return [
        None if v is None else str(v) if e164[i] else local_phone(v, region)
        for i, v in enumerate(values)
    ]


def _flags(df: pd.DataFrame, column: str) -> list[bool | None]:
    if column not in df.columns:
        return [None] * len(df)
    return [None if is_missing(v) else bool(v) for v in df[column].tolist()]


def _convenience_items(df: pd.DataFrame, region: str | None) -> list[list[dict[str, Any]]]:
    """Items from the email/phone/push_token columns, in that order (contract 2.4)."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(len(df))]
    for channel, columns in ADDRESS_COLUMNS.items():
        opted_in = _flags(df, f"{channel}_opted_in")
        verified = _flags(df, f"{channel}_verified")
        for column in columns:
            if column not in df.columns:
                continue
            for i, address in enumerate(_addresses(df[column], channel, region)):
                if address is None:
                    continue
                item: dict[str, Any] = {
                    "channel": channel,
                    "address": address,
                    "opted_in": opted_in[i] is not False,
                }
                if verified[i] is True:
                    item["verified"] = True
                out[i].append(item)
    return out


def _no_duplicate_items(df: pd.DataFrame, region: str | None) -> pd.Series:
    """False where one (channel, address) would appear twice in a row's ``channels``."""
    ok = np.ones(len(df), dtype=bool)
    if "channels" not in df.columns and not _has_both_push_columns(df):
        return pd.Series(ok, index=df.index)  # one item per channel at most
    rows = zip(_explicit_items(df), _convenience_items(df, region), strict=True)
    for i, (explicit, convenience) in enumerate(rows):
        pairs = [
            (item.get("channel"), item.get("address"))
            for item in explicit + convenience
            if isinstance(item.get("channel"), str) and isinstance(item.get("address"), str)
        ]
        ok[i] = len(pairs) == len(set(pairs))
    return pd.Series(ok, index=df.index)


# -- schema --------------------------------------------------------------------------------
def _bools_ok(s: pd.Series) -> pd.Series:
    """bool/boolean dtypes, or object cells holding real booleans; 0/1 and 'true' are not."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return pd.Series(True, index=s.index)
    if s.dtype == object:
        return _columns.elementwise(s, _is_flag)
    return s.isna()


def _channel_in(s: pd.Series) -> pd.Series:
    is_str = s.map(lambda v: isinstance(v, str)) if s.dtype == object else s.notna()
    return s.isin(CHANNELS) | ~is_str.astype(bool)


def _strings(checks: _Checks, prefix: str) -> pa.Check:
    return checks.add(
        f"{prefix}_type",
        _columns.strings_ok,
        lambda c, v: f"{c} must be a string, got {v!r} ({type(v).__name__})",
    )


def _phone_column(checks: _Checks, region: str | None) -> pa.Column:
    def ok(s: pd.Series) -> pd.Series:
        matched = _columns.fullmatch(s, E164_PATTERN)
        if region is None:
            return matched
        for i in np.flatnonzero(~matched.to_numpy(dtype=bool)):
            matched.iloc[int(i)] = local_phone(s.iloc[i], region) is not None
        return matched

    def explain(column: str | None, value: Any) -> str:
        if region is None:
            return (
                f"phone {value!r} is not E.164 (+ and 2-15 digits, e.g. +14155550100); for "
                "local numbers of one country pass phone_region='US' (its ISO code)"
            )
        return (
            f"phone {value!r} is neither E.164 (e.g. +14155550100) nor a valid phone number "
            f"in region {region}: fix it, or give it in international form"
        )

    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            _strings(checks, "phone"),
            checks.add("phone_e164", ok, explain),
        ],
    )


def _push_column(checks: _Checks) -> pa.Column:
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            _strings(checks, "push_token"),
            checks.add(
                "push_token_not_blank",
                _columns.not_blank,
                lambda c, v: f"{c} must not be empty or blank: fill it, or leave the cell null",
            ),
        ],
    )


def _flag_column(checks: _Checks, flag: str) -> pa.Column:
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            checks.add(
                f"{flag}_type",
                _bools_ok,
                lambda c, v: (
                    f"{c} must be true, false or empty, got {v!r} ({type(v).__name__}); "
                    "0/1 and 'true'/'false' strings are not read as booleans: cast the column "
                    "to bool or boolean"
                ),
            )
        ],
    )


def _channels_column(checks: _Checks) -> pa.Column:
    return pa.Column(
        nullable=True,
        required=False,
        checks=[
            checks.add(
                "channels_type",
                lambda s: _columns.elementwise(s, lambda v: _channels_shape(v) is None),
                lambda c, v: (
                    f"{_channels_shape(v)}; each item is an object with channel, "
                    "address and optionally opted_in, verified"
                ),
            ),
            checks.add(
                "channels_item",
                lambda s: _columns.elementwise(s, lambda v: not channels_problems(v)),
                lambda c, v: "; ".join(channels_problems(v)),
            ),
        ],
    )


def _frame_check(
    checks: _Checks, name: str, fn: Callable[[pd.DataFrame], Any], explain: Explain
) -> pa.Check:
    """A frame-level check: a bool (table-level) or a bool per row."""
    return checks.add(name, cast("Callable[[pd.Series], pd.Series]", fn), explain)


def _has_both_push_columns(df: pd.DataFrame) -> bool:
    return set(PUSH_COLUMNS) <= set(df.columns)


def _table_checks(checks: _Checks, region: str | None) -> list[pa.Check]:
    alias = _frame_check(
        checks,
        "push_token_alias_conflict",
        lambda df: not _has_both_push_columns(df),
        lambda c, v: "both push_token and pushToken columns are given: keep one of them",
    )
    duplicate_items = _frame_check(
        checks,
        "channels_duplicate_item",
        lambda df: _no_duplicate_items(df, region),
        lambda c, v: (
            "the same (channel, address) would be sent twice in this row's channels (an item "
            "of the channels column repeats another, or one built from email/phone/push_token): "
            "keep one of them"
        ),
    )
    return [*checks.conflicts("traits"), alias, duplicate_items, *_orphan_flags(checks)]


def _orphan_flag_check(checks: _Checks, flag: str, columns: tuple[str, ...]) -> pa.Check:
    def ok(df: pd.DataFrame) -> bool:
        return flag not in df.columns or any(c in df.columns for c in columns)

    def explain(column: str | None, value: Any) -> str:
        return (
            f"column {flag} is given but there is no {' or '.join(columns)} column with the "
            f"address it applies to: add that column, or drop {flag}"
        )

    return _frame_check(checks, f"{flag}_without_address", ok, explain)


def _orphan_flags(checks: _Checks) -> list[pa.Check]:
    """A flag column without its address column could never be sent: say so, not drop it."""
    return [
        _orphan_flag_check(checks, f"{channel}_{suffix}", columns)
        for channel, columns in ADDRESS_COLUMNS.items()
        for suffix in ("opted_in", "verified")
    ]


def identities_schema(
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
) -> pa.DataFrameSchema:
    """The pandera schema of a raw identities table (see PRODUCT.md's identities table).

    ``phone_region`` (e.g. ``"US"``) also accepts local phone numbers that are valid in that
    region; ``extra_columns="ignore"`` lets unknown columns through (they are never sent).
    """
    _check_options(extra_columns, "error")
    check_timezone(naive_timezone)
    region = _region(phone_region)
    checks = _Checks(_utc_now(None), naive_timezone)
    email_checks = [
        _strings(checks, "email"),
        checks.add(
            "email_pattern",
            lambda s: _columns.fullmatch(s, EMAIL_PATTERN),
            lambda c, v: f"email {v!r} is not a valid email address (name@domain.tld)",
        ),
    ]
    preferred_checks = [
        _strings(checks, "preferred_channel"),
        checks.add(
            "preferred_channel_value",
            _channel_in,
            lambda c, v: f"preferred_channel {v!r} must be email, sms or push (or empty)",
        ),
    ]
    columns: dict[str, pa.Column] = {
        USER_ID: checks.user_id(),
        "traits": checks.object_column("traits"),
        _FLAT_TRAITS: checks.flat_column("trait"),
        "preferred_channel": pa.Column(nullable=True, required=False, checks=preferred_checks),
        "email": pa.Column(nullable=True, required=False, checks=email_checks),
        "phone": _phone_column(checks, region),
        **{column: _push_column(checks) for column in PUSH_COLUMNS},
        **{flag: _flag_column(checks, flag) for flag in FLAGS},
        "channels": _channels_column(checks),
    }
    checks.explain["column_in_schema"] = _unknown_column("traits")
    return pa.DataFrameSchema(
        columns,
        strict=extra_columns == "error",
        checks=_table_checks(checks, region),
        name="identities",
        metadata={EXPLAIN_KEY: checks.explain, OWNERS_KEY: {**checks.owners, **_CHECK_COLUMN}},
    )


# -- wire ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class IdentityOptions:
    """How identities become identify bodies, and how duplicate users are handled."""

    naive_timezone: str | None = None
    phone_region: str | None = None
    duplicates: Duplicates = "error"


def build_identities(work: pd.DataFrame, options: IdentityOptions) -> list[dict[str, Any]]:
    """Identify bodies for validated rows of ``work`` (a RangeIndex frame), in row order."""
    n = len(work)
    if n == 0:
        return []
    tz = options.naive_timezone
    region = _region(options.phone_region)
    user_ids = _columns.ids_to_wire(work[USER_ID])
    traits = _columns.merged_objects(work, "traits", tz)
    preferred = work["preferred_channel"].tolist() if "preferred_channel" in work else [None] * n
    explicit = _explicit_items(work)
    convenience = _convenience_items(work, region)
    bodies = []
    for i in range(n):
        body: dict[str, Any] = {USER_ID: user_ids[i]}
        if traits[i]:
            body["traits"] = traits[i]
        if not is_missing(preferred[i]):
            body["preferred_channel"] = str(preferred[i])
        channels = explicit[i] + convenience[i]
        if channels:
            body["channels"] = channels
        bodies.append(body)
    return bodies


def canonical_body(body: dict[str, Any]) -> bytes:
    """The bytes sent for one identify body: canonical JSON (sorted keys, compact, UTF-8)."""
    return _ids.canonical(body)


# -- duplicate users -----------------------------------------------------------------------
def _replayable(data: Any) -> Any:
    """One-shot iterators (generators of DataFrames) are kept so they can be read twice."""
    return list(data) if isinstance(data, Iterator) else data


def _id_frames(data: Any, rows: int) -> Iterator[pd.DataFrame]:
    """The input's slices, with only the id column where that saves reading the rest."""
    if isinstance(data, pd.DataFrame) and USER_ID in data.columns:
        yield from iter_frames(data[[USER_ID]], rows)
    elif isinstance(data, pyarrow.Table) and USER_ID in data.column_names:
        yield from iter_frames(data.select([USER_ID]), rows)
    elif isinstance(data, str | os.PathLike) and Path(data).suffix.lower() in (".parquet", ".pq"):
        yield from _parquet_ids(Path(data), rows)
    else:
        yield from iter_frames(data, rows)


def _parquet_ids(path: Path, rows: int) -> Iterator[pd.DataFrame]:
    if not path.is_file():
        yield from iter_frames(path, rows)  # raises the readers' InputError
        return
    with pq.ParquetFile(path) as file:
        if USER_ID not in file.schema_arrow.names:
            return
        offset = 0
        for batch in file.iter_batches(batch_size=rows, columns=[USER_ID]):
            yield _arrow_to_pandas(batch, offset)
            offset += batch.num_rows


def duplicate_users(data: Any, slice_rows: int = DEFAULT_SLICE_ROWS) -> dict[str, list[int]]:
    """Wire user id -> row positions (0-based, ascending), for users with two rows or more.

    Reads only ``external_user_id``; rows whose id is invalid are left out (validation
    reports them). ``data`` is read once more later, so it must not be a one-shot iterator.
    """
    ids: list[pyarrow.Array] = []
    positions: list[np.ndarray] = []
    offset = 0
    for df in _id_frames(data, slice_rows):
        if USER_ID in df.columns:
            s = df[USER_ID]
            ok = (_columns.id_type_ok(s) & s.notna() & _columns.not_blank(s)).to_numpy(bool)
            ids.append(pyarrow.array(_columns.ids_to_wire(s[ok]), type=pyarrow.string()))
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


# -- the stream ----------------------------------------------------------------------------
class IdentityStream:
    """Validates and converts slices of one identities input; remembers what spans slices."""

    def __init__(
        self,
        schema: pa.DataFrameSchema,
        options: IdentityOptions,
        duplicates_map: dict[str, list[int]],
    ) -> None:
        _check_options("error", options.duplicates)
        self.schema = schema
        self.options = options
        self.book = RowBook()
        self.log = FailureLog()
        self.failures = self.log.records
        self.ledger: ScopedLedger | None = None
        self.source: Any = None  # the input, set by identity_stream for frames()
        self.slice_rows = DEFAULT_SLICE_ROWS
        self.pending: dict[int, tuple[str, str]] = {}  # position -> ledger entry once sent
        self._users = {u: sorted(ps) for u, ps in duplicates_map.items()}
        self._user_at = {p: u for u, ps in self._users.items() for p in ps}
        self._dup_positions = np.array(sorted(self._user_at), dtype=np.int64)

    def process(self, df: pd.DataFrame) -> list[Item]:
        """Handle one slice; return (position, user id, body bytes) of the rows to send."""
        items = [(p, u, canonical_body(b)) for p, u, b in self.bodies(df)]
        return items if self.ledger is None else self._against_ledger(items)

    def _against_ledger(self, items: list[Item]) -> list[Item]:
        """Skip users whose body is unchanged since its last acknowledgement.

        A user with several rows sent in order is always sent: skipping one of them
        would reorder what the API merges.
        """
        assert self.ledger is not None
        known = self.ledger.known("identities", [u for _, u, _ in items])
        out: list[Item] = []
        for pos, user, body in items:
            dig = ledger_digest(body)
            in_order = self.options.duplicates == "in_order" and user in self._users
            if known.get(user) == dig and not in_order:
                self.book.set([pos], SKIPPED)
                self.book.add_error(pos, "unchanged since its last acknowledgement (ledger)")
                continue
            self.pending[pos] = (user, dig)
            out.append((pos, user, body))
        # until the new body is acknowledged, the API's state is unknown for these users
        self.ledger.forget("identities", [u for _, u, _ in out if u in known])
        return out

    def frames(self) -> Iterator[pd.DataFrame]:
        """The input's slices (read again after the duplicate pre-pass)."""
        return iter_frames(self.source, self.slice_rows)

    def run(self, frames: Iterable[pd.DataFrame]) -> Iterator[list[Item]]:
        for df in frames:
            yield self.process(df)

    def bodies(self, df: pd.DataFrame) -> list[tuple[int, str, dict[str, Any]]]:
        """Handle one slice; return (position, user id, body dict) of the rows to send."""
        n = len(df)
        start = self.book.extend(df.index)
        result = run_schema(df, self.schema, start, df.index)
        self.log.add(result.records, self.book, start, n)
        self.book.set(start + np.flatnonzero(result.invalid), INVALID)
        valid = np.flatnonzero(~result.invalid)
        work = df.iloc[valid].set_axis(pd.RangeIndex(len(valid)), axis=0)
        bodies = build_identities(work, self.options)
        self._mark_duplicates(start, start + n)
        status = self.book.status
        return [
            (start + i, body[USER_ID], body)
            for i, body in zip(valid.tolist(), bodies, strict=True)
            if status[start + i] == PENDING
        ]

    def _mark_duplicates(self, start: int, stop: int) -> None:
        """States of this slice's rows of duplicate users; notes once a user's rows are all seen."""
        lo, hi = np.searchsorted(self._dup_positions, [start, stop])
        mode = self.options.duplicates
        for pos in self._dup_positions[lo:hi].tolist():
            user = self._user_at[pos]
            last = self._users[user][-1]
            if mode == "error":
                self.book.set([pos], INVALID)
            elif mode == "keep_last" and pos != last and self.book.status[pos] != INVALID:
                self.book.set([pos], SKIPPED)
            if pos == last:
                self._note_duplicates(user)

    def _fail(self, pos: int, user: str, check: str, message: str) -> None:
        record = failure_record(self.book.labels[pos], pos, USER_ID, check, user, message)
        self.failures.append(record)
        self.book.add_error(pos, f"[{check}] {message}")

    def _note_duplicates(self, user: str) -> None:
        positions = self._users[user]
        labels = self.book.labels
        if self.options.duplicates == "keep_last":
            last = positions[-1]
            last_invalid = self.book.status[last] == INVALID
            for pos in positions[:-1]:
                if self.book.status[pos] != SKIPPED:
                    continue
                if not last_invalid:
                    self.book.add_error(pos, f"superseded by row {labels[last]!r}")
                    continue
                # sending an older row instead would present stale data as current
                message = (
                    f"the last row for external_user_id {user!r} (row {labels[last]!r}) is "
                    "invalid, so nothing is sent for this user: fix that row"
                )
                self.book.set([pos], INVALID)
                self._fail(pos, user, "external_user_id_last_row_invalid", message)
        elif self.options.duplicates == "error":
            for pos in positions:
                others = ", ".join(repr(labels[p]) for p in positions if p != pos)
                message = (
                    f"external_user_id {user!r} is also on row(s) {others}: one row per user, "
                    "or pass duplicates='keep_last' (the last row wins) or duplicates='in_order' "
                    "(each row is sent, one after another in row order)"
                )
                self._fail(pos, user, "external_user_id_duplicate", message)


def identity_stream(
    data: Any,
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    duplicates: Duplicates = "error",
    slice_rows: int = DEFAULT_SLICE_ROWS,
) -> IdentityStream:
    """The stream for ``data``, its duplicate users already found by a pass over the ids.

    The input is read twice (the id pre-pass, then ``stream.frames()``), so a one-shot
    iterator of DataFrames is kept in a list here.
    """
    data = _replayable(data)
    _check_options(extra_columns, duplicates)
    schema = identities_schema(
        naive_timezone=naive_timezone, extra_columns=extra_columns, phone_region=phone_region
    )
    options = IdentityOptions(naive_timezone, _region(phone_region), duplicates)
    stream = IdentityStream(schema, options, duplicate_users(data, slice_rows))
    stream.source, stream.slice_rows = data, slice_rows
    return stream


def validate_identities(
    data: Any,
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    duplicates: Duplicates = "error",
    slice_rows: int = DEFAULT_SLICE_ROWS,
) -> ValidationReport:
    """Check every row of an identities table against the contract; nothing is sent.

    Two rows for one user: ``duplicates="error"`` makes them all invalid, ``"keep_last"``
    keeps the last (earlier rows are valid but skipped), ``"in_order"`` keeps them all.
    """
    stream = identity_stream(
        data,
        naive_timezone=naive_timezone,
        extra_columns=extra_columns,
        phone_region=phone_region,
        duplicates=duplicates,
        slice_rows=slice_rows,
    )
    # the bodies' bytes are not needed for a report
    return streamed_report("identities", stream, stream.frames(), stream.bodies)


def identities_to_wire(
    data: Any,
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    duplicates: Duplicates = "error",
    slice_rows: int = DEFAULT_SLICE_ROWS,
) -> list[dict[str, Any]]:
    """The exact identify bodies of the rows that would be sent, in row order."""
    stream = identity_stream(
        data,
        naive_timezone=naive_timezone,
        extra_columns=extra_columns,
        phone_region=phone_region,
        duplicates=duplicates,
        slice_rows=slice_rows,
    )
    return [body for df in stream.frames() for _, _, body in stream.bodies(df)]
