"""Running a schema on one slice of input, and the ValidationReport users see."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow

from .._core.book import RowBook
from .._core.exceptions import ConfigurationError, DataValidationError
from .._core.types import Note, RowState
from .._core.words import row_label, shown, value_text
from .._json.values import has_surrogate, mask_unreportable
from .._notebook.display import report_html
from .._notebook.plots import failures_chart
from .._read.fingerprint import Source
from .checks import require
from .document import FIRST_FAILURES, document, dumps
from .gate import GateOptions, GateVerdict, ThresholdArg, check_of_kind, counted_rows, judge
from .pandera import full_validation, pa, schema_errors
from .schema import UnknownColumn, explanations, frame_owners

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FAILURE_COLUMNS = ["row", "position", "column", "check", "value", "message"]


@dataclass
class SliceFailures:
    """Failures of one slice: ``invalid`` marks rows (by position in the slice) that failed."""

    invalid: np.ndarray
    records: list[dict[str, Any]] = field(default_factory=list)


_ALL_NA_CONCAT = "The behavior of DataFrame concatenation with empty or all-NA entries"


def run_schema(
    df: pd.DataFrame,
    schema: pa.DataFrameSchema,
    offset: int,
    labels: pd.Index,
    *,
    masked: bool = False,
) -> SliceFailures:
    """Validate ``df`` (any index) and return per-row failures with messages.

    Rows are addressed by position, so duplicate index labels cannot hide a failure.
    Validation is forced on: pandera's environment switches cannot turn it off.
    """
    n = len(df)
    invalid = np.zeros(n, dtype=bool)
    # pandera (and every check) needs one column per name, and names it can encode
    bad_names = [
        failure_record(
            None,
            None,
            ascii(c),
            "column_name",
            ascii(c),
            f"column name {c!a} holds a lone surrogate: rename it",
        )
        for c in df.columns
        if isinstance(c, str) and has_surrogate(c)
    ] + [
        failure_record(
            None, None, str(c), "column_unique", c, f"column {c!r} appears more than once: keep one"
        )
        for c in df.columns[df.columns.duplicated()].unique()
    ]
    if bad_names:
        return SliceFailures(np.ones(n, dtype=bool), bad_names)
    work = df.set_axis(pd.RangeIndex(n), axis=0)
    explain = explanations(schema)
    records: list[dict[str, Any]] = []
    failed = schema_errors()
    with full_validation(), warnings.catch_warnings():
        # pandera's failure report concatenates frames of which some are all NA, and pandas
        # 2.x warns that a later version types that concat differently: pandera's concat,
        # the same cases either way; under -W error it would turn a finding into a crash
        warnings.filterwarnings("ignore", message=_ALL_NA_CONCAT, category=FutureWarning)
        try:
            schema.validate(work, lazy=True, inplace=True)
            return SliceFailures(invalid)
        except failed as exc:
            cases = exc.failure_cases
    if not masked and _pandera_broke_on_a_value(cases):
        # pandera's failure reporting turns values into pyarrow strings (which refuse lone
        # surrogates) and prints them (which a very deep value breaks); mask those cells
        # (once) so each is reported on its own row instead of failing the whole slice
        return run_schema(mask_unreportable(df), schema, offset, labels, masked=True)
    for case in cases.itertuples(index=False):
        column = None if _missing(case.column) else str(case.column)
        check = str(case.check)
        value = case.failure_case
        if check in ("column_in_schema", "column_in_dataframe"):
            column = str(value)
        maker = explain.get(check)
        if isinstance(maker, UnknownColumn):
            maker = maker.among(df.columns)  # "did you mean" never names a column it has
        message = (
            maker(column, value)
            if maker
            else f"{column or 'the table'} failed check {check} ({shown(value)})"
        )
        if _missing(case.index):
            invalid[:] = True
            records.append(failure_record(None, None, column, check, value, message))
            continue
        pos = int(case.index)
        invalid[pos] = True
        records.append(failure_record(labels[pos], offset + pos, column, check, value, message))
    return SliceFailures(invalid, _tidy(records, frame_owners(schema)))


def _tidy(records: list[dict[str, Any]], owners: dict[str, str]) -> list[dict[str, Any]]:
    """Report each frame-level check once per row (or table), under the column it concerns.

    pandera repeats a frame-level check's failure for every column of the frame.
    """
    out: list[dict[str, Any]] = []
    chosen: dict[tuple[Any, str], int] = {}
    for rec in records:
        owner = owners.get(rec["check"])
        if owner is None:
            out.append(rec)
            continue
        key = (rec["position"], rec["check"])
        at = chosen.get(key)
        if at is None:
            chosen[key] = len(out)
            value = rec["value"] if rec["column"] == owner else None
            out.append({**rec, "column": owner, "value": value})
        elif rec["column"] == owner:
            out[at] = rec
    return out


class FailureLog:
    """The failures of one input, and the one way a failure is recorded on a row.

    A table-level failure (a missing or unknown column) is listed once but marks every row.
    """

    def __init__(self, book: RowBook) -> None:
        self.book = book
        self.records: list[dict[str, Any]] = []
        self._table_level: set[tuple[Any, ...]] = set()
        # rows each table-level failure marked, over every slice it was found in
        self.table_rows: Counter[tuple[str | None, str]] = Counter()

    def add(self, records: list[dict[str, Any]], start: int, n: int) -> None:
        """Note one slice's schema failures on its rows (``start`` .. ``start + n``)."""
        for rec in records:
            note = _note(rec["check"], rec["message"])
            if rec["position"] is None:
                key = (rec["column"], rec["check"])
                self.table_rows[key] += n
                if key not in self._table_level:
                    self._table_level.add(key)
                    self.records.append(rec)
                for p in range(start, start + n):
                    self.book.add_error(p, note)
            else:
                self.records.append(rec)
                self.book.add_error(rec["position"], note)

    def fail(
        self,
        position: int,
        column: str | None,
        check: str,
        value: Any,
        message: str,
        state: RowState | None = RowState.INVALID,
    ) -> None:
        """Record a failure found after the schema ran (a duplicate, a ledger conflict)."""
        label = self.book.labels[position]
        self.records.append(failure_record(label, position, column, check, value, message))
        if state is not None:
            self.book.set([position], state)
        self.book.add_error(position, _note(check, message))


def _note(check: str, message: str) -> str:
    return f"[{check}] {message}"


def _pandera_broke_on_a_value(cases: pd.DataFrame) -> bool:
    # a check that raised is reported table-level with the error text as its value;
    # column names are failure values too, so those checks are left out
    own = ~cases["check"].isin(["column_in_schema", "column_in_dataframe"])
    table_level = cases[cases["index"].isna() & own]
    return bool(
        table_level["failure_case"]
        .astype(object)
        .map(lambda v: any(sign in str(v) for sign in _REPORTING_BROKE))
        .any()
    )


_REPORTING_BROKE = ("surrogates not allowed", "UnicodeEncodeError", "maximum recursion depth")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def failure_record(
    row: Any, position: int | None, column: str | None, check: str, value: Any, message: str
) -> dict[str, Any]:
    return {
        "row": row,
        "position": position,
        "column": column,
        "check": require(check),
        "value": value,
        "message": message,
    }


def failure_line(position: Any, row: Any, column: Any, message: str) -> str:
    """One failure for a person: ``row 6, phone: ...``; a table-level one is its message."""
    if position is None or position is pd.NA:
        return message  # it names its column, and concerns every row
    where = f"row {row_label(row)}"
    return f"{where}, {column}: {message}" if isinstance(column, str) else f"{where}: {message}"


def failures_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """``report.failures``: pandas' nullable dtypes (``<NA>`` where a failure concerns the
    whole table, or has no value); ``value`` as people read it (``value_text``)."""
    labels = [pd.NA if r["row"] is None else r["row"] for r in records]
    return pd.DataFrame(
        {
            "row": _labels(labels),
            "position": pd.array([r["position"] for r in records], dtype="Int64"),
            "column": pd.array([r["column"] for r in records], dtype="string"),
            "check": pd.array([r["check"] for r in records], dtype="string"),
            "value": pd.array([value_text(r["value"]) for r in records], dtype="string"),
            "message": pd.array([r["message"] for r in records], dtype="string"),
        },
        columns=FAILURE_COLUMNS,
    )


def _labels(labels: list[Any]) -> Any:
    """Row labels as a nullable array: ``Int64`` or ``string`` when they are all of a kind."""
    try:
        array = pd.array(labels)
    except (TypeError, ValueError):
        array = pd.array(labels, dtype=object)
    if array.dtype == object and all(isinstance(v, str) for v in labels if v is not pd.NA):
        array = pd.array(labels, dtype="string")
    return array


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
    ) -> None:
        self.kind = kind
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
    ) -> GateVerdict:
        """The data-quality gate's verdict on this report, with its reasons.

        ``max_invalid``: fail above this many invalid rows (``10``) or this share of the
        rows (``"0.5%"``); unset, any invalid row fails. ``warn_invalid``: warn above it
        (unset: any invalid row within ``max_invalid`` warns). ``warn_on``: checks whose
        failures only warn (their rows stay invalid and unsent, but do not count against
        ``max_invalid``). ``verdict.status`` is ``"pass"``, ``"warn"`` or ``"fail"``;
        ``verdict.exit_code`` is the command line's (0, or 1 when it fails).
        """
        options = GateOptions(max_invalid=max_invalid, warn_invalid=warn_invalid, warn_on=warn_on)
        warned_checks = tuple(options.warn_on or ())
        for check in warned_checks:
            check_of_kind(check, self.kind)
        invalid, warned = counted_rows(self, warned_checks)
        return judge(self.n_rows, invalid, warned, options)

    def to_json(
        self,
        *,
        max_invalid: ThresholdArg = None,
        warn_invalid: ThresholdArg = None,
        warn_on: Sequence[str] | None = None,
        first: int = FIRST_FAILURES,
    ) -> str:
        """The report as the JSON document of contract ``v1`` (its JSON Schema:
        ``docs/reference/validation-report.v1.schema.json``): the gate's verdict (judged as
        :meth:`gate` judges), counts per state, per check and per column, the first
        ``first`` failures with their row labels (and file and line, for CSV and NDJSON
        rows), the notes, the input's fingerprint, the package and contract versions."""
        verdict = self.gate(max_invalid=max_invalid, warn_invalid=warn_invalid, warn_on=warn_on)
        return dumps(document(self, verdict, first=first))

    def summary(self) -> str:
        """Rows valid and invalid, failures by check, the first five failures."""
        lines = [
            f"{self.kind}: {self.n_rows} rows, {self.n_valid} valid, {self.n_invalid} invalid"
            + (
                f", {self.duplicates} exact duplicate{'s' if self.duplicates != 1 else ''}"
                " (sent once)"
                if self.duplicates
                else ""
            )
        ]
        lines.extend(f"note: {note['message']}" for note in self.notes)
        if not self.failures.empty:
            counts = self.failures["check"].value_counts()
            lines.append("failures by check: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
            for rec in self.failures.head(5).itertuples(index=False):
                line = failure_line(rec.position, rec.row, rec.column, str(rec.message))
                lines.append(f"  {line}")
            if len(self.failures) > 5:
                lines.append(f"  ... {len(self.failures) - 5} more in .failures")
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
            write_rows(frame, path)
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
        [" | ".join(common_reasons + reasons.get(p, [])) for p in positions.tolist()],
        dtype="string",
    )
    return out


def write_rows(frame: pd.DataFrame, path: str | os.PathLike[str], *, labels: bool = True) -> Path:
    """Write ``frame`` with its row labels (first column ``row``; none without ``labels``)
    as CSV or Parquet."""
    target = Path(path)
    suffixes = [s.lower() for s in target.suffixes]
    if ".parquet" not in suffixes and ".csv" not in suffixes:
        raise ConfigurationError(f"{target}: use a .csv or .parquet file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    label = "row" if "row" not in frame.columns else "row_label"
    labelled = frame.rename_axis(label).reset_index() if labels else frame.reset_index(drop=True)
    if ".csv" in suffixes:
        # text cells hold objects and lists as people read them (value_text), not reprs
        labelled.assign(**_as_text(labelled, containers_only=True)).to_csv(target, index=False)
        return target
    try:
        labelled.to_parquet(target, index=False)
    except (pyarrow.ArrowException, TypeError, ValueError):
        # bad rows often mix types in one column (that is why they are bad): Parquet
        # columns cannot, so those columns are written as text (nulls stay null)
        labelled.assign(**_as_text(labelled)).to_parquet(target, index=False)
    return target


def _as_text(frame: pd.DataFrame, *, containers_only: bool = False) -> dict[str, pd.Series]:
    """The object columns of ``frame`` as ``value_text`` writes their cells (only those
    holding an object or a list, with ``containers_only``)."""
    out = {}
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object:
            continue
        if containers_only and not column.map(_container).any():
            continue
        out[str(name)] = pd.Series(
            pd.array([value_text(v) for v in column.tolist()], dtype="string"), index=frame.index
        )
    return out


def _container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | set | frozenset | np.ndarray)
