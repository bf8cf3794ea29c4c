"""EventOptions: what decides how an events table is validated and what bytes it becomes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_args

from .._core import ConfigurationError, EpochUnit, IdFormat, declare, registered
from .._json import ValueRules
from .._read import NAME_STYLES, NameStyle
from .table import TableOptions, one_of, utc_now

WIRE_FIELDS = ("context", "event_type", "external_user_id", "occurred_at", "properties")
_NESTED = ("properties.", "context.")


@registered
@dataclass(frozen=True, kw_only=True)
class EventOptions(TableOptions):
    """How events are validated and turned into wire objects: the keywords of
    :func:`validate_events`, as one value to pass whole (``options=``), immutable and checked
    when made. The text-export keywords are one value here: ``text=cc.TextFormat(...)``.

    ``now`` anchors the accepted time window (default: the current time when a call uses
    the options); ``namespace`` salts hashed message ids; ``id_columns`` restricts what they
    hash; ``epoch_unit`` lets ``occurred_at`` hold epoch numbers of that unit;
    ``event_type_style`` rewrites event types in that style before they are checked;
    ``id_format`` names the canonical form of ids and wire (``"v1"`` keeps 0.1's, for its
    backfills). ::

        options = cc.EventOptions(naive_timezone="Europe/Paris", namespace="shop")
        report = cc.validate_events("export.parquet", options=options)
    """

    now: Any = declare(  # a UTC pd.Timestamp, or None: the current time when used
        None,
        doc="the instant the 30-day window is measured from (timezone-aware)",
        spark=False,
        shown_default="the current time",
    )
    epoch_unit: EpochUnit | None = declare(  # what an epoch number in occurred_at counts
        None,
        doc='`occurred_at` holds epoch numbers of this unit (`"s"`, `"ms"`, `"us"`, `"ns"`)',
        help="occurred_at holds epoch numbers of this unit",
    )
    event_type_style: NameStyle | None = declare(  # event types rewritten so (``_read.names``)
        None,
        doc='rewrite event types in this style before they are checked (`"snake"`: `Order '
        "Completed` -> `order_completed`); the report's `notes` list each rewrite",
        help="rewrite event types in this style (snake: Order Completed -> order_completed); "
        "the summary notes each rewrite",
    )
    namespace: str | None = declare(
        None,
        doc="a salt for the hashed [message ids](../concepts/message-ids.md)",
        help="salt for hashed message ids",
    )
    id_columns: Sequence[str] | None = declare(
        None, doc="hash only these columns into the message id"
    )
    id_format: IdFormat = declare(
        "v2",
        doc="the [message-id format](../concepts/message-ids.md#keeping-the-ids-of-01); "
        '`"v1"` makes 0.1\'s ids and events, to finish a backfill begun with it',
        help="the message-id format (default v2); v1 makes the ids and events of 0.1, to "
        "finish a backfill begun with it",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.event_type_style is not None:
            one_of("event_type_style", self.event_type_style, NAME_STYLES)
        if self.epoch_unit is not None:
            one_of("epoch_unit", self.epoch_unit, get_args(EpochUnit))
        one_of("id_format", self.id_format, get_args(IdFormat))
        if self.now is not None:
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
