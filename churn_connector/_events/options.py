"""EventOptions: what decides how an events table is validated and what bytes it becomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from .._core.exceptions import ConfigurationError
from .._core.types import EpochUnit, IdFormat
from .._json.values import ValueRules
from .._options import TableOptions, one_of, utc_now
from .._read.names import NAME_STYLES, NameStyle

WIRE_FIELDS = ("context", "event_type", "external_user_id", "occurred_at", "properties")
_NESTED = ("properties.", "context.")


@dataclass(frozen=True, kw_only=True)
class EventOptions(TableOptions):
    """How events are validated and turned into wire objects (immutable, validated).

    ``now`` anchors the accepted time window (default: when the options are made);
    ``namespace`` salts hashed message ids; ``id_columns`` restricts what they hash;
    ``epoch_unit`` lets ``occurred_at`` hold epoch numbers of that unit;
    ``event_type_style`` rewrites event types in that style before they are checked;
    ``id_format`` names the canonical form of ids and wire (``"v1"`` keeps 0.1's, for its
    backfills).
    """

    now: Any = None  # becomes a UTC pd.Timestamp
    namespace: str | None = None
    id_columns: tuple[str, ...] | None = None
    epoch_unit: EpochUnit | None = None  # what an epoch number in occurred_at counts
    event_type_style: NameStyle | None = None  # event types rewritten so (``_names``)
    id_format: IdFormat = "v2"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.event_type_style is not None:
            one_of("event_type_style", self.event_type_style, NAME_STYLES)
        if self.epoch_unit is not None:
            one_of("epoch_unit", self.epoch_unit, get_args(EpochUnit))
        one_of("id_format", self.id_format, get_args(IdFormat))
        object.__setattr__(self, "now", utc_now(self.now))
        if self.namespace is not None and not isinstance(self.namespace, str):
            raise ConfigurationError(f"namespace must be a string, not {self.namespace!r}")
        if self.id_columns is not None:
            columns = (self.id_columns,) if isinstance(self.id_columns, str) else self.id_columns
            columns = tuple(columns)
            for column in columns:
                if column not in WIRE_FIELDS and not (
                    isinstance(column, str) and column.startswith(_NESTED)
                ):
                    raise ConfigurationError(
                        f"id_columns: {column!r} is not a wire field; use "
                        f"{', '.join(WIRE_FIELDS)} or a properties.<key> / context.<key> name"
                    )
            object.__setattr__(self, "id_columns", columns or None)

    @property
    def rules(self) -> ValueRules:
        """How free-form values become JSON, in the canonical form of ``id_format``."""
        return ValueRules(self.naive_timezone, self.decimals, self.id_format)
