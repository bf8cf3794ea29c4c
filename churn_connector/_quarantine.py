"""Quarantine: the invalid rows of a report with their reasons, as a frame or a file.

A data-quality gate sets bad rows aside for someone to fix: each invalid row as it was read
(every column, its row label) plus ``failed_checks`` (the check names, comma-separated) and
``reasons`` (the messages, which say what to fix, separated by `` | ``: messages may hold
semicolons). A failure of the whole table (a missing column) is a
reason of every row.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ._exceptions import ConfigurationError

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
    out["failed_checks"] = [
        ", ".join(dict.fromkeys(common_checks + checks.get(p, []))) for p in positions.tolist()
    ]
    out["reasons"] = [" | ".join(common_reasons + reasons.get(p, [])) for p in positions.tolist()]
    return out


def write_rows(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` with its row labels (first column ``row``) as CSV or Parquet."""
    target = Path(path)
    suffixes = [s.lower() for s in target.suffixes]
    if ".parquet" not in suffixes and ".csv" not in suffixes:
        raise ConfigurationError(f"{target}: use a .csv or .parquet file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    label = "row" if "row" not in frame.columns else "row_label"
    labelled = frame.rename_axis(label).reset_index()
    if ".csv" in suffixes:
        labelled.to_csv(target, index=False)
        return target
    try:
        labelled.to_parquet(target, index=False)
    except (pa.ArrowException, TypeError, ValueError):
        # bad rows often mix types in one column (that is why they are bad): Parquet
        # columns cannot, so those columns are written as text (nulls stay null)
        mixed = {c: labelled[c].map(_text) for c in labelled.columns if labelled[c].dtype == object}
        labelled.assign(**mixed).to_parquet(target, index=False)
    return target


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    return str(value)
