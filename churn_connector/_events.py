"""Public entry points of the events path: validate_events and events_to_wire."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._pipeline import EventStream
from ._readers import DEFAULT_SLICE_ROWS, iter_frames
from ._schemas import ExtraColumns, events_schema
from ._validation import ValidationReport, streamed_report
from ._wire import EventOptions, with_ids


def event_stream(
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    namespace: str | None = None,
    id_columns: Sequence[str] | None = None,
) -> EventStream:
    schema = events_schema(now=now, naive_timezone=naive_timezone, extra_columns=extra_columns)
    options = EventOptions(
        naive_timezone=naive_timezone,
        namespace=namespace,
        id_columns=tuple(id_columns) if id_columns else None,
    )
    return EventStream(schema, options)


def validate_events(
    data: Any,
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    namespace: str | None = None,
    id_columns: Sequence[str] | None = None,
    slice_rows: int = DEFAULT_SLICE_ROWS,
) -> ValidationReport:
    """Check every row of an events table against the contract; nothing is sent.

    ``now`` anchors the time window (default: the current UTC time); naive timestamps are
    invalid unless ``naive_timezone`` names their zone. Exact duplicate rows (same message
    id) are valid but counted: they would be sent once.
    """
    stream = event_stream(
        now=now,
        naive_timezone=naive_timezone,
        extra_columns=extra_columns,
        namespace=namespace,
        id_columns=id_columns,
    )
    return streamed_report("events", stream, iter_frames(data, slice_rows), stream.process)


def events_to_wire(
    data: Any,
    *,
    now: Any = None,
    naive_timezone: str | None = None,
    extra_columns: ExtraColumns = "error",
    namespace: str | None = None,
    id_columns: Sequence[str] | None = None,
    slice_rows: int = DEFAULT_SLICE_ROWS,
) -> list[dict[str, Any]]:
    """The exact wire event objects of the valid rows (duplicates once), in row order."""
    stream = event_stream(
        now=now,
        naive_timezone=naive_timezone,
        extra_columns=extra_columns,
        namespace=namespace,
        id_columns=id_columns,
    )
    out: list[dict[str, Any]] = []
    for df in iter_frames(data, slice_rows):
        _, kept = stream.process(df, keep_valid=True)
        wire, indices = kept
        objects = with_ids(wire)
        out.extend(objects[j] for j in indices)
    return out
