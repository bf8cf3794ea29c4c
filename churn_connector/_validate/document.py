"""A validation report as machines read it: the JSON document (contract ``v1``, its JSON
Schema beside this module), and the counts per check and per column it is made of.

The document is a contract: fields are added in later versions of the package, never
renamed or removed within ``v1``; a change that would break a reader makes ``v2``. Its
schema ships in the package (``validation-report.v1.schema.json``) and in the docs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from ..__version__ import __version__
from .._core import ECHO_CAP, Note
from .._read import Source
from .checks import CHECKS
from .gate import GateVerdict, warns

if TYPE_CHECKING:
    from .report import ValidationReport

CONTRACT_VERSION = "v1"
SCHEMA_FILE = f"validation-report.{CONTRACT_VERSION}.schema.json"
FIRST_FAILURES = 100  # failures listed in the document by default


def schema() -> dict[str, Any]:
    """The JSON Schema of the document (``validation-report.v1.schema.json``)."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def check_counts(
    failures: pd.DataFrame,
    table_rows: Mapping[tuple[str | None, str], int],
    warn_on: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Per check: rows that failed it, failures recorded, severity, the columns concerned."""
    per_row = failures[failures["position"].notna()]
    out: dict[str, dict[str, Any]] = {}
    for check, group in per_row.groupby(per_row["check"].astype(str), sort=False):
        out[str(check)] = {
            "rows": int(group["position"].nunique()),
            "failures": len(group),
            "columns": sorted({str(c) for c in group["column"].dropna()}),
        }
    for (column, check), rows in table_rows.items():
        entry = out.setdefault(check, {"rows": 0, "failures": 0, "columns": []})
        entry["rows"] += int(rows)
        entry["failures"] += 1
        if column is not None and column not in entry["columns"]:
            entry["columns"] = sorted([*entry["columns"], column])
    order = {name: k for k, name in enumerate(CHECKS)}
    return [
        {
            "check": check,
            "severity": "warning" if warns(check, warn_on) else "error",
            **entry,
        }
        for check, entry in sorted(out.items(), key=lambda kv: order.get(kv[0], len(order)))
    ]


def column_counts(
    failures: pd.DataFrame, table_rows: Mapping[tuple[str | None, str], int]
) -> list[dict[str, Any]]:
    """Per column (None: the table, or a whole row): rows with a failure there, failures."""
    per_row = failures[failures["position"].notna()]
    keyed = per_row["column"].astype(object).where(per_row["column"].notna(), None)
    out: dict[str | None, dict[str, int]] = {}
    for column, group in per_row.groupby(keyed.fillna("\x00"), sort=False):
        name = None if column == "\x00" else str(column)
        out[name] = {"rows": int(group["position"].nunique()), "failures": len(group)}
    for (column, _check), rows in table_rows.items():
        entry = out.setdefault(column, {"rows": 0, "failures": 0})
        entry["rows"] += int(rows)
        entry["failures"] += 1
    return [
        {"column": column, **entry}
        for column, entry in sorted(out.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]


def label_value(label: Any) -> int | str | None:
    """A row label as a JSON value: an integer stays one, anything else is its text."""
    if label is None or label is pd.NA:
        return None
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, int) and not isinstance(label, bool):
        return label
    return str(label)


def failure_items(
    report: ValidationReport, source: Source, warn_on: Sequence[str], first: int
) -> list[dict[str, Any]]:
    """The first ``first`` failures, each with its row label, file and line (text files)."""
    out = []
    warn = set(warn_on)
    for rec in report.failures.head(first).itertuples(index=False):
        at_table = rec.position is pd.NA
        file, line = (None, None) if at_table else source.locate(rec.row)
        if at_table and source.kind == "file":
            file = str(source.parts[0].path) if source.parts else None
        out.append(
            {
                "row": None if at_table else label_value(rec.row),
                "file": file,
                "line": line,
                "position": None if at_table else int(cast(int, rec.position)),
                "column": None if rec.column is pd.NA else str(rec.column),
                "check": str(rec.check),
                "severity": "warning" if warns(str(rec.check), warn) else "error",
                # echoed whole, a 100 MiB cell would make a 100 MiB report: capped
                "value": None if rec.value is pd.NA else _capped(str(rec.value)),
                "message": _capped(str(rec.message)),
            }
        )
    return out


def _capped(text: str) -> str:
    if len(text) <= ECHO_CAP:
        return text
    return f"{text[:ECHO_CAP]}… ({len(text) - ECHO_CAP:,} more characters)"


def report_document(
    report: ValidationReport, verdict: GateVerdict, *, first: int = FIRST_FAILURES
) -> dict[str, Any]:
    """The JSON document of ``report`` judged by ``verdict`` (see the module)."""
    source = report.source
    warn_on = verdict.warn_on
    notes: list[Note] = report.notes
    return {
        "contract_version": CONTRACT_VERSION,
        "package_version": __version__,
        "kind": report.kind,
        "input": {
            "path": source.path,
            "files": [
                {"name": p.name, "path": str(p.path), "format": p.format, "size": p.size}
                for p in source.parts
            ],
            "fingerprint": dict(report.fingerprint),
        },
        "verdict": verdict.to_dict(),
        "counts": {
            "rows": report.n_rows,
            "valid": report.n_valid,
            "invalid": report.n_invalid,
            "duplicates": report.duplicates,
            "failures": len(report.failures),
        },
        "checks": check_counts(report.failures, report.table_rows, warn_on),
        "columns": column_counts(report.failures, report.table_rows),
        "failures": failure_items(report, source, warn_on, first),
        "failures_listed": min(first, len(report.failures)),
        "notes": [dict(note) for note in notes],
        "wire_paths": dict(report.wire_paths),
    }


def dumps(doc: Mapping[str, Any]) -> str:
    """The document as JSON text (UTF-8 where it can be; a value holding a lone surrogate,
    which UTF-8 cannot encode, makes it ASCII with escapes)."""
    text = json.dumps(doc, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(doc, ensure_ascii=True, indent=2)
    return text + "\n"
