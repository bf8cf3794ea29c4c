"""The events stream: slices -> validation -> wire bytes -> de-duplication across slices.

Each slice is validated and converted on its own, while the few facts that span slices
(message ids already seen, table-level failures already reported) live here, so the
results of a streamed input equal those of the whole frame.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from ._results import INVALID, SKIPPED, RowBook
from ._validation import run_schema
from ._wire import EventOptions, build_events

Item = tuple[int, bytes]  # (row position, wire bytes of one event)


class EventStream:
    """Validates and converts slices of one events input; remembers what spans slices."""

    def __init__(self, schema: pa.DataFrameSchema, options: EventOptions) -> None:
        self.schema = schema
        self.options = options
        self.book = RowBook()
        self.failures: list[dict[str, Any]] = []
        self.duplicates = 0
        self._seen: dict[int, int] = {}  # id key -> position of the first row with that id
        self._content: dict[int, int] = {}  # id key -> content key (only for chosen ids)
        self._table_level: set[tuple[Any, ...]] = set()
        self.custom_ids = False

    def _record_failures(self, records: list[dict[str, Any]], start: int, n: int) -> None:
        for rec in records:
            if rec["position"] is None:
                key = (rec["column"], rec["check"])
                if key not in self._table_level:
                    self._table_level.add(key)
                    self.failures.append(rec)
                for p in range(start, start + n):
                    self.book.add_error(p, f"[{rec['check']}] {rec['message']}")
            else:
                self.failures.append(rec)
                self.book.add_error(rec["position"], f"[{rec['check']}] {rec['message']}")

    def process(self, df: pd.DataFrame, keep_valid: bool = False) -> tuple[list[Item], Any]:
        """Handle one slice; return the events to send and (optionally) the wire events."""
        n = len(df)
        start = self.book.extend(list(df.index))
        result = run_schema(df, self.schema, start, df.index)
        self._record_failures(result.records, start, n)
        invalid = np.flatnonzero(result.invalid)
        self.book.set(start + invalid, INVALID)
        valid = np.flatnonzero(~result.invalid)
        work = df.iloc[valid].set_axis(pd.RangeIndex(len(valid)), axis=0)
        wire = build_events(work, self.options)
        self.custom_ids = "message_id" in work.columns or bool(self.options.id_columns)
        items: list[Item] = []
        kept: list[int] = []
        for j, i in enumerate(valid.tolist()):
            pos = start + i
            self.book.message_ids[pos] = wire.ids[j]
            key = wire.id_keys[j]
            first = self._seen.get(key)
            if first is None:
                self._seen[key] = pos
                if self.custom_ids:
                    self._content[key] = wire.content_keys[j]
                items.append((pos, wire.body[j]))
                kept.append(j)
            elif not self.custom_ids or self._content[key] == wire.content_keys[j]:
                self.duplicates += 1
                self.book.set([pos], SKIPPED)
                self.book.add_error(
                    pos, f"duplicate of row {self.book.labels[first]!r} (same message id)"
                )
            else:
                message = (
                    f"message id {wire.ids[j]!r} is also used by row "
                    f"{self.book.labels[first]!r} with different content; the API would keep "
                    "only the first: give each event its own id"
                )
                self.failures.append(
                    {
                        "row": self.book.labels[pos],
                        "position": pos,
                        "column": "message_id",
                        "check": "message_id_conflict",
                        "value": wire.ids[j],
                        "message": message,
                    }
                )
                self.book.set([pos], INVALID)
                self.book.add_error(pos, f"[message_id_conflict] {message}")
        return items, (wire, kept) if keep_valid else None

    def run(self, frames: Iterator[pd.DataFrame]) -> Iterator[list[Item]]:
        for df in frames:
            yield self.process(df)[0]
