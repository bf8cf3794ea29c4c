"""Result bookkeeping: one state per input row, one record per request, and SendResult."""

from __future__ import annotations

import bisect
import html
import threading
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._exceptions import DeliveryError

PENDING, SENT, INVALID, REJECTED, FAILED, SKIPPED = range(6)
STATUS_NAMES = ("pending", "sent", "invalid", "rejected", "failed", "skipped")
RESPONSE_TEXT_LIMIT = 300

CHUNK_COLUMNS = [
    "chunk",
    "parent_chunk",
    "endpoint",
    "events",
    "first_row",
    "last_row",
    "status",
    "http_status",
    "attempts",
    "elapsed_s",
    "bytes",
    "error",
    "response",
]


@dataclass
class ChunkRecord:
    """One request (or one bisected part of a rejected request) and how it ended."""

    chunk: int
    parent_chunk: int | None
    endpoint: str
    events: int
    first_row: Any
    last_row: Any
    status: str
    http_status: int | None
    attempts: int
    elapsed_s: float
    bytes: int
    error: str | None
    response: str | None


class Labels:
    """Row labels stored as the input's own index slices (a RangeIndex costs nothing)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._parts: list[pd.Index] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, index: pd.Index) -> None:
        self._starts.append(self._n)
        self._parts.append(index)
        self._n += len(index)

    def __getitem__(self, position: int) -> Any:
        k = bisect.bisect_right(self._starts, position) - 1
        return self._parts[k][position - self._starts[k]]

    def to_list(self) -> list[Any]:
        out: list[Any] = []
        for part in self._parts:
            out.extend(part.tolist())
        return out


class RowBook:
    """Per-row state, stored column-wise so that millions of rows stay small.

    The reader thread appends rows while sender threads set states, so every access
    takes the lock (growing an array replaces it; an unlocked write could be lost).
    Message ids are kept per slice as fixed-width bytes where possible (36 B a row).
    """

    def __init__(self) -> None:
        self.labels = Labels()
        self.errors: dict[int, str] = {}
        self._ids: list[tuple[int, np.ndarray]] = []
        self._status = np.zeros(1024, dtype=np.int8)
        self._chunk = np.full(1024, -1, dtype=np.int64)
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def status(self) -> np.ndarray:
        return self._status[: len(self.labels)]

    @property
    def chunk(self) -> np.ndarray:
        return self._chunk[: len(self.labels)]

    def extend(self, labels: pd.Index | list[Any]) -> int:
        """Add rows (all pending); return the position of the first."""
        index = labels if isinstance(labels, pd.Index) else pd.Index(labels, dtype=object)
        with self._lock:
            start = len(self.labels)
            need = start + len(index)
            if need > len(self._status):
                size = max(need, 2 * len(self._status))  # doubling keeps appends O(n) overall
                status = np.zeros(size, dtype=np.int8)
                chunk = np.full(size, -1, dtype=np.int64)
                status[:start] = self._status[:start]
                chunk[:start] = self._chunk[:start]
                self._status, self._chunk = status, chunk
            self.labels.append(index)
            return start

    def set_message_ids(self, start: int, ids: list[str | None]) -> None:
        """Message ids of the rows from ``start`` on (None where a row has none)."""
        try:
            packed = np.array([b"" if i is None else i.encode("ascii") for i in ids], dtype="S36")
            if any(i is not None and len(i) > 36 for i in ids):
                raise ValueError
        except (UnicodeEncodeError, ValueError):
            packed = np.array(ids, dtype=object)
        with self._lock:
            self._ids.append((start, packed))

    def message_ids(self) -> list[str | None]:
        out: list[str | None] = [None] * len(self)
        for start, packed in self._ids:
            values = packed.tolist()
            if packed.dtype.kind == "S":
                values = [v.decode() if v else None for v in values]
            out[start : start + len(values)] = values
        return out

    def set(self, positions: Any, status: int, error: str | None = None, chunk: int = -1) -> None:
        pos = np.asarray(positions, dtype=np.int64)
        with self._lock:
            self._status[pos] = status
            if chunk >= 0:
                self._chunk[pos] = chunk
            if error is not None:
                for p in pos.tolist():
                    self.errors[p] = error

    def set_chunk(self, positions: Any, chunk: int) -> None:
        with self._lock:
            self._chunk[np.asarray(positions, dtype=np.int64)] = chunk

    def add_error(self, position: int, error: str) -> None:
        with self._lock:
            old = self.errors.get(position)
            self.errors[position] = error if old is None else f"{old}; {error}"

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.status, minlength=len(STATUS_NAMES))
        return {name: int(found[i]) for i, name in enumerate(STATUS_NAMES)}

    def frame(self) -> pd.DataFrame:
        n = len(self)
        errors: list[str | None] = [None] * n
        for p, e in self.errors.items():
            errors[p] = e
        chunk = pd.array(self.chunk, dtype="Int64")
        chunk[self.chunk < 0] = pd.NA
        return pd.DataFrame(
            {
                "row": pd.Series(self.labels.to_list(), dtype=object),
                "position": np.arange(n, dtype=np.int64),
                "message_id": pd.Series(self.message_ids(), dtype=object),
                "chunk": chunk,
                "status": pd.Categorical.from_codes(
                    self.status.astype(np.int64), categories=pd.Index(list(STATUS_NAMES))
                ),
                "error": pd.Series(errors, dtype=object),
            }
        )


def trim(text: str | None, limit: int = RESPONSE_TEXT_LIMIT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit] + "…"


class SendResult:
    """What happened to every row and every request of one send.

    ``chunks``: one row per request; ``rows``: one row per input row (state, message id,
    chunk, error); ``counts``: rows per state; ``ok``: every valid row was acknowledged.
    """

    def __init__(
        self,
        kind: str,
        book: RowBook,
        chunks: list[ChunkRecord],
        elapsed_s: float,
        dry_run: bool = False,
        validation: Any = None,
    ) -> None:
        self.kind = kind
        self._book = book
        self._chunks = chunks
        self.elapsed_s = elapsed_s
        self.dry_run = dry_run
        self.validation = validation
        self.counts = book.counts()
        pending = self.counts.pop("pending")
        if pending and not dry_run:
            raise AssertionError(f"{pending} rows were left without a final state")
        answered = np.isin(book.status, (SENT, REJECTED))
        if (book.chunk[answered] < 0).any():
            raise AssertionError("a row was answered without being recorded in a request")
        if dry_run:
            self.counts["would_send"] = pending
        self.n_rows = len(book)
        self._rows: pd.DataFrame | None = None
        self._chunk_frame: pd.DataFrame | None = None

    @property
    def rows(self) -> pd.DataFrame:
        if self._rows is None:
            self._rows = self._book.frame()
        return self._rows

    @property
    def chunks(self) -> pd.DataFrame:
        if self._chunk_frame is None:
            self._chunk_frame = pd.DataFrame(
                [asdict(c) for c in sorted(self._chunks, key=lambda c: c.chunk)],
                columns=CHUNK_COLUMNS,
            ).astype({"parent_chunk": "Int64", "http_status": "Int64"})
        return self._chunk_frame

    @property
    def failures(self) -> pd.DataFrame:
        """Rows that were not delivered (invalid, rejected or failed)."""
        rows = self.rows
        return rows[rows["status"].isin(["invalid", "rejected", "failed"])]

    @property
    def ok(self) -> bool:
        return self.counts["rejected"] == 0 and self.counts["failed"] == 0 and not self.dry_run

    @property
    def exit_code(self) -> int:
        """PRODUCT.md's exit codes: 2 undelivered valid rows, 1 invalid rows, else 0."""
        if self.counts["rejected"] or self.counts["failed"]:
            return 2
        return 1 if self.counts["invalid"] else 0

    def raise_for_failures(self, *, allow_invalid: bool = False) -> None:
        """Raise DeliveryError when rows were rejected or failed (or invalid, by default)."""
        bad = self.counts["rejected"] + self.counts["failed"]
        if not allow_invalid:
            bad += self.counts["invalid"]
        if bad:
            raise DeliveryError(self.summary(), counts=dict(self.counts))

    def summary(self) -> str:
        c = self.counts
        requests = Counter(ch.status for ch in self._chunks)
        head = "dry run: " if self.dry_run else ""
        text = (
            f"{head}{self.kind}: {self.n_rows} rows -> sent {c['sent']}, "
            f"skipped {c['skipped']}, invalid {c['invalid']}, rejected {c['rejected']}, "
            f"failed {c['failed']}; {len(self._chunks)} requests "
            f"({', '.join(f'{k} {v}' for k, v in sorted(requests.items())) or 'none'}) "
            f"in {self.elapsed_s:.2f} s"
        )
        return text

    def __repr__(self) -> str:
        return f"<SendResult {self.summary()}>"

    def _repr_html_(self) -> str:
        parts = [f"<div><strong>{html.escape(self.summary())}</strong>"]
        parts.append(self.chunks.head(20).to_html(index=False))
        if not self.failures.empty:
            parts.append("<p>Rows not delivered (first 20):</p>")
            parts.append(self.failures.head(20).to_html(index=False))
        parts.append("</div>")
        return "".join(parts)
