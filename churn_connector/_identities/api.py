"""Public entry points of the identities path: validate_identities and identities_to_wire."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from .._core import (
    BlankConsent,
    DataSource,
    Decimals,
    Duplicates,
    ExtraColumns,
    Partitioning,
)
from .._options import IdentityOptions
from .._read import DEFAULT_SLICE_ROWS, Format, NameStyle, TextFormat
from .._slices import report
from .._validate import TrackingPlan, ValidationReport
from .stream import IdentityStream


def validate_identities(
    data: DataSource,
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    duplicates: Duplicates = "error",
    slice_rows: int = DEFAULT_SLICE_ROWS,
    rename: Mapping[str, str] | None = None,
    dtypes: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
    decimals: Decimals = "error",
    delimiter: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    escape: str | None = None,
    null: str | Sequence[str] | None = None,
    quote: str | None = '"',
    format: Format | None = None,
    blank_consent: BlankConsent = "error",
    require_consent: bool = False,
    rename_style: NameStyle | None = None,
    version: int | None = None,
    as_of: Any = None,
    snapshot_id: int | None = None,
    partitioning: Partitioning | None = "hive",
    plan: TrackingPlan | str | PathLike[str] | None = None,
    options: IdentityOptions | None = None,
) -> ValidationReport:
    """Check every row of an identities table against the contract; nothing is sent.

    Two rows for one user: ``duplicates="error"`` makes them all invalid, ``"keep_last"``
    keeps the last (earlier rows are valid but skipped), ``"in_order"`` keeps them all.
    ``rename``, ``rename_style``, ``dtypes``, ``encoding``, ``decimals``, the text
    options (``delimiter``, ``header``, ``columns``, ``escape``, ``null``, ``quote``,
    ``format``) and the tables' (``version``, ``as_of``, ``snapshot_id``,
    ``partitioning``) work as for ``validate_events``.

    Consent: a blank ``<channel>_opted_in`` cell beside an address is not consent. By
    default (``blank_consent="error"``) the row is invalid; ``"omit_channel"`` leaves that
    channel out of the request (the API keeps what it holds), ``"opted_in"`` sends it opted
    in. An address without a consent column is opted in (the contract's default) and the
    report's ``notes`` say how many; ``require_consent=True`` makes such rows, and
    ``channels`` items without ``opted_in``, invalid. ``options``: all of these as one
    :class:`IdentityOptions`, passed whole (the keywords then stay unset).
    """
    # each keyword to its field, checked as one value (or options=, passed whole)
    options = IdentityOptions.chosen(
        options,
        IdentityOptions(
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            phone_region=phone_region,
            duplicates=duplicates,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            blank_consent=blank_consent,
            require_consent=require_consent,
            rename_style=rename_style,
            version=version,
            as_of=as_of,
            snapshot_id=snapshot_id,
            partitioning=partitioning,
            plan=plan,
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
    return report(IdentityStream(data, options))


def identities_to_wire(
    data: DataSource,
    *,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    phone_region: str | None = None,
    duplicates: Duplicates = "error",
    slice_rows: int = DEFAULT_SLICE_ROWS,
    rename: Mapping[str, str] | None = None,
    dtypes: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
    decimals: Decimals = "error",
    delimiter: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    escape: str | None = None,
    null: str | Sequence[str] | None = None,
    quote: str | None = '"',
    format: Format | None = None,
    blank_consent: BlankConsent = "error",
    require_consent: bool = False,
    rename_style: NameStyle | None = None,
    version: int | None = None,
    as_of: Any = None,
    snapshot_id: int | None = None,
    partitioning: Partitioning | None = "hive",
    plan: TrackingPlan | str | PathLike[str] | None = None,
    options: IdentityOptions | None = None,
) -> list[dict[str, Any]]:
    """The exact identify bodies of the rows that would be sent, in row order."""
    options = IdentityOptions.chosen(
        options,
        IdentityOptions(
            naive_timezone=naive_timezone,
            extra_columns=extra_columns,
            phone_region=phone_region,
            duplicates=duplicates,
            slice_rows=slice_rows,
            rename=rename,
            dtypes=dtypes,
            encoding=encoding,
            decimals=decimals,
            blank_consent=blank_consent,
            require_consent=require_consent,
            rename_style=rename_style,
            version=version,
            as_of=as_of,
            snapshot_id=snapshot_id,
            partitioning=partitioning,
            plan=plan,
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
    stream = IdentityStream(data, options)
    return [body for df in stream.slices() for body in stream.objects(df)]
