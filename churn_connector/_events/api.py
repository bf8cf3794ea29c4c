"""Public entry points of the events path: validate_events and events_to_wire."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import orjson
import pyarrow as pa

from .._core import (
    DataSource,
    Decimals,
    EpochUnit,
    ExtraColumns,
    IdFormat,
    Partitioning,
)
from .._options import EventOptions
from .._read import DEFAULT_SLICE_ROWS, Format, NameStyle, TextFormat
from .._slices import batches, report
from .._validate import TrackingPlan, ValidationReport
from .stream import EventStream


def validate_events(
    data: DataSource,
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    namespace: str | None = None,
    id_columns: Sequence[str] | None = None,
    slice_rows: int = DEFAULT_SLICE_ROWS,
    rename: Mapping[str, str] | None = None,
    dtypes: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
    decimals: Decimals = "error",
    epoch_unit: EpochUnit | None = None,
    id_format: IdFormat = "v2",
    delimiter: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    escape: str | None = None,
    null: str | Sequence[str] | None = None,
    quote: str | None = '"',
    format: Format | None = None,
    rename_style: NameStyle | None = None,
    version: int | None = None,
    as_of: Any = None,
    snapshot_id: int | None = None,
    partitioning: Partitioning | None = "hive",
    plan: TrackingPlan | str | PathLike[str] | None = None,
    event_type_style: NameStyle | None = None,
    options: EventOptions | None = None,
) -> ValidationReport:
    """Check every row of an events table against the contract; nothing is sent.

    ``now`` anchors the time window (default: the current UTC time); naive timestamps are
    invalid unless ``naive_timezone`` names their zone, epoch numbers unless ``epoch_unit``
    says what they count. ``rename`` maps source columns to ours (``{"EVENT_TYPE":
    "event_type"}``), ``rename_style`` the other columns (``"lower"``: ``EVENT_TYPE`` ->
    ``event_type``; ``"snake"``: ``Event Type``, ``eventType`` -> ``event_type``; the key
    after ``properties.`` stays as written); ``event_type_style`` does the same to the
    event types themselves (``Order Completed`` -> ``order_completed``: the report notes
    each mapping); ``dtypes`` types CSV/TSV cells (``{"properties.amount": "float64"}``);
    ``encoding`` is that of CSV/TSV files; ``decimals`` says what Decimal values become
    (``"error"``, ``"float"`` when exact, ``"str"``). Exact duplicate rows (same message id)
    are valid but counted: they would be sent once. ``id_format="v1"`` makes the ids and
    events of 0.1 (see "Message ids"), for a backfill begun with it. Text exports as
    warehouses write them:
    ``delimiter``, ``quote`` (None: no quoting), ``escape`` (``"\\"``: Spark), ``null``
    (markers of null cells, e.g. ``"\\N"``: Snowflake, Redshift), ``header=False`` with
    ``columns=[...]``, and ``format`` for parts whose name says none (``"csv"``: Redshift's
    ``0000_part_00``); see :class:`TextFormat`. A Delta or Iceberg table is read as its
    table at its current version, or at the one ``version`` (Delta), ``snapshot_id``
    (Iceberg) or ``as_of`` (either: a timezone-aware instant) names; ``partitioning=None``
    leaves the ``key=value`` folders of part files unread (by default they restore their
    columns, as text). ``options``: all of these as one :class:`EventOptions`, passed
    whole (the keywords then stay unset).
    """
    # each keyword to its field, checked as one value (or options=, passed whole)
    options = EventOptions.chosen(
        options,
        EventOptions(
            now=now,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            namespace=namespace,
            id_columns=id_columns,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            epoch_unit=epoch_unit,
            id_format=id_format,
            rename_style=rename_style,
            version=version,
            as_of=as_of,
            snapshot_id=snapshot_id,
            partitioning=partitioning,
            plan=plan,
            event_type_style=event_type_style,
            text=TextFormat(
                delimiter=delimiter,
                header=header,
                columns=columns,
                escape=escape,
                null=null,
                quote=quote,
                format=format,
            ),
        ),
    )
    return report(EventStream(data, options))


def events_to_wire(
    data: DataSource,
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    namespace: str | None = None,
    id_columns: Sequence[str] | None = None,
    slice_rows: int = DEFAULT_SLICE_ROWS,
    rename: Mapping[str, str] | None = None,
    dtypes: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
    decimals: Decimals = "error",
    epoch_unit: EpochUnit | None = None,
    id_format: IdFormat = "v2",
    delimiter: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    escape: str | None = None,
    null: str | Sequence[str] | None = None,
    quote: str | None = '"',
    format: Format | None = None,
    rename_style: NameStyle | None = None,
    version: int | None = None,
    as_of: Any = None,
    snapshot_id: int | None = None,
    partitioning: Partitioning | None = "hive",
    plan: TrackingPlan | str | PathLike[str] | None = None,
    event_type_style: NameStyle | None = None,
    options: EventOptions | None = None,
) -> list[dict[str, Any]]:
    """The exact wire event objects of the valid rows (duplicates once), in row order."""
    options = EventOptions.chosen(
        options,
        EventOptions(
            now=now,
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            namespace=namespace,
            id_columns=id_columns,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            epoch_unit=epoch_unit,
            id_format=id_format,
            rename_style=rename_style,
            version=version,
            as_of=as_of,
            snapshot_id=snapshot_id,
            partitioning=partitioning,
            plan=plan,
            event_type_style=event_type_style,
            text=TextFormat(
                delimiter=delimiter,
                header=header,
                columns=columns,
                escape=escape,
                null=null,
                quote=quote,
                format=format,
            ),
        ),
    )
    # the bytes are what would be sent; reading them back gives exactly those objects
    stream = EventStream(data, options)
    return [
        orjson.loads(body)
        for batch in batches(stream)
        for body in (
            batch.bodies.to_pylist() if isinstance(batch.bodies, pa.Array) else batch.bodies
        )
    ]
