"""Results of a send: one record per request, the SendResult users read, result files."""

from __future__ import annotations

import datetime as dt
import errno
import io
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._core import (
    STATE_NAMES,
    ConfigurationError,
    DeliveryError,
    ExitCode,
    Note,
    RowBook,
    RowState,
    echoed,
    replaced_whole,
    storage_error,
)
from .._delivery import ChunkRecord
from .._notebook import (
    Groups,
    reason_lines,
    result_html,
    states_chart,
    timeline_chart,
    undelivered_groups,
)
from .runs import (
    HEADER,
    header_bytes,
    header_of,
    now_utc,
    receipt,
    rows_header,
    sidecar,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PlotKind = Literal["states", "timeline"]
_NOT_DELIVERED = (
    RowState.INVALID,
    RowState.REJECTED,
    RowState.FAILED,
    RowState.EXPIRED,
    RowState.HELD,
)

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
    "finished_s",
    "bytes",
    "error",
    "response",
]


class SendResult:
    """What happened to every row and every request of one send.

    ``chunks``: one row per request; ``rows``: one row per input row (state, message id,
    chunk, error); ``counts``: rows per state (they add up to ``n_rows``); ``ok``: every
    valid row was acknowledged; ``exit_code``: the CLI's; ``notes``: what validation noted
    beyond failures (``ValidationReport.notes``); ``plot()``: a chart; ``kind``
    (``"events"``/``"identities"``), ``elapsed_s`` and ``dry_run`` say what ran;
    ``wire_paths``: events only, how many slices the column-wise path wrote and how many
    fell back to the per-row one (``{"columnar": 48, "per_row": 2}``; the reason of each
    fallback is logged at DEBUG). In a notebook it shows itself as a summary.
    """

    def __init__(
        self,
        kind: str,
        book: RowBook,
        chunks: Sequence[ChunkRecord],
        elapsed_s: float,
        *,
        dry_run: bool = False,
        notes: Sequence[Note] = (),
        wire_paths: Mapping[str, int] | None = None,
        fingerprint: Mapping[str, Any] | None = None,
        complete: bool = True,
    ) -> None:
        self.kind = kind
        # the run's id and times, the input's fingerprint: for the rows file and receipts
        self.run_id = uuid.uuid4().hex
        self.finished_at = now_utc()
        self.started_at = self.finished_at - dt.timedelta(seconds=elapsed_s)
        self.fingerprint: dict[str, Any] = dict(fingerprint or {})
        self.complete = complete
        self.subset = False  # a re-send's result: some rows of the input, not all
        self.notes: list[Note] = list(notes)
        self.wire_paths: dict[str, int] = dict(wire_paths or {})
        self._book = book
        self._chunks = chunks
        self.elapsed_s = elapsed_s
        self.dry_run = dry_run
        self.counts = book.counts()
        pending = self.counts.pop("pending")
        if pending and not dry_run:
            raise AssertionError(f"{pending} rows were left without a final state")
        if book.unrecorded_answers():
            raise AssertionError("a row was answered without being recorded in a request")
        if dry_run:
            self.counts["would_send"] = pending
        self.n_rows = len(book)
        # the input was not read to the end (the deadline passed), its length unknown
        self.not_read: str | None = book.not_read
        self._rows: pd.DataFrame | None = None
        self._chunk_frame: pd.DataFrame | None = None
        self._groups: Groups | None = None  # the HTML's failure groups, once
        self._reason_lines: list[str] | None = None  # the same, as text

    @property
    def rows(self) -> pd.DataFrame:
        """One row per input row, indexed by its label in the input (``row``): ``status``,
        ``message_id``, ``chunk`` (the request that carried it) and ``error`` (why it was
        not delivered: a validation message, the API's message, ...); ``<NA>`` where there
        is none. Built when first read."""
        if self._rows is None:
            self._rows = self._named(self._book.frame())
            self._rows.attrs[HEADER] = self.header
        return self._rows

    def _named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A dry run's rows are ``would_send``, the word its counts, its summary and the
        row-states page use: built, never sent, not ``pending``."""
        if self.dry_run:
            frame["status"] = frame["status"].cat.rename_categories({"pending": "would_send"})
        return frame

    @property
    def header(self) -> dict[str, Any]:
        """What the rows file records of the run (``rows.attrs["churn_connector"]``): the
        input's fingerprint, the kind, the run's id, whether it completed."""
        header = rows_header(
            self.kind, self.run_id, self.fingerprint, complete=self.complete, dry_run=self.dry_run
        )
        return {**header, "subset": True} if self.subset else header

    def receipt(self, exit_code: int | None = None, *, command: str = "send") -> dict[str, Any]:
        """The run's receipt: one JSON object of counts and ids (never data, never the key)
        that ``--receipts`` appends as a line; ``exit_code`` defaults to :attr:`exit_code`."""
        return receipt(
            command=command,
            kind=self.kind,
            header=self.header,
            counts=self.counts,
            requests=len(self._chunks),
            retries=self.retries,
            exit_code=self.exit_code if exit_code is None else exit_code,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    @property
    def chunks(self) -> pd.DataFrame:
        """One row per request: events, first and last row, status, HTTP status, attempts,
        timings, bytes, error and the API's answer (trimmed, the key masked)."""
        if self._chunk_frame is None:
            records = sorted(self._chunks, key=lambda c: c.chunk)
            # column by column: ``asdict`` deep-copies each record (0.13 s for 5,000 identify
            # requests, ~26 s for a million; 0.012 s so)
            self._chunk_frame = pd.DataFrame(
                {name: [getattr(c, name) for c in records] for name in CHUNK_COLUMNS}
                if records
                else [],  # no request: object columns, as ever
                columns=CHUNK_COLUMNS,
            ).astype(
                {
                    "parent_chunk": "Int64",
                    "http_status": "Int64",
                    "error": "string",
                    "response": "string",
                }
            )
        return self._chunk_frame

    @property
    def failures(self) -> pd.DataFrame:
        """Rows that were not delivered (invalid, rejected, failed, expired or held), as
        ``rows``."""
        return self.first_failures(None)

    def first_failures(self, n: int | None = 10) -> pd.DataFrame:
        """The first ``n`` rows that were not delivered (all with ``None``), built alone."""
        positions = self._book.positions(_NOT_DELIVERED)
        return self._named(self._book.frame_at(positions if n is None else positions[:n]))

    def row_frames(self, block: int = 200_000) -> Iterator[pd.DataFrame]:
        """The per-row frame in blocks, for writing it without holding all of it; when the
        input was not read to the end, a last row says so (``not_read_row``)."""
        if self._rows is not None:
            yield self._rows
        else:
            header = self.header
            for frame in self._book.frames(block):
                frame = self._named(frame)
                frame.attrs[HEADER] = header
                yield frame
        if self.not_read is not None:
            yield not_read_row(self.not_read)

    @property
    def ok(self) -> bool:
        """Every valid row was acknowledged (invalid rows aside; expired and held ones were
        valid)."""
        c = self.counts
        complete = self.not_read is None
        undelivered = c["rejected"] or c["failed"] or c["expired"] or c["held"]
        return not undelivered and complete and not self.dry_run

    @property
    def exit_code(self) -> int:
        """The exit codes (docs/reference/exit-codes.md): 2 undelivered valid rows, 1 invalid
        (or expired, or held) rows, else 0: an expired row is a data problem, like an invalid
        one, not a delivery one; a held row waits for the caller's word (``new_ids``)."""
        if self.counts["rejected"] or self.counts["failed"] or self.not_read is not None:
            return ExitCode.UNDELIVERED
        if self.counts["invalid"] or self.counts["expired"] or self.counts["held"]:
            return ExitCode.INVALID
        return ExitCode.OK

    def raise_for_failures(self, *, allow_invalid: bool = False) -> None:
        """Raise DeliveryError when rows were rejected or failed (or invalid, expired or
        held, unless ``allow_invalid``)."""
        bad = self.counts["rejected"] + self.counts["failed"]
        if not allow_invalid:
            bad += self.counts["invalid"] + self.counts["expired"] + self.counts["held"]
        if bad or self.not_read is not None:
            raise DeliveryError(
                self.summary(), counts=dict(self.counts), rows=self.failures, chunks=self.chunks
            )

    def summary(self) -> str:
        """Rows by state, requests by status and seconds on the first line; then the
        undelivered rows' reasons, one line each (the API's message with its values
        masked, its rows and an example row: as the notebook's summary groups them); then
        the notes."""
        c = self.counts
        requests = Counter(ch.status for ch in self._chunks)
        head = "dry run: " if self.dry_run else ""
        would = f"would_send {c['would_send']:,}, " if self.dry_run else ""
        expired = f", expired {c['expired']:,}" if c["expired"] else ""
        expired += f", held {c['held']:,}" if c["held"] else ""
        n_requests = len(self._chunks)
        text = (
            f"{head}{self.kind}: {self.n_rows:,} row{'' if self.n_rows == 1 else 's'} -> "
            f"{would}sent {c['sent']:,}, skipped {c['skipped']:,}, invalid {c['invalid']:,}, "
            f"rejected {c['rejected']:,}, failed {c['failed']:,}{expired}; "
            f"{n_requests:,} request{'' if n_requests == 1 else 's'} "
            f"({', '.join(f'{k} {v:,}' for k, v in sorted(requests.items())) or 'none'}) "
            f"in {self.elapsed_s:.2f} s"
        )
        if self.not_read is not None:
            text += f"; {self.not_read}"
        return "\n".join(
            [
                text,
                *self.reason_lines(),
                *(f"note: {echoed(str(note['message']))}" for note in self.notes),
            ]
        )

    def reason_lines(self) -> list[str]:
        """The undelivered rows' reasons, one line each (``summary`` shows them)."""
        if self._reason_lines is None:
            book = self._book
            self._reason_lines = reason_lines(book.status, book.errors, book.labels.__getitem__)
        return self._reason_lines

    def __repr__(self) -> str:
        # one line, and under it the reasons of rows refused or failed (the notes are the
        # summary's: they are no failure)
        first = self.summary().splitlines()[0]
        return "\n".join([f"<SendResult {first}>", *(f"  {line}" for line in self.reason_lines())])

    def plot(self, kind: PlotKind = "states", ax: Axes | None = None) -> Axes:
        """A chart drawn with matplotlib (the ``notebook`` extra) on ``ax`` or a new figure:
        ``"states"``, rows by state; ``"timeline"``, rows sent, rejected and failed over
        the send's time (one line per state, counting rows, not requests). Returns the
        Axes."""
        if kind == "states":
            return states_chart(self.counts, self.kind, ax)
        if kind == "timeline":
            return timeline_chart(self.chunks, self.kind, ax)
        raise ValueError(f"kind must be 'states' or 'timeline', not {kind!r}")

    def _repr_html_(self) -> str:
        if self._groups is None:
            book = self._book
            self._groups = undelivered_groups(book.status, book.errors, book.labels.__getitem__)
        requests = Counter(str(ch.status) for ch in self._chunks)
        return result_html(
            self.kind,
            self.n_rows,
            self.counts,
            requests,
            self.elapsed_s,
            self._groups,
            dry_run=self.dry_run,
            remarks=self.notes,
            retries=self.retries,
        )

    @property
    def retries(self) -> int:
        """Attempts beyond the first, over every request (``res.chunks["attempts"]``)."""
        return sum(max(c.attempts - 1, 0) for c in self._chunks)


RESULT_SUFFIXES = (".csv", ".parquet")


def not_read_row(not_read: str) -> pd.DataFrame:
    """The last row of a per-row result file when the input was not read to the end and its
    length is unknown: no label (a null ``row``: it stands for no row of the input),
    ``failed``, its error saying from which row on the input was not read, so the file
    itself says it is not the whole input."""
    frame = pd.DataFrame(
        {
            "status": pd.Categorical(["failed"], categories=pd.Index(list(STATE_NAMES))),
            "message_id": pd.array([None], dtype="string"),
            "chunk": pd.array([None], dtype="Int64"),
            "error": pd.array([not_read], dtype="string"),
        },
        index=pd.Index([None], dtype=object, name="row"),
    )
    return frame


def check_result_path(path: Path | None) -> None:
    """Refuse a result file we cannot write, before anything is sent: a name that is not
    .csv or .parquet (ConfigurationError), a folder that cannot be made or written to
    (StorageError naming the path and the reason)."""
    if path is None:
        return
    if path.suffix.lower() not in RESULT_SUFFIXES:
        raise ConfigurationError(f"{path}: use a .csv or .parquet file name")
    if path.is_dir():
        raise storage_error("the result file", path, IsADirectoryError(errno.EISDIR, "is a folder"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a real write: permission bits, a read-only mount, a full inode table all show here
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".check"):
            pass
    except OSError as exc:
        raise storage_error("the result file", path, exc) from None


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """Write a result frame as CSV or Parquet, by the file's suffix (see ``write_frames``)."""
    write_frames([frame], path)


def write_frames(frames: Iterable[pd.DataFrame], path: Path) -> None:
    """Write the blocks of one result frame to one CSV or Parquet file, a block at a time,
    so a frame of millions of rows never has to exist whole.

    The file is written under a temporary name beside it and renamed when complete: a run
    killed while writing never leaves a shorter file that reads as a whole result. A write
    that fails (a full disk, a read-only folder) is a StorageError naming the path and the
    reason, and leaves no temporary file behind.
    """
    if path.suffix.lower() not in RESULT_SUFFIXES:
        raise ConfigurationError(f"{path}: use a .csv or .parquet file name")
    with replaced_whole(path) as fh:
        header = _write(frames, fh, csv=path.suffix.lower() == ".csv")
    if header is not None:  # a CSV rows file's header: CSV has no place for it
        try:
            sidecar(path).write_bytes(header_bytes(header))
        except OSError as exc:
            raise storage_error("the result file", sidecar(path), exc) from None


def _write(frames: Iterable[pd.DataFrame], fh: IO[bytes], *, csv: bool) -> dict[str, Any] | None:
    """Write the frames to ``fh``; for CSV, the rows file's header to put beside it."""
    if csv:
        header: dict[str, Any] | None = None
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
        try:
            for k, frame in enumerate(frames):
                header = header or header_of(frame)
                _with_labels(frame).to_csv(text, index=False, header=k == 0)
            text.flush()
        finally:
            text.detach()  # the binary file stays open for the caller
        return header
    writer: pq.ParquetWriter | None = None
    try:
        for labelled in frames:
            frame = _with_labels(labelled)
            schema = None if writer is None else writer.schema
            table = pa.Table.from_pandas(_parquet_ready(frame), schema=schema, preserve_index=False)
            if writer is None:
                found = header_of(labelled)
                if found is not None:  # a rows file's header, in the file's metadata
                    meta = {**(table.schema.metadata or {}), HEADER.encode(): header_bytes(found)}
                    table = table.replace_schema_metadata(meta)
                writer = pq.ParquetWriter(fh, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return None


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    # a named index (the per-row frame's row labels) is the file's first column
    return frame.reset_index() if frame.index.name is not None else frame


def _parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    # labels and values may mix types, which Parquet columns cannot; nulls stay null
    text = [
        c
        for c in frame.columns
        if frame[c].dtype == object or isinstance(frame[c].dtype, pd.CategoricalDtype)
    ]
    return frame.astype(dict.fromkeys(text, "string"))


def write_text(text: str, path: Path, what: str = "the report") -> None:
    """Write a text report (JSON, JUnit XML) as UTF-8, its folder made if needed, whole or
    not at all (``replaced_whole``)."""
    with replaced_whole(path, what) as fh:
        fh.write(text.encode("utf-8"))


def append_line(line: str, path: Path) -> None:
    """Append one line (a receipt) to ``path``, its folder made if needed: one ``write`` in
    append mode, so lines of runs that finish together do not interleave. A write that fails
    is a StorageError naming the path and the reason."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line.rstrip("\n") + "\n")
    except OSError as exc:
        raise storage_error("the receipts file", path, exc) from None
