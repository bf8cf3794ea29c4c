"""The keywords of ``Client.send_events`` and ``Client.identify``: as TypedDicts, for the
one-call forms and the tasks that pass them on (``**options: Unpack[SendEventsOptions]``,
checked by mypy), and as declarations (``send_keywords``), for the integrations that take
them by name (Airflow's ``send_options``, Spark's options, ``send_partition``, ``resend``).
``tests/core/test_options.py`` keeps both in step with the methods' signatures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from ._core import (
    BlankConsent,
    Decimals,
    Duplicates,
    EpochUnit,
    ExtraColumns,
    IdFormat,
    Kind,
    Option,
    Partitioning,
    options_of,
)
from ._delivery import SendOptions
from ._ledger import LedgerArg
from ._options import EventOptions, IdentityOptions
from ._read import NameStyle, TextOptions
from ._sync import SyncOptions
from ._validate import ThresholdArg, TrackingPlan

__all__ = ["IdentifyOptions", "SendEventsOptions", "send_keywords"]


class SendEventsOptions(TextOptions, total=False):
    """The keywords of :meth:`Client.send_events` (for the one-call form and tasks)."""

    dry_run: bool
    now: Any
    naive_timezone: str | None
    extra_columns: ExtraColumns
    namespace: str | None
    id_columns: Sequence[str] | None
    batch_size: int | None
    max_concurrency: int | None
    progress: bool | None
    slice_rows: int
    ledger: LedgerArg
    new_ids: bool
    history: str | None
    alert_webhook: str | None
    alert_invalid: ThresholdArg
    rename: Mapping[str, str] | None
    dtypes: Mapping[str, str] | None
    encoding: str
    decimals: Decimals
    epoch_unit: EpochUnit | None
    rename_style: NameStyle | None
    version: int | None
    as_of: Any
    snapshot_id: int | None
    partitioning: Partitioning | None
    plan: TrackingPlan | str | PathLike[str] | None
    event_type_style: NameStyle | None
    id_format: IdFormat
    cursor: str | None
    lookback: Any
    incremental: bool
    sync_name: str | None
    full_refresh: bool
    since: Any
    until: Any
    options: EventOptions | None


class IdentifyOptions(TextOptions, total=False):
    """The keywords of :meth:`Client.identify` (for the one-call form and tasks)."""

    dry_run: bool
    naive_timezone: str | None
    extra_columns: ExtraColumns
    phone_region: str | None
    duplicates: Duplicates
    max_concurrency: int | None
    progress: bool | None
    slice_rows: int
    ledger: LedgerArg
    history: str | None
    alert_webhook: str | None
    alert_invalid: ThresholdArg
    rename: Mapping[str, str] | None
    dtypes: Mapping[str, str] | None
    encoding: str
    decimals: Decimals
    blank_consent: BlankConsent
    require_consent: bool
    rename_style: NameStyle | None
    version: int | None
    as_of: Any
    snapshot_id: int | None
    partitioning: Partitioning | None
    plan: TrackingPlan | str | PathLike[str] | None
    cursor: str | None
    lookback: Any
    incremental: bool
    sync_name: str | None
    full_refresh: bool
    since: Any
    until: Any
    options: IdentityOptions | None


def send_keywords(kind: Kind) -> list[Option]:
    """The declared keywords of :meth:`Client.send_events` (``"events"``) or
    :meth:`Client.identify` (``"identities"``): the table's, then the send's, then the
    sync's. With
    ``options``, these are what Airflow's ``send_options``, Spark's options and
    ``send_partition`` take by name."""
    table = EventOptions if kind == "events" else IdentityOptions
    send = [o for o in options_of(SendOptions) if kind in o.declared.kinds]
    return [*table.keywords(), *send, *options_of(SyncOptions)]
