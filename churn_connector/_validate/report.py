"""The ValidationReport users see, and the quarantine of invalid rows (run_schema and the
failures it finds: ``failure_log``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow

from .._core import (
    ConfigurationError,
    DataValidationError,
    Note,
    echoed,
    named,
    replaced_whole,
    value_text,
)
from .._notebook import failures_chart, plural, report_html
from .._read import Source
from .document import FIRST_FAILURES, dumps, report_document
from .failure_log import failure_line
from .gate import GateOptions, GateVerdict, ThresholdArg, check_of_kind, counted_rows, judge
from .volume import TableFacts

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class ValidationReport:
    """The outcome of validating a table.

    ``valid``: the valid rows (original index kept), ready to send; ``invalid``: the invalid
    rows as they were read; ``failures``: one row per problem with ``row`` (the input's
    index label), ``position`` (0-based row number), ``column``, ``check`` (a stable name),
    ``value`` and ``message`` (what is wrong and how to fix it). ``n_rows``, ``n_valid`` and
    ``n_invalid`` count rows; ``duplicates`` counts exact repeats (same message id, sent
    once). ``quarantine()`` joins the invalid rows and their failures; ``plot()`` charts the
    failures. ``notes``: what is worth knowing but is no failure (e.g. channels opted in by
    default), as dicts with ``kind``, ``column``, ``count`` and ``message``. ``wire_paths``
    (events): slices written by the column-wise path and by the per-row one (its fallback;
    the reason is logged at DEBUG), as ``SendResult.wire_paths``. In a notebook it shows
    itself as a summary.
    """

    def __init__(
        self,
        kind: str,
        valid: pd.DataFrame,
        failures: pd.DataFrame,
        n_rows: int,
        n_invalid: int,
        duplicates: int = 0,
        *,
        invalid: pd.DataFrame | None = None,
        invalid_positions: np.ndarray | None = None,
        notes: Sequence[Note] = (),
        wire_paths: Mapping[str, int] | None = None,
        source: Source | None = None,
        fingerprint: Mapping[str, Any] | None = None,
        table_rows: Mapping[tuple[str | None, str], int] | None = None,
        newest_occurred_at: pd.Timestamp | None = None,
        validated_at: pd.Timestamp | None = None,
    ) -> None:
        self.kind = kind
        # events: the newest valid occurred_at (UTC; None: no valid event), and when the
        # rows were validated: what the gate's max_lag judges
        self.newest_occurred_at = newest_occurred_at
        self.validated_at = validated_at if validated_at is not None else pd.Timestamp.now(tz="UTC")
        self.source = source if source is not None else Source("table", None)
        self.fingerprint: dict[str, Any] = dict(fingerprint or {})
        # rows each table-level failure (column, check) marked
        self.table_rows: dict[tuple[str | None, str], int] = dict(table_rows or {})
        self.wire_paths: dict[str, int] = dict(wire_paths or {})
        self.valid = valid
        self.failures = failures
        self.n_rows = n_rows
        self.n_invalid = n_invalid
        self.n_valid = n_rows - n_invalid
        self.duplicates = duplicates
        self.notes: list[Note] = list(notes)
        self.invalid = invalid if invalid is not None else valid.iloc[:0]
        self._invalid_positions = (
            invalid_positions if invalid_positions is not None else np.empty(0, dtype=np.int64)
        )

    @property
    def ok(self) -> bool:
        """No row is invalid and nothing failed."""
        return self.n_invalid == 0 and self.failures.empty

    @property
    def invalid_positions(self) -> np.ndarray:
        """The 0-based positions of the invalid rows in the input, in order."""
        return self._invalid_positions

    def gate(
        self,
        *,
        max_invalid: ThresholdArg = None,
        warn_invalid: ThresholdArg = None,
        warn_on: Sequence[str] | None = None,
        expect_rows: str | None = None,
        max_change: str | None = None,
        history: str | None = None,
        history_runs: int = 10,
        max_lag: str | None = None,
    ) -> GateVerdict:
        """The data-quality gate's verdict on this report, with its reasons.

        ``max_invalid``: fail above this many invalid rows (``10``) or this share of the
        rows (``"0.5%"``); unset, any invalid row fails. ``warn_invalid``: warn above it
        (unset: any invalid row within ``max_invalid`` warns). ``warn_on``: checks whose
        failures only warn (their rows stay invalid and unsent, but do not count against
        ``max_invalid``). ``verdict.status`` is ``"pass"``, ``"warn"`` or ``"fail"``;
        ``verdict.exit_code`` is the command line's (0, or 1 when it fails).

        Volume and freshness (each a named gate in ``verdict.gates`` and its reasons):
        ``expect_rows``: fail unless the rows read are within ``"MIN..MAX"`` (an end may be
        open: ``"1000.."``); ``max_change``: fail when they differ by more than this share
        (``"50%"``) from the median of the last ``history_runs`` runs of this kind in the
        receipts at ``history`` (what ``--receipts`` writes); ``max_lag`` (events): fail
        when the newest valid ``occurred_at`` is older than this (``"6h"``, ``"30m"``).
        """
        options = GateOptions(
            max_invalid=max_invalid,
            warn_invalid=warn_invalid,
            warn_on=warn_on,
            expect_rows=expect_rows,
            max_change=max_change,
            history=history,
            history_runs=history_runs,
            max_lag=max_lag,
        )
        return self.judged(options)

    def judged(self, options: GateOptions) -> GateVerdict:
        """:meth:`gate`, for its options as one value."""
        warned_checks = tuple(options.warn_on or ())
        for check in warned_checks:
            check_of_kind(check, self.kind)
        if options.max_lag is not None and self.kind != "events":
            raise ConfigurationError(
                f"{named('max_lag')} judges events' occurred_at; identities have none"
            )
        invalid, warned = counted_rows(self, warned_checks)
        facts = TableFacts(self.kind, self.n_rows, self.newest_occurred_at, self.validated_at)
        return judge(self.n_rows, invalid, warned, options, facts)

    def to_json(
        self,
        *,
        max_invalid: ThresholdArg = None,
        warn_invalid: ThresholdArg = None,
        warn_on: Sequence[str] | None = None,
        expect_rows: str | None = None,
        max_change: str | None = None,
        history: str | None = None,
        history_runs: int = 10,
        max_lag: str | None = None,
        first: int = FIRST_FAILURES,
    ) -> str:
        """The report as the JSON document of contract ``v1`` (its JSON Schema:
        ``docs/reference/validation-report.v1.schema.json``): the gate's verdict (judged as
        :meth:`gate` judges), counts per state, per check and per column, the first
        ``first`` failures with their row labels (and file and line, for CSV and NDJSON
        rows), the notes, the input's fingerprint, the package and contract versions."""
        verdict = self.gate(
            max_invalid=max_invalid,
            warn_invalid=warn_invalid,
            warn_on=warn_on,
            expect_rows=expect_rows,
            max_change=max_change,
            history=history,
            history_runs=history_runs,
            max_lag=max_lag,
        )
        return dumps(report_document(self, verdict, first=first))

    def summary(self) -> str:
        """Rows valid and invalid, failures by check, the first five failures."""
        lines = [
            f"{self.kind}: {plural(self.n_rows, 'row')}, {self.n_valid:,} valid, "
            f"{self.n_invalid:,} invalid"
            + (
                f", {plural(self.duplicates, 'exact duplicate')} (sent once)"
                if self.duplicates
                else ""
            )
        ]
        lines.extend(f"note: {echoed(str(note['message']))}" for note in self.notes)
        if not self.failures.empty:
            counts = self.failures["check"].value_counts()
            lines.append(
                "failures by check: "
                + ", ".join(f"{echoed(str(k))} {v:,}" for k, v in counts.items())
            )
            for rec in self.failures.head(5).itertuples(index=False):
                line = failure_line(rec.position, rec.row, rec.column, str(rec.message))
                lines.append(f"  {line}")  # made harmless by failure_line
            if len(self.failures) > 5:
                lines.append(f"  ... {len(self.failures) - 5:,} more in .failures")
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        """Raise DataValidationError when any row is invalid (for pipelines and Airflow)."""
        if not self.ok:
            raise DataValidationError(self.summary(), n_invalid=self.n_invalid, n_rows=self.n_rows)

    def quarantine(self, path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
        """The invalid rows with their reasons: every column as read, plus ``failed_checks``
        and ``reasons``; also written to ``path`` (``.csv`` or ``.parquet``, the row labels
        in a first column ``row``) when given. Fix them in pandas and validate them again."""
        frame = quarantine_frame(self.invalid, self._invalid_positions, self.failures)
        if path is not None:
            write_rows(frame, path, neutral=True)
        return frame

    def plot(self, ax: Axes | None = None, *, top: int = 15) -> Axes:
        """A bar chart of the failures by check and column (the ``top`` largest), drawn
        with matplotlib (the ``notebook`` extra) on ``ax`` or a new figure; returns the Axes."""
        return failures_chart(self.failures, self.kind, ax, top)

    def __repr__(self) -> str:
        return f"<ValidationReport {self.summary().splitlines()[0]}>"

    def _repr_html_(self) -> str:
        return report_html(
            self.kind, self.n_rows, self.n_invalid, self.duplicates, self.failures, self.notes
        )


# ------------------------------------------------------------------------------------------
# Quarantine: the invalid rows of a report with their reasons, as a frame or a file.

REASON_COLUMNS = ("failed_checks", "reasons")


def quarantine_frame(
    invalid: pd.DataFrame, positions: np.ndarray, failures: pd.DataFrame
) -> pd.DataFrame:
    """``invalid`` (rows at ``positions`` of the input) with their checks and reasons."""
    clash = [c for c in REASON_COLUMNS if c in invalid.columns]
    if clash:
        raise ConfigurationError(f"the rows already have a column named {clash[0]!r}")
    table = failures[failures["position"].isna()]
    per_row = failures[failures["position"].notna()]
    checks: dict[int, list[str]] = {}
    reasons: dict[int, list[str]] = {}
    for pos, check, message in zip(
        per_row["position"].astype("int64").tolist(),
        per_row["check"].tolist(),
        per_row["message"].tolist(),
        strict=True,
    ):
        checks.setdefault(pos, []).append(str(check))
        reasons.setdefault(pos, []).append(str(message))
    common_checks = [str(c) for c in table["check"].tolist()]
    common_reasons = [str(m) for m in table["message"].tolist()]
    out = invalid.copy()
    out["failed_checks"] = pd.array(
        [", ".join(dict.fromkeys(common_checks + checks.get(p, []))) for p in positions.tolist()],
        dtype="string",
    )
    out["reasons"] = pd.array(
        [
            " | ".join(echoed(r) for r in common_reasons + reasons.get(p, []))
            for p in positions.tolist()
        ],
        dtype="string",
    )
    return out


def write_rows(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    labels: bool = True,
    neutral: bool = False,
) -> Path:
    """Write ``frame`` with its row labels (first column ``row``; none without ``labels``)
    as CSV or Parquet. ``neutral``: a CSV's text cells (and names) that a spreadsheet would
    run as a formula are neutralised (``csv_safe``); Parquet keeps every value as it is. A
    lone surrogate, which UTF-8 cannot carry, is written as its escape (``\\udc00``)."""
    target = Path(path)
    suffixes = [s.lower() for s in target.suffixes]
    if ".parquet" not in suffixes and ".csv" not in suffixes:
        raise ConfigurationError(f"{target}: use a .csv or .parquet file name")
    label = "row" if "row" not in frame.columns else "row_label"
    labelled = frame.rename_axis(label).reset_index() if labels else frame.reset_index(drop=True)
    # whole or not at all: a temporary name beside it, synced, renamed (a run killed while
    # it writes never leaves a shorter file that reads as whole, ready to send)
    with replaced_whole(target) as fh:
        if ".csv" in suffixes:
            # text cells hold objects and lists as people read them (value_text), not reprs
            text = labelled.assign(**_as_text(labelled, containers_only=True))
            text = _utf8_cells(text)
            text = csv_safe(text) if neutral else text
            text.to_csv(
                fh,
                index=False,
                encoding="utf-8",
                compression=_COMPRESSIONS.get(target.suffix.lower()),
            )
        else:
            try:
                labelled.to_parquet(fh, index=False)
            except (pyarrow.ArrowException, TypeError, ValueError):
                # bad rows often mix types in one column (that is why they are bad): Parquet
                # columns cannot, so those columns are written as text (nulls stay null); a
                # lone surrogate as its escape
                fh.seek(0)
                fh.truncate()
                as_text = labelled.assign(**_as_text(labelled, utf8=True))
                as_text.columns = [_utf8(str(c)) for c in as_text.columns]
                as_text.to_parquet(fh, index=False)
    return target


# OWASP's CSV-injection rule: a cell a spreadsheet would take for a formula
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` for a CSV file people open in a spreadsheet: every text cell, and every
    column name, that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
    gets a leading ``'`` (OWASP's rule against CSV injection), so a spreadsheet shows it as
    text instead of running it. Numbers stay numbers; the Parquet form keeps the originals."""
    out = frame.copy()
    for name in frame.columns:
        column = frame[name]
        if column.dtype == object or isinstance(column.dtype, pd.StringDtype):
            out[name] = _map_text(column, _neutral)
    out.columns = [_neutral(c) for c in frame.columns]
    return out


def _map_text(column: pd.Series, change: Any) -> pd.Series:
    """``change`` applied to each cell, the column's dtype kept (object stays object: pandas'
    inference would make it Arrow text, which refuses a lone surrogate)."""
    return pd.Series([change(v) for v in column.tolist()], index=column.index, dtype=column.dtype)


def _neutral(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _utf8_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every lone surrogate of its text cells and names as its escape."""
    out = frame.copy()
    for name in frame.columns:
        column = frame[name]
        if column.dtype == object or isinstance(column.dtype, pd.StringDtype):
            out[name] = _map_text(column, lambda v: _utf8(v) if isinstance(v, str) else v)
    out.columns = [_utf8(c) if isinstance(c, str) else c for c in frame.columns]
    return out


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# a quarantine may be written compressed, as pandas does by the name (bad.csv.gz)
_COMPRESSIONS: dict[str, Any] = {
    ".gz": "gzip",
    ".bz2": "bz2",
    ".xz": "xz",
    ".zst": "zstd",
    ".zip": "zip",
}


def _as_text(
    frame: pd.DataFrame, *, containers_only: bool = False, utf8: bool = False
) -> dict[str, pd.Series]:
    """The object columns of ``frame`` as ``value_text`` writes their cells (only those
    holding an object or a list, with ``containers_only``; a lone surrogate as its escape,
    with ``utf8``)."""
    out = {}
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object:
            continue
        if containers_only and not column.map(_container).any():
            continue
        texts = [value_text(v) for v in column.tolist()]
        if utf8:
            texts = [None if t is None else _utf8(t) for t in texts]
        out[str(name)] = pd.Series(pd.array(texts, dtype="string"), index=frame.index)
    return out


def _container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | set | frozenset | np.ndarray)
