"""Options as values: small frozen objects, validated once at the boundary, passed whole.

Public functions take explicit keyword arguments and build one options object per call, so a
bad value (a typo in ``extra_columns``, an unknown zone, a naive ``now``) fails at once with
``ConfigurationError`` instead of deep inside a run.
"""

from __future__ import annotations

import codecs
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import pandas as pd

from ._core.exceptions import ConfigurationError
from ._core.types import Decimals, ExtraColumns
from ._core.words import named
from ._json.values import ValueRules
from ._read import DEFAULT_SLICE_ROWS, ReadSpec, TextFormat
from ._read.names import NAME_STYLES, NameStyle
from ._read.text import DEFAULT_TEXT, DTYPES

Pairs = tuple[tuple[str, str], ...]


def pairs(name: str, mapping: Mapping[str, str] | None) -> Pairs:
    """A ``{source: target}`` mapping as sorted pairs of strings (frozen options hold them)."""
    if mapping is None:
        return ()
    if not isinstance(mapping, Mapping):
        raise ConfigurationError(
            f"{name} must be a mapping like {{'SRC': 'dest'}}, not {mapping!r}"
        )
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            raise ConfigurationError(f"{name}: {key!r}: {value!r} must map a name to a name")
    return tuple(mapping.items())


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


def utc_now(now: Any = None) -> pd.Timestamp:
    """``now`` (default: the current time) as a UTC Timestamp; a naive value is refused."""
    try:
        ts = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"now must be a timestamp, got {now!r} ({exc})") from None
    if ts.tzinfo is None:
        raise ConfigurationError("now must be timezone-aware (it is compared with UTC instants)")
    return ts.tz_convert("UTC")


@dataclass(frozen=True, kw_only=True)
class TableOptions:
    """What every table (events or identities) is read and validated with."""

    naive_timezone: str | None = None
    extra_columns: ExtraColumns = "error"
    slice_rows: int = DEFAULT_SLICE_ROWS
    rename: Pairs = ()  # source column -> our column
    dtypes: Pairs = ()  # CSV/TSV column -> one of _inputs.cells.DTYPES
    encoding: str = "utf-8"  # of CSV/TSV files
    decimals: Decimals = "error"
    text: TextFormat = DEFAULT_TEXT  # the layout of CSV/TSV files, the format of unnamed ones
    rename_style: NameStyle | None = None  # the other columns' names: "lower" or "snake"

    def __post_init__(self) -> None:
        check_timezone(self.naive_timezone)
        if self.rename_style is not None:
            one_of("rename_style", self.rename_style, NAME_STYLES)
        one_of("extra_columns", self.extra_columns, get_args(ExtraColumns))
        one_of("decimals", self.decimals, get_args(Decimals))
        targets = [dest for _, dest in self.rename]
        if len(set(targets)) != len(targets):
            raise ConfigurationError(f"rename maps two columns to one name: {dict(self.rename)}")
        for column, dtype in self.dtypes:
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

    @property
    def reading(self) -> ReadSpec:
        """How the input is read."""
        return ReadSpec(
            self.slice_rows,
            self.rename,
            self.dtypes,
            self.encoding,
            self.text,
            style=self.rename_style,
        )

    @property
    def rules(self) -> ValueRules:
        """How free-form values become JSON."""
        return ValueRules(self.naive_timezone, self.decimals)
