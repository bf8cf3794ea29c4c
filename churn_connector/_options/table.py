"""TableOptions: what every table (events or identities) is read and validated with, and the
checks every option value shares (``one_of``, ``utc_now``, ``pairs``)."""

from __future__ import annotations

import codecs
import zoneinfo
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Self, get_args

import pandas as pd

from .._core import (
    ConfigurationError,
    Decimals,
    ExtraColumns,
    Option,
    Partitioning,
    alternatives,
    declare,
    named,
    options_of,
    registered,
)
from .._json import ValueRules
from .._read import (
    DEFAULT_SLICE_ROWS,
    DEFAULT_TEXT,
    DTYPES,
    NAME_STYLES,
    At,
    NameStyle,
    ReadSpec,
    TextFormat,
)
from .._validate import TrackingPlan, as_plan


class Pairs(Mapping[str, str]):
    """A ``{source: target}`` mapping that cannot change (options are frozen values)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


def pairs(name: str, mapping: Mapping[str, str] | None) -> Pairs | None:
    """A ``{source: target}`` mapping, checked, as frozen options hold it."""
    if mapping is None:
        return None
    if not isinstance(mapping, Mapping):
        raise ConfigurationError(
            f"{name} must be a mapping like {{'SRC': 'dest'}}, not {mapping!r}"
        )
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            raise ConfigurationError(f"{name}: {key!r}: {value!r} must map a name to a name")
    return Pairs(mapping.items())


def pair(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--rename``, ``--dtype``) as a pair (a ValueError if not: the
    command line says its message)."""
    source, sep, target = text.partition("=")
    if not sep or not source or not target:
        raise ValueError(f"expected NAME=VALUE, got {text!r}")
    return source, target


def one_of(name: str, value: Any, allowed: Iterable[Any]) -> None:
    """Refuse ``value`` unless it is one of ``allowed``, naming them."""
    choices = tuple(allowed)
    if value not in choices:
        raise ConfigurationError(
            f"{named(name)} must be one of {', '.join(map(repr, choices))}, not {value!r}"
        )


def check_timezone(naive_timezone: str | None) -> None:
    """Refuse an unknown zone name up front (it would otherwise fail every row)."""
    if naive_timezone is None:
        return
    try:
        zoneinfo.ZoneInfo(naive_timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(
            f"{named('naive_timezone')} {naive_timezone!r} is not a known IANA zone "
            "(e.g. 'Europe/Paris')"
        ) from None


def utc_now(now: Any = None, name: str = "now") -> pd.Timestamp:
    """``now`` (default: the current time) as a UTC Timestamp; a naive value is refused
    (``name``: the option, as messages call it)."""
    try:
        ts = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"{named(name)} must be a timestamp, got {now!r} ({exc})"
        ) from None
    if pd.isna(ts):  # "NaT": pandas' null, not an instant
        raise ConfigurationError(f"{named(name)} must be a timestamp, got {now!r}")
    if ts.tzinfo is None:
        raise ConfigurationError(
            f"{named(name)} must be timezone-aware (it is compared with UTC instants)"
        )
    return ts.tz_convert("UTC")


def _whole(name: str, value: Any) -> None:
    """An integer option (a version, a snapshot id) is an ``int``, never a bool or a float."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigurationError(f"{named(name)} must be an integer, not {value!r}")


@registered
@dataclass(frozen=True, kw_only=True)
class TableOptions:
    """What every table (events or identities) is read and validated with."""

    naive_timezone: str | None = declare(
        None,
        doc="the IANA zone of timestamps written without an offset; without it they are "
        "invalid (`occurred_at_naive`)",
        help="zone of timestamps without an offset",
        metavar="TZ",
    )
    extra_columns: ExtraColumns = declare(
        "error",
        doc='`"ignore"`: unknown columns are left out instead of reported',
        help="unknown columns: report them (default) or ignore them",
    )
    rename: Mapping[str, str] | None = declare(  # source column -> our column
        None,
        doc="read source column `SRC` as our `DEST`",
        help="read source column SRC as DEST (repeatable), e.g. --rename EVENT_TYPE=event_type",
        metavar="SRC=DEST",
        parse=pair,
        repeat=True,
    )
    rename_style: NameStyle | None = declare(  # the other columns' names (``_read.names``)
        None,
        doc='name the other columns: `"lower"` (`EVENT_TYPE` -> `event_type`) or `"snake"` '
        "(`Event Type`, `eventType` -> `event_type`); the key after `properties.`/`context.`/"
        "`traits.` is kept ([Column names](../guides/warehouse.md#column-names))",
        help="name the other columns in this style: lower (EVENT_TYPE -> event_type) or snake "
        "(Event Type, eventType -> event_type); the key after properties./traits. is kept",
    )
    dtypes: Mapping[str, str] | None = declare(  # CSV/TSV column -> one of _read.text.DTYPES
        None,
        doc="type CSV/TSV cells: `int64`, `float64`, `bool`, `json`, `str`; without it CSV "
        "cells stay text",
        help="CSV/TSV: read column COL as TYPE (int64, float64, bool, json, str); without it "
        "CSV cells stay text (repeatable)",
        flag="--dtype",
        metavar="COL=TYPE",
        parse=pair,
        repeat=True,
        spark=False,  # a Spark column carries its type
    )
    encoding: str = declare(  # of CSV/TSV files
        "utf-8",
        doc="the text encoding of CSV/TSV files",
        help="CSV/TSV text encoding (default utf-8)",
        spark=False,
    )
    decimals: Decimals = declare(
        "error",
        doc='what `DECIMAL` values become: refused, `"float"` when exact, `"str"` '
        "([Decimals](tables.md#decimals))",
        help="DECIMAL/NUMERIC values: refuse them (default), send floats when exact, or send "
        "their digits as text",
    )
    slice_rows: int = declare(
        DEFAULT_SLICE_ROWS,
        doc="rows read and validated at a time (memory against overhead)",
        help="read and validate N rows at a time",
        metavar="N",
    )
    version: int | None = declare(  # a Delta table's version (``_read.delta``)
        None,
        doc="read a Delta table at this version; the receipt and the rows file record the "
        "version read ([Delta tables](../guides/warehouse.md#delta-tables))",
        help="Delta table: read its version N (default: the current one)",
        metavar="N",
        spark=False,  # a Spark frame is read as Spark read it
        shown_default="the current one",
    )
    as_of: Any = declare(  # a UTC pd.Timestamp: the table as it was then
        None,
        doc="read a Delta or Iceberg table as it was at this instant (timezone-aware, in the "
        "past): the last version or snapshot committed at or before it",
        help="Delta/Iceberg table: read it as it was at TIME (ISO 8601 with an offset, e.g. "
        "2026-11-20T00:00:00Z)",
        metavar="TIME",
        spark=False,
    )
    snapshot_id: int | None = declare(  # an Iceberg table's snapshot (``_read.iceberg``)
        None,
        doc="read an Iceberg table at this snapshot; the receipt and the rows file record "
        "the snapshot read ([Iceberg tables](../guides/warehouse.md#iceberg-tables))",
        help="Iceberg table: read its snapshot ID (default: the current one)",
        metavar="ID",
        spark=False,
        shown_default="the current one",
    )
    partitioning: Partitioning | None = declare(  # folders of part files (``_read.hive``)
        "hive",
        doc='`"hive"`: the `key=value` folders of a folder or glob of part files restore '
        "their columns, as text (type them with `dtypes=`); `None` (`--partitioning none`): "
        "the files' own columns only ([Hive partitions](../guides/warehouse.md#hive-partitions))",
        help="hive (default): key=value folders restore their columns, as text; none: read "
        "the files' own columns only",
        spark=False,
    )
    plan: TrackingPlan | str | PathLike[str] | None = declare(  # loaded when given
        None,
        doc="a [tracking plan](../guides/tracking-plan.md) (a `cc.TrackingPlan`, or the path "
        "of its JSON or YAML file): rows that break it are invalid, by named checks "
        "(`plan.<event type>.<property>.<keyword>`)",
        help="check the rows against this tracking plan (JSON or YAML): rows that break it "
        "are invalid and never sent",
        metavar="FILE",
    )
    # the layout of CSV/TSV files, the format of unnamed ones: its fields are the keywords
    text: TextFormat = field(default=DEFAULT_TEXT)

    def __post_init__(self) -> None:
        check_timezone(self.naive_timezone)
        if self.rename_style is not None:
            one_of("rename_style", self.rename_style, NAME_STYLES)
        one_of("extra_columns", self.extra_columns, get_args(ExtraColumns))
        one_of("decimals", self.decimals, get_args(Decimals))
        rename = pairs("rename", self.rename)
        object.__setattr__(self, "rename", rename)
        targets = list((rename or {}).values())
        if len(set(targets)) != len(targets):
            raise ConfigurationError(f"rename maps two columns to one name: {dict(rename or {})}")
        dtypes = pairs("dtypes", self.dtypes)
        object.__setattr__(self, "dtypes", dtypes)
        for column, dtype in (dtypes or {}).items():
            if dtype not in DTYPES:
                raise ConfigurationError(
                    f"dtypes: {column!r} has unknown type {dtype!r}; use one of "
                    f"{', '.join(sorted(set(DTYPES)))}"
                )
        try:
            codecs.lookup(self.encoding)
        except (LookupError, TypeError):
            raise ConfigurationError(f"unknown encoding {self.encoding!r}") from None
        if isinstance(self.slice_rows, bool) or not isinstance(self.slice_rows, int):
            raise ConfigurationError(f"slice_rows must be an integer, not {self.slice_rows!r}")
        if self.slice_rows < 1:
            raise ConfigurationError("slice_rows must be at least 1")
        if not isinstance(self.text, TextFormat):
            raise ConfigurationError(f"text must be a cc.TextFormat(...), not {self.text!r}")
        self._check_versions()
        if self.partitioning == "none":  # the command line's spelling of None
            object.__setattr__(self, "partitioning", None)
        if self.partitioning is not None:
            one_of("partitioning", self.partitioning, ("hive", None))
        object.__setattr__(self, "plan", as_plan(self.plan))

    def _check_versions(self) -> None:
        _whole("version", self.version)
        _whole("snapshot_id", self.snapshot_id)
        if self.version is not None and self.version < 0:
            raise ConfigurationError(f"{named('version')} must be 0 or more, not {self.version}")
        if self.as_of is not None:
            object.__setattr__(self, "as_of", utc_now(self.as_of, "as_of"))
        given = [n for n in ("version", "as_of", "snapshot_id") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ConfigurationError(
                f"{' and '.join(named(n) for n in given)} each name the version to read: give one"
            )

    @classmethod
    def keywords(cls) -> list[Option]:
        """The keywords of the public calls this class stands for: its declared fields,
        with the text layout's in their place."""
        return _keywords(cls)

    @classmethod
    def chosen(cls, whole: Self | None, keywords: Self) -> Self:
        """The options of a public call: ``keywords``, the value its keywords made (each
        passed by name, ``EventOptions(now=now, ...)``), or ``whole``, its ``options=``,
        when one was passed; then every keyword must have stayed at its default."""
        if whole is None:
            return keywords
        whole, plain = cls._whole(whole), cls()
        _refuse_beside([o.name for o in cls.keywords() if _value(keywords, o) != _value(plain, o)])
        return whole

    @classmethod
    def given(cls, values: Mapping[str, Any]) -> Self:
        """The options named in ``values`` (other names are not looked at), or its
        ``"options"`` value when it holds one, whole: for callers that have the options by
        name, as text configuration gives them (Spark's options, Airflow's
        ``send_options``, ``resend``'s keywords)."""
        whole = values.get("options")
        if whole is None:
            text = {o.name: values[o.name] for o in options_of(TextFormat) if o.name in values}
            own = {o.name: values[o.name] for o in options_of(cls) if o.name in values}
            return cls(**own, text=TextFormat(**text) if text else DEFAULT_TEXT)
        whole = cls._whole(whole)
        _refuse_beside(
            [
                o.name
                for o in cls.keywords()
                if o.name in values and not o.is_default(values[o.name])
            ]
        )
        return whole

    @classmethod
    def _whole(cls, whole: object) -> Self:
        """``options=``, which must be a value of this class."""
        if not isinstance(whole, cls):
            raise ConfigurationError(
                f"options must be a cc.{cls.__name__}(...), not {type(whole).__name__}"
            )
        return whole

    @property
    def reading(self) -> ReadSpec:
        """How the input is read."""
        return ReadSpec(
            self.slice_rows,
            tuple((self.rename or {}).items()),
            tuple((self.dtypes or {}).items()),
            self.encoding,
            self.text,
            style=self.rename_style,
            at=At(self.version, self.as_of, self.snapshot_id),
            partitioning=self.partitioning is not None,
        )

    @property
    def rules(self) -> ValueRules:
        """How free-form values become JSON."""
        return ValueRules(self.naive_timezone, self.decimals)


def _refuse_beside(also: list[str]) -> None:
    """Refuse keywords given beside ``options=`` (``also``: their names)."""
    if also:
        raise ConfigurationError(
            f"options= holds every option, and {alternatives([f'{n}=' for n in also])} "
            f"{'was' if len(also) == 1 else 'were'} given too: set "
            f"{'it' if len(also) == 1 else 'them'} in the options "
            f"(dataclasses.replace(options, {also[0]}=...))"
        )


def _value(options: TableOptions, option: Option) -> Any:
    """The value ``options`` holds for the keyword ``option`` (a text layout's: in ``text``)."""
    return getattr(options.text if option.owner is TextFormat else options, option.name)


def _keywords(cls: type) -> list[Option]:
    declared = options_of(cls)
    table = [o for o in declared if o.owner is TableOptions]
    return [*table, *options_of(TextFormat), *(o for o in declared if o.owner is not TableOptions)]
