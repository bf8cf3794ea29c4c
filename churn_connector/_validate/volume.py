"""Volume and freshness: the gate's table-level judgements of a run that may be plausible row
by row and wrong as a whole.

* ``expect_rows`` (``"1000..50000"``, ``"1000.."``, ``"..50000"``): the rows read are within
  the range (both ends included);
* ``max_change`` (``"50%"``): the rows read differ from the median of the rows of the last
  ``history_runs`` runs of the same kind in the run history (``history``: a
  ``receipts.jsonl`` that ``--receipts`` writes, or its folder, or a send's ``--history``
  URI) by at most that share of the median. Runs that
  stopped part way (exit code 3 and above, ``complete`` false) are no measure and are left
  out; with no run to compare with, the gate says so and passes;
* ``max_lag`` (``"6h"``, ``"30m"``, ``"2d"``, ``"90s"``), events only: the newest valid
  ``occurred_at`` is at most that long before the validation.

Each is a named gate (``GateCheck.name``): its verdict entry, its reason (``"max_lag: ..."``),
its JUnit case and its GitHub annotation carry the name.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from .._core import ConfigurationError, named, read_runs

if TYPE_CHECKING:
    from .gate import GateOptions

__all__ = [
    "TABLE_GATES",
    "GateCheck",
    "TableFacts",
    "history_rows",
    "parse_change",
    "parse_lag",
    "parse_range",
    "table_checks",
]

TABLE_GATES = ("expect_rows", "max_change", "max_lag")
"""The gate's table-level judgements, by name."""
_RANGE = re.compile(r"\s*(\d[\d_,]*)?\s*\.\.\s*(\d[\d_,]*)?\s*")
_SHARE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%\s*")
_LAG = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_range(text: Any) -> tuple[int | None, int | None]:
    """``"MIN..MAX"`` (either end may be left open) as (min, max); a ValueError otherwise."""
    found = _RANGE.fullmatch(str(text)) if isinstance(text, str) else None
    if found is None or found.groups() == (None, None):
        raise ValueError(
            f"{named('expect_rows')} takes a range of rows, MIN..MAX ('1000..50000'; an end "
            f"may be left open: '1000..', '..50000'), not {text!r}"
        )
    low, high = (
        None if g is None else int(g.replace("_", "").replace(",", "")) for g in found.groups()
    )
    if low is not None and high is not None and low > high:
        raise ValueError(f"{named('expect_rows')}: {text!r} is empty (its MIN is above its MAX)")
    return low, high


def parse_change(text: Any) -> float:
    """``"50%"`` as 50.0 (a share of the median, any size); a ValueError otherwise."""
    found = _SHARE.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(
            f"{named('max_change')} takes a share of the earlier runs' median, as '50%', "
            f"not {text!r}"
        )
    return float(found.group(1))


def parse_lag(text: Any) -> float:
    """``"6h"``, ``"30m"``, ``"2d"``, ``"90s"`` in seconds; a ValueError otherwise."""
    found = _LAG.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(
            f"{named('max_lag')} takes a duration, a number and a unit (s, m, h, d): '6h', "
            f"'30m', '2d', not {text!r}"
        )
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def history_rows(path: str | os.PathLike[str], kind: str, runs: int) -> list[int]:
    """The rows read by the last ``runs`` complete runs of ``kind`` in the run history at
    ``path`` (receipts, as ``--receipts`` writes them, or a ``--history`` URI: SQLite,
    DuckDB, PostgreSQL, a Parquet folder), oldest first."""
    found: list[int] = []
    for receipt in read_runs(path):
        stopped = int(receipt.get("exit_code", 0)) >= 3 or receipt.get("complete") is False
        if receipt.get("kind") == kind and not stopped and isinstance(receipt.get("rows"), int):
            found.append(int(receipt["rows"]))
    return found[-runs:] if runs else []


@dataclass(frozen=True)
class TableFacts:
    """What the table-level gates judge: the kind, the rows read, the newest valid
    ``occurred_at`` (events; None: no valid event) and when the rows were validated."""

    kind: str
    rows: int
    newest: pd.Timestamp | None
    measured_at: pd.Timestamp


@dataclass(frozen=True)
class GateCheck:
    """One table-level judgement: its ``name`` (``expect_rows``, ``max_change``,
    ``max_lag``), ``status`` (``"pass"`` or ``"fail"``), what was measured (``value``),
    the limit (``limit``, as given) and the sentence that says it (``message``)."""

    name: str
    status: Literal["pass", "fail"]
    value: Any
    limit: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.name,
            "status": self.status,
            "value": self.value,
            "limit": self.limit,
            "message": self.message,
        }


def table_checks(options: GateOptions, facts: TableFacts | None) -> list[GateCheck]:
    """The table-level judgements ``options`` asks for, on ``facts``."""
    out: list[GateCheck] = []
    if facts is None:
        return out
    rows = facts.rows
    if options.expect_rows is not None:
        low, high = parse_range(options.expect_rows)
        if low is not None and rows < low:
            out.append(
                _fail(
                    "expect_rows",
                    rows,
                    options.expect_rows,
                    f"{rows:,} rows read, fewer than the {low:,} expected: is the export complete?",
                )
            )
        elif high is not None and rows > high:
            out.append(
                _fail(
                    "expect_rows",
                    rows,
                    options.expect_rows,
                    f"{rows:,} rows read, "
                    f"more than the {high:,} expected: is a day exported twice?",
                )
            )
        else:
            out.append(
                GateCheck(
                    "expect_rows",
                    "pass",
                    rows,
                    options.expect_rows,
                    f"{rows:,} rows read, within {options.expect_rows}",
                )
            )
    if options.max_change is not None:
        out.append(_change(options, facts))
    if options.max_lag is not None:
        out.append(_lag(options.max_lag, facts))
    return out


def _fail(name: str, value: Any, limit: str, message: str) -> GateCheck:
    return GateCheck(name, "fail", value, limit, message)


def _change(options: GateOptions, facts: TableFacts) -> GateCheck:
    limit = str(options.max_change)
    share = parse_change(limit)
    assert options.history is not None  # GateOptions refuses max_change without it
    earlier = history_rows(options.history, facts.kind, options.history_runs)
    if not earlier:
        return GateCheck(
            "max_change",
            "pass",
            None,
            limit,
            f"no earlier complete {facts.kind} run in {os.fspath(options.history)} to compare "
            f"the {facts.rows:,} rows with",
        )
    median = statistics.median(earlier)
    change = (
        math.inf
        if median == 0 and facts.rows
        else (0.0 if median == 0 else 100 * abs(facts.rows - median) / median)
    )
    said = "∞" if math.isinf(change) else f"{change:.4g}%"
    runs = f"the median of the last {len(earlier)} {facts.kind} runs"
    value = None if math.isinf(change) else round(change, 4)
    if change > share:
        more = "more" if facts.rows > median else "fewer"
        return _fail(
            "max_change",
            value,
            limit,
            f"{facts.rows:,} rows read, {said} {more} than "
            f"{runs} ({median:,g}); at most {limit} allowed: check the export",
        )
    return GateCheck(
        "max_change",
        "pass",
        value,
        limit,
        f"{facts.rows:,} rows read, {said} from {runs} ({median:,g})",
    )


def _lag(limit: str, facts: TableFacts) -> GateCheck:
    if facts.kind != "events":  # GateOptions' users refuse it earlier; kept for safety
        raise ConfigurationError(f"{named('max_lag')} is for events (their occurred_at)")
    if facts.newest is None:
        return _fail(
            "max_lag",
            None,
            limit,
            "no valid event, so no occurred_at to judge the data's freshness by",
        )
    lag_s = (facts.measured_at - facts.newest).total_seconds()
    newest = facts.newest.isoformat().replace("+00:00", "Z")
    ago = _duration(lag_s)
    if lag_s > parse_lag(limit):
        return _fail(
            "max_lag",
            round(lag_s, 3),
            limit,
            f"the newest occurred_at, {newest}, is "
            f"{ago} old, more than {limit}: is the export stale?",
        )
    return GateCheck(
        "max_lag",
        "pass",
        round(lag_s, 3),
        limit,
        f"the newest occurred_at, {newest}, is {ago} old, within {limit}",
    )


def _duration(seconds: float) -> str:
    if seconds < 0:
        return "0s (it lies ahead)"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"
