"""The data-quality gate: how many invalid rows a run tolerates, which checks only warn, and
the verdict (pass, warn or fail) with its reasons and exit code.

A threshold is a number of rows (``10``, ``"10"``) or a share of the rows read (``"0.5%"``);
the gate fails when the invalid rows are *above* ``max_invalid`` and warns when they are
above ``warn_invalid`` (exactly at a threshold is within it). Without ``max_invalid`` any
invalid row fails, as ``validate`` always did. ``warn_on`` names checks whose failures
only warn: a row that fails those checks alone is still invalid (it is never sent, and it
goes to the quarantine), but it does not count against ``max_invalid``.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from .._core import ConfigurationError, ExitCode, declare, named, registered
from .checks import CHECKS, PLAN_PREFIX, family, info, is_registered
from .volume import GateCheck, TableFacts, parse_change, parse_lag, parse_range, table_checks

if TYPE_CHECKING:
    from .report import ValidationReport

ThresholdArg = int | str | None
"""A number of rows (``10``, ``"10"``) or a share of the rows (``"0.5%"``); None: unset."""
Status = Literal["pass", "warn", "fail"]

_SPELLING = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*")


@dataclass(frozen=True)
class Threshold:
    """A limit on invalid rows: ``rows`` of them, or ``percent`` of the rows read."""

    rows: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, value: Any, name: str = "max_invalid") -> Threshold:
        """``10``, ``"10"`` or ``"0.5%"`` (a ``ValueError`` for anything else)."""
        if isinstance(value, Threshold):
            return value
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(
                f"{named(name)} takes a number of rows (10) or a share of rows ('0.5%'), "
                f"not {value!r}"
            )
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"{named(name)} must not be negative, not {value}")
            return cls(rows=value)
        found = _SPELLING.fullmatch(value)
        if found is None:
            raise ValueError(
                f"{named(name)} takes a number of rows (10) or a share of rows (0.5%), "
                f"not {value!r}"
            )
        number, percent = found.groups()
        if percent:
            share = float(number)
            if share > 100:
                raise ValueError(f"{named(name)}: a share of rows is at most 100%, not {value}")
            return cls(percent=share)
        if "." in number:
            raise ValueError(
                f"{named(name)}: {value!r} is a fraction of a row; write a share as {number}%"
            )
        return cls(rows=int(number))

    def limit(self, rows: int) -> float:
        """The most invalid rows within this threshold, for an input of ``rows`` rows."""
        if self.rows is not None:
            return float(self.rows)
        assert self.percent is not None
        return rows * self.percent / 100

    def __str__(self) -> str:
        return str(self.rows) if self.rows is not None else f"{self.percent:g}%"


def _threshold_text(text: str) -> str:
    """A threshold's flag text, checked as the command line reads it."""
    Threshold.parse(text)
    return text


def _checked(parse: Any) -> Any:
    """A flag's text, checked by ``parse`` as the command line reads it (kept as written)."""

    def read(text: str) -> str:
        parse(text)
        return text

    return read


def _check_name(text: str) -> str:
    """A ``--warn-on`` name, checked as the command line reads it (a ValueError naming
    close matches)."""
    try:
        refuse_unknown_check(text)
    except ConfigurationError as exc:
        raise ValueError(exc.message) from None
    return text


@registered
@dataclass(frozen=True, kw_only=True)
class GateOptions:
    """What the gate tolerates: its thresholds and the checks that only warn."""

    max_invalid: ThresholdArg = declare(
        None,
        doc='fail above this many invalid rows (`10`) or this share of the rows (`"0.5%"`); '
        "unset: any invalid row fails ([Data-quality gate](../guides/ci-gate.md))",
        help="fail only above N invalid rows, or above N%% of the rows (default: any invalid "
        "row fails)",
        metavar="N[%]",
        parse=_threshold_text,
        shown_default="`None`: any invalid row fails",
        spark=False,
    )
    warn_invalid: ThresholdArg = declare(
        None,
        doc="warn above this many invalid rows, or this share (at or below it the gate passes "
        "without a warning); unset: any invalid row within `max_invalid` warns",
        help="warn only above N invalid rows, or above N%% of the rows",
        metavar="N[%]",
        parse=_threshold_text,
        spark=False,
    )
    warn_on: Sequence[str] | None = declare(
        None,
        doc="checks whose failures only warn: their rows stay invalid (never sent, "
        "quarantined) but do not count against `max_invalid`; a name, a tracking plan's "
        "family (`plan.minimum`) or a pattern (`plan.*`)",
        help="a check whose failures only warn (repeatable), e.g. --warn-on occurred_at_window; "
        "a tracking plan's rules by name or pattern: --warn-on 'plan.*'",
        metavar="CHECK",
        parse=_check_name,
        repeat=True,
        spark=False,
    )

    expect_rows: str | None = declare(
        None,
        doc="fail unless the rows read are within `MIN..MAX` (`1000..50000`; an end may be "
        "left open: `1000..`, `..50000`)",
        help="fail unless the rows read are within MIN..MAX (an end may be open: 1000..)",
        metavar="MIN..MAX",
        parse=_checked(parse_range),
        spark=False,
    )
    max_change: str | None = declare(
        None,
        doc="fail when the rows read differ by more than this share (`50%`) from the median "
        "of the last `history_runs` runs of the kind recorded in the receipts (`history`)",
        help="fail when the rows read differ by more than N%% from the median of the last "
        "--history-runs runs in the receipts (--history)",
        metavar="N%",
        parse=_checked(parse_change),
        spark=False,
    )
    history: str | None = declare(
        None,
        doc="the earlier runs `max_change` compares with: a `receipts.jsonl` (as `--receipts` "
        "writes it) or its folder, or a send's run history (`history`: SQLite, DuckDB, "
        "PostgreSQL, a Parquet folder)",
        flag="--history",  # one flag, one meaning: the run history send --history appends to
        shown_flag="`--history URI`",
        spark=False,
    )
    history_runs: int = declare(
        10,
        doc="how many of the latest complete runs in `history` give the median",
        help="the latest complete runs in --history whose median --max-change compares with",
        metavar="N",
        spark=False,
    )
    max_lag: str | None = declare(
        None,
        doc="events: fail when the newest valid `occurred_at` is older than this when "
        "validated (`6h`, `30m`, `2d`, `90s`)",
        help="events: fail when the newest valid occurred_at is older than this (6h, 30m, 2d)",
        metavar="DURATION",
        parse=_checked(parse_lag),
        spark=False,
    )

    def __post_init__(self) -> None:
        for name, parse in (
            ("expect_rows", parse_range),
            ("max_change", parse_change),
            ("max_lag", parse_lag),
        ):
            if getattr(self, name) is not None:
                try:
                    parse(getattr(self, name))
                except ValueError as exc:
                    raise ConfigurationError(str(exc)) from None
        if self.history is not None:
            object.__setattr__(self, "history", os.fspath(self.history))
        if self.max_change is not None and self.history is None:
            raise ConfigurationError(
                f"{named('max_change')} compares with earlier runs: give their receipts with "
                f"{named('history')} (the file send --receipts writes)"
            )
        if (
            isinstance(self.history_runs, bool)
            or not isinstance(self.history_runs, int)
            or (self.history_runs < 1)
        ):
            raise ConfigurationError(
                f"{named('history_runs')} must be a whole number of runs, at least 1, not "
                f"{self.history_runs!r}"
            )
        for name in ("max_invalid", "warn_invalid"):
            value = getattr(self, name)
            if value is not None:
                try:
                    Threshold.parse(value, name)
                except ValueError as exc:
                    raise ConfigurationError(str(exc)) from None
        if isinstance(self.warn_on, str):
            raise ConfigurationError(
                f"{named('warn_on')} takes a list of check names, not the text {self.warn_on!r}"
            )
        object.__setattr__(self, "warn_on", tuple(self.warn_on or ()))
        for check in self.warn_on or ():
            refuse_unknown_check(check)

    @property
    def thresholds(self) -> tuple[Threshold, Threshold]:
        """(``max_invalid``, ``warn_invalid``), unset ones at 0 rows."""
        fail = Threshold.parse(self.max_invalid) if self.max_invalid is not None else Threshold(0)
        warn = (
            Threshold.parse(self.warn_invalid, "warn_invalid")
            if self.warn_invalid is not None
            else Threshold(0)
        )
        return fail, warn


def warns(check: str, warn_on: Iterable[str]) -> bool:
    """Whether ``warn_on`` names ``check``: by its name, its family (``plan.minimum`` for
    ``plan.invoice_paid.amount.minimum``) or a pattern (``plan.*``)."""
    for name in warn_on:
        if name == check or name == family(check):
            return True
        if "*" in name and fnmatch.fnmatchcase(check, name):
            return True
    return False


def warned_mask(checks: pd.Series, warn_on: Iterable[str]) -> np.ndarray:
    """``warns`` for a column of check names (each distinct name judged once)."""
    warn = tuple(warn_on)
    codes, uniques = pd.factorize(checks.astype(str))
    judged = np.array([warns(str(u), warn) for u in uniques], dtype=bool)
    return judged[codes] if len(uniques) else np.zeros(len(checks), dtype=bool)


def refuse_unknown_check(check: Any) -> None:
    """A ConfigurationError for a name that is no registered check, naming close ones."""
    if isinstance(check, str) and is_registered(check):
        return
    if (
        isinstance(check, str)
        and "*" in check
        and (check.startswith(PLAN_PREFIX) or fnmatch.filter(CHECKS, check))
    ):
        return
    close = difflib.get_close_matches(str(check), list(CHECKS), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigurationError(
        f"{named('warn_on')}: {check!r} is no check's name{hint} (the names: "
        "docs/reference/checks.md)"
    )


@dataclass(frozen=True)
class GateVerdict:
    """The gate's decision on a report: ``status`` (``"pass"``, ``"warn"``, ``"fail"``),
    ``exit_code`` (0, or 1 when it fails), ``invalid`` (the invalid rows counted against
    the thresholds), ``warned`` (invalid rows whose checks only warn), ``rows`` (rows read),
    ``reasons`` (sentences) and the options it was given. ``passed`` is True unless it
    failed (warnings pass)."""

    status: Status
    exit_code: int
    invalid: int
    warned: int
    rows: int
    reasons: tuple[str, ...]
    max_invalid: str | None  # as given ("10", "0.5%"); None: unset
    warn_invalid: str | None
    warn_on: tuple[str, ...]
    gates: tuple[GateCheck, ...] = ()  # the table-level judgements asked for

    @property
    def passed(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON values (the JSON report's ``verdict``)."""
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "invalid_rows": self.invalid,
            "warned_rows": self.warned,
            "reasons": list(self.reasons),
            "max_invalid": self.max_invalid,
            "warn_invalid": self.warn_invalid,
            "warn_on": list(self.warn_on),
            "gates": [g.to_dict() for g in self.gates],
        }


def judge(
    rows: int,
    invalid: int,
    warned: int,
    options: GateOptions,
    table: TableFacts | None = None,
) -> GateVerdict:
    """The verdict for ``invalid`` counted rows (and ``warned`` warn-only ones) of ``rows``;
    with ``table``, the volume and freshness gates ``options`` asks for, too."""
    fail, warn = options.thresholds
    share = f" ({_percent(invalid, rows)} of {rows:,} rows)" if rows else ""
    reasons: list[str] = []
    status: Status = "pass"
    if invalid > fail.limit(rows):
        status = "fail"
        limit = "any" if options.max_invalid is None else f"more than {fail}"
        reasons.append(f"{_rows(invalid)}{share}: the gate fails on {limit}")
    elif invalid > warn.limit(rows):
        status = "warn"
        within = "" if options.max_invalid is None else f", within max_invalid {fail}"
        reasons.append(f"{_rows(invalid)}{share}{within}")
    if warned:
        if status == "pass":
            status = "warn"
        checks = ", ".join(options.warn_on or ())
        fail_ = "fails" if warned == 1 else "fail"
        reasons.append(
            f"{warned:,} {'row' if warned == 1 else 'rows'} {fail_} only checks that warn "
            f"({checks}): not sent"
        )
    gates = table_checks(options, table)
    for gate in gates:
        if gate.status == "fail":
            status = "fail"
            reasons.append(f"{gate.name}: {gate.message}")
        elif gate.value is None:  # nothing to judge by: said, not failed
            reasons.append(f"{gate.name}: {gate.message}")
    return GateVerdict(
        status=status,
        exit_code=int(ExitCode.INVALID if status == "fail" else ExitCode.OK),
        invalid=invalid,
        warned=warned,
        rows=rows,
        reasons=tuple(reasons),
        max_invalid=None if options.max_invalid is None else str(fail),
        warn_invalid=None if options.warn_invalid is None else str(warn),
        warn_on=tuple(options.warn_on or ()),
        gates=tuple(gates),
    )


def _rows(invalid: int) -> str:
    return f"{invalid:,} invalid {'row' if invalid == 1 else 'rows'}"


def _percent(part: int, whole: int) -> str:
    value = 100 * part / whole
    if 0 < value < 0.01:
        return "<0.01%"
    return f"{math.floor(value * 100) / 100:g}%"


def counted_rows(report: ValidationReport, warn_on: Iterable[str]) -> tuple[int, int]:
    """(invalid rows that count against the thresholds, invalid rows that only warn).

    A row only warns when every failure recorded on it is of a ``warn_on`` check; a
    table-level failure (a missing column) of another check makes every invalid row count.
    """
    warn = set(warn_on)
    n_invalid = report.n_invalid
    if not warn or not n_invalid:
        return n_invalid, 0
    failures = report.failures
    at_table = failures["position"].isna()
    table_checks = set(failures.loc[at_table, "check"].astype(str))
    if any(not warns(c, warn) for c in table_checks):
        return n_invalid, 0
    per_row = failures.loc[~at_table, ["position", "check"]]
    invalid = report.invalid_positions
    per_row = per_row[per_row["position"].isin(invalid)]
    blocking = ~warned_mask(per_row["check"], warn)
    by_row = pd.Series(blocking, index=per_row["position"].to_numpy()).groupby(level=0)
    any_blocking = by_row.any()
    warn_only = int((~any_blocking).sum())
    # invalid rows without a failure of their own: marked by the (warn-only) table-level ones
    unexplained = n_invalid - len(any_blocking)
    warned = warn_only + (unexplained if table_checks else 0)
    return n_invalid - warned, warned


def check_of_kind(check: str, kind: str) -> None:
    """Refuse a ``warn_on`` check that never applies to ``kind``."""
    if "*" in check:
        return  # a pattern: whichever checks it matches
    applies = info(check).applies_to
    if applies not in ("both", kind):
        raise ConfigurationError(
            f"{named('warn_on')}: {check!r} is a check of {applies}, not of {kind}"
        )
