"""Running a schema on one slice of input, and the failures it finds: ``FailureLog`` (every
failure of a run, by row) and the failures frame a report shows."""

from __future__ import annotations

import warnings
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._core import (
    RowBook,
    RowState,
    echoed,
    row_label,
    shown,
    value_text,
)
from .._json import NO_PARSES, ParsedTexts, has_surrogate, mask_unreportable
from .._notebook import isolated_label
from .checks import require
from .pandera import full_validation, pa, schema_errors
from .schema import UnknownColumn, explanations, frame_owners, text_parses

if TYPE_CHECKING:
    pass

FAILURE_COLUMNS = ["row", "position", "column", "check", "value", "message"]


@dataclass
class SliceFailures:
    """Failures of one slice: ``invalid`` marks rows (by position in the slice) that failed;
    ``parsed``: the JSON-object texts the checks parsed, for the wire step."""

    invalid: np.ndarray
    records: list[dict[str, Any]] = field(default_factory=list)
    parsed: ParsedTexts = NO_PARSES


_ALL_NA_CONCAT = "The behavior of DataFrame concatenation with empty or all-NA entries"


def run_schema(
    df: pd.DataFrame,
    schema: pa.DataFrameSchema,
    offset: int,
    labels: pd.Index,
    *,
    masked: bool = False,
) -> SliceFailures:
    """Validate ``df`` (any index) and return per-row failures with messages, and what the
    checks parsed of its JSON-object texts (``_json.parsed``: the wire step writes from it).

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
    parses = text_parses(schema)
    collecting: AbstractContextManager[dict[str, Any]] = (
        parses.collecting() if parses is not None else nullcontext({})
    )
    with full_validation(), warnings.catch_warnings(), collecting as found:
        # pandera's failure report concatenates frames of which some are all NA, and pandas
        # 2.x warns that a later version types that concat differently: pandera's concat,
        # the same cases either way; under -W error it would turn a finding into a crash
        warnings.filterwarnings("ignore", message=_ALL_NA_CONCAT, category=FutureWarning)
        try:
            schema.validate(work, lazy=True, inplace=True)
            return SliceFailures(invalid, parsed=ParsedTexts(found))
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
    return SliceFailures(invalid, _tidy(records, frame_owners(schema)), ParsedTexts(found))


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
    """One failure for a person: ``row 6, phone: ...``; a table-level one is its message.
    What the input wrote (label, column, message) is made harmless here (``echoed``), and
    only then is a right-to-left label isolated: the isolates are ours, balanced."""
    message = echoed(message)
    if position is None or position is pd.NA:
        return message  # it names its column, and concerns every row
    where = f"row {isolated_label(echoed(str(row_label(row))))}"
    if isinstance(column, str):
        return f"{where}, {echoed(column)}: {message}"
    return f"{where}: {message}"


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
