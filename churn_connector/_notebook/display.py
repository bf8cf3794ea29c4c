"""HTML for notebooks: how a ValidationReport and a SendResult look in Jupyter.

Compact and styled with inline CSS only: no scripts, no stylesheet, nothing fetched, so it
looks the same in JupyterLab, Notebook, VS Code and a notebook saved as HTML. The size is
bounded whatever the input: counts by state, a few groups of failures with one example
each, every text trimmed, so a million bad rows render like ten. Nothing technical by
default (responses, byte counts): the hint at the bottom points to the frames that have it.
Only counts, check names, row labels and validation messages reach this module; never a key.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._core.types import RowState

MAX_GROUPS = 6  # failure groups shown; the rest are counted in one line
TEXT_LIMIT = 140  # characters of a message or reason
LABEL_LIMIT = 40  # characters of a row label or column name

COLOURS = {
    "valid": "#1a7f37",
    "sent": "#1a7f37",
    "would_send": "#0969da",
    "skipped": "#6e7781",
    "invalid": "#bc4c00",
    "expired": "#9a6700",
    "rejected": "#cf222e",
    "failed": "#cf222e",
}
STATE_NOTES = {
    "sent": "acknowledged by the API",
    "would_send": "valid, ready to send",
    "skipped": "already delivered (ledger) or a repeat of an earlier row",
    "invalid": "never sent: see the reasons",
    "rejected": "the API refused them",
    "failed": "not delivered: safe to re-send",
    "expired": "aged out of the 30-day window before sending",
}
UNDELIVERED = ("invalid", "rejected", "failed", "expired")

_BOX = (
    "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:13px;"
    "line-height:1.45;max-width:60em;padding:2px 0"
)
_TABLE = "border-collapse:collapse;margin:4px 0 8px 0;border:none"
_CELL = "padding:2px 12px 2px 0;text-align:left;vertical-align:top;border:none"
_NUM = "padding:2px 12px 2px 0;text-align:right;vertical-align:top;border:none"
_HEAD = f"{_CELL};font-weight:600;border-bottom:1px solid rgba(127,127,127,.35)"
_MUTED = "color:#6e7781"


def esc(value: Any, limit: int = TEXT_LIMIT) -> str:
    """``value`` as trimmed, escaped text (one line)."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text)


def _percent(share: float) -> str:
    # never round a share that is not all (or not nothing) to 100.0% (or 0.0%)
    if 0 < share < 0.0005:
        return "<0.1%"
    if 0.9995 <= share < 1:
        return ">99.9%"
    return f"{share:.1%}"


def _swatch(colour: str) -> str:
    return (
        '<span style="display:inline-block;width:10px;height:10px;border-radius:2px;'
        f'margin-right:6px;background:{colour}"></span>'
    )


def _bar(share: float, colour: str) -> str:
    width = 0.0 if share <= 0 else max(share * 100, 0.5)
    return (
        '<div style="width:140px;height:8px;margin-top:5px;border-radius:2px;'
        'background:rgba(127,127,127,.18)">'
        f'<div style="width:{width:.1f}%;height:8px;border-radius:2px;background:{colour}">'
        "</div></div>"
    )


def counts_table(rows: Iterable[tuple[str, int]], total: int, notes: Mapping[str, str]) -> str:
    """One line per state: colour, name, rows, share of ``total``, a bar, what it means."""
    lines = []
    for name, n in rows:
        colour = COLOURS.get(name, "#6e7781")
        share = n / total if total else 0.0
        lines.append(
            f'<tr><td style="{_CELL};white-space:nowrap">{_swatch(colour)}'
            f"{esc(name.replace('_', ' '))}</td>"
            f'<td style="{_NUM}">{n:,}</td>'
            f'<td style="{_NUM};{_MUTED}">{html.escape(_percent(share))}</td>'
            f'<td style="{_CELL}">{_bar(share, colour)}</td>'
            f'<td style="{_CELL};{_MUTED}">{esc(notes.get(name, ""))}</td></tr>'
        )
    return f'<table style="{_TABLE}">{"".join(lines)}</table>'


@dataclass(frozen=True)
class Group:
    """Failures that share a reason: how many, and one example."""

    reason: str
    detail: str  # the columns (report) or the row state (send result)
    count: int
    example_row: str
    example: str


def groups_table(title: str, groups: Sequence[Group], unit: str, where: str, frame: str) -> str:
    """The first groups (largest first) with an example each, and "… and N more"."""
    if not groups:
        return ""
    shown = groups[:MAX_GROUPS]
    head = "".join(f'<th style="{_HEAD}">{h}</th>' for h in ("reason", where, unit, "example"))
    body = "".join(
        f'<tr><td style="{_CELL}"><code>{esc(g.reason, LABEL_LIMIT * 2)}</code></td>'
        f'<td style="{_CELL}">{esc(g.detail, LABEL_LIMIT * 2)}</td>'
        f'<td style="{_NUM}">{g.count:,}</td>'
        f'<td style="{_CELL}"><span style="{_MUTED}">{esc(g.example_row, LABEL_LIMIT)}:</span> '
        f"{esc(g.example)}</td></tr>"
        for g in shown
    )
    hidden = len(groups) - len(shown)
    more = sum(g.count for g in groups) - len(shown)  # each shown group shows one example
    extra = ""
    if more:
        across = f" (of {hidden:,} more reason{'s' if hidden != 1 else ''})" if hidden else ""
        extra = f'<div style="{_MUTED}">… and {more:,} more {unit}{across} in {code(frame)}</div>'
    return (
        f'<div style="font-weight:600;margin-top:6px">{esc(title)}</div>'
        f'<table style="{_TABLE}"><tr>{head}</tr>{body}</table>{extra}'
    )


def page(mark: str, colour: str, title: str, sections: Sequence[str], hints: Sequence[str]) -> str:
    """The whole repr: a headline, its sections, and what to call next."""
    hint = " · ".join(hints)
    return (
        f'<div style="{_BOX}">'
        f'<div style="font-weight:600;font-size:14px"><span style="color:{colour}">{mark}</span> '
        f"{esc(title, 200)}</div>"
        + "".join(sections)
        + f'<div style="{_MUTED};margin-top:4px">Next: {hint}</div></div>'
    )


def code(text: str) -> str:
    return f"<code>{html.escape(text)}</code>"


def notes_section(notes: Sequence[Mapping[str, Any]]) -> str:
    """The notes (what is worth knowing but is no failure), one sentence each: there are
    few (one per channel and kind at most), so all are shown."""
    if not notes:
        return ""
    items = "".join(
        f'<li style="margin:1px 0">{esc(n["message"], TEXT_LIMIT * 2)}</li>' for n in notes
    )
    return (
        f'<div style="font-weight:600;margin-top:6px">Notes</div>'
        f'<ul style="margin:2px 0 6px 0;padding-left:18px">{items}</ul>'
    )


# -- the validation report -------------------------------------------------------------------


def check_groups(failures: pd.DataFrame) -> list[Group]:
    """Failures by check, largest first, each with its columns and its first failure."""
    if failures.empty:
        return []
    counts = failures["check"].astype(str).value_counts(sort=True)
    first = {str(r["check"]): r for r in failures.drop_duplicates("check").to_dict("records")}
    columns: dict[str, list[str]] = {}
    pairs = failures[["check", "column"]].dropna().astype(str).drop_duplicates()
    for check, column in zip(pairs["check"].tolist(), pairs["column"].tolist(), strict=True):
        columns.setdefault(check, []).append(column)
    groups = []
    for check, count in counts.items():
        example = first[str(check)]
        names = columns.get(str(check), [])
        detail = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        where = "whole table" if pd.isna(example["position"]) else f"row {example['row']}"
        groups.append(Group(str(check), detail or "—", int(count), where, str(example["message"])))
    return groups


_QUARANTINE = 'report.quarantine("bad_rows.csv")'


def report_html(
    kind: str,
    n_rows: int,
    n_invalid: int,
    duplicates: int,
    failures: pd.DataFrame,
    remarks: Sequence[Mapping[str, Any]] = (),
) -> str:
    n_valid = n_rows - n_invalid
    states = [("valid", n_valid), ("invalid", n_invalid)]
    notes = {
        "valid": "ready to send"
        + (
            f" ({duplicates:,} exact repeat{'s' if duplicates != 1 else ''}, sent once)"
            if duplicates
            else ""
        ),
        "invalid": "never sent: see the reasons below",
    }
    sections = [counts_table(states, n_rows, notes), notes_section(remarks)]
    sections.append(
        groups_table(
            "Failures by check", check_groups(failures), "failures", "column", "report.failures"
        )
    )
    if failures.empty:
        mark, colour = "✔", COLOURS["valid"]
        title = f"{kind}: all {n_rows:,} rows valid"
        hints = [f"{code('client.send_events(report.valid)')} sends them"]
        if kind == "identities":
            hints = [f"{code('client.identify(report.valid)')} sends them"]
    else:
        mark, colour = "✘", COLOURS["invalid"]
        title = f"{kind}: {n_invalid:,} of {n_rows:,} rows invalid"
        send = "client.identify" if kind == "identities" else "client.send_events"
        hints = [
            f"{code('report.failures')} lists every failure",
            f"{code(_QUARANTINE)} writes the invalid rows with their reasons",
            f"{code(f'{send}(report.valid)')} sends the valid ones",
            f"{code('report.plot()')} charts the failures",
        ]
    return page(mark, colour, title, sections, hints)


# -- the send result -------------------------------------------------------------------------

_CHECK_NAMES = re.compile(r"\[([a-z0-9_]+)\]")
_HTTP = re.compile(r"HTTP \d{3}")
_REQUEST_WORDS = {
    "sent": "accepted",
    "rejected": "rejected",
    "failed": "failed",
    "split": "split and re-sent",
    "dry_run": "built, not sent",
}


def reason_of(error: str | None, state: str) -> tuple[str, str]:
    """(group key, example text) of one undelivered row's error: check names for invalid
    rows; the HTTP status, never the response body, for answers; else the error itself."""
    if not error:
        return state, ""
    if state == "invalid":
        checks = list(dict.fromkeys(_CHECK_NAMES.findall(error)))
        message = _CHECK_NAMES.sub("", error.split("; [")[0]).strip()
        return ", ".join(checks) or "invalid", message
    http = _HTTP.match(error)
    if http:
        return http.group(0), f"{http.group(0)} (the response is in res.chunks)"
    return error, error


def undelivered_groups(
    status: np.ndarray, errors: Mapping[int, str], label: Callable[[int], Any]
) -> list[Group]:
    """Rows not delivered, grouped by (reason, state), largest first.

    Vectorised over the rows: an interrupted million-row send has a million failed rows,
    but only a few distinct errors, each turned into a reason once.
    """
    codes = [int(RowState[s.upper()]) for s in UNDELIVERED]
    positions = np.flatnonzero(np.isin(status, codes))
    texts = pd.Series([errors.get(p) for p in positions.tolist()], dtype=object)
    text_codes, texts_seen = pd.factorize(texts, use_na_sentinel=False)
    states = status[positions].astype(np.int64)
    pairs, first, counts = np.unique(
        text_codes.astype(np.int64) * len(RowState) + states, return_index=True, return_counts=True
    )
    found: dict[tuple[str, str], list[Any]] = {}  # -> [count, first position, example]
    for pair, at, count in zip(pairs.tolist(), first.tolist(), counts.tolist(), strict=True):
        error = texts_seen[pair // len(RowState)]
        state = RowState(pair % len(RowState)).label
        reason, example = reason_of(error if isinstance(error, str) else None, state)
        entry = found.get((reason, state))
        p = int(positions[at])
        if entry is None:
            found[(reason, state)] = [count, p, example]
        else:
            entry[0] += count
            if p < entry[1]:
                entry[1], entry[2] = p, example
    ordered = sorted(found.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [
        Group(reason, state, count, f"row {label(first)}", example)
        for (reason, state), (count, first, example) in ordered
    ]


def result_html(
    kind: str,
    n_rows: int,
    counts: Mapping[str, int],
    requests: Mapping[str, int],
    elapsed_s: float,
    groups: Sequence[Group],
    *,
    dry_run: bool,
    remarks: Sequence[Mapping[str, Any]] = (),
) -> str:
    order = ["would_send", "sent", "skipped", *UNDELIVERED]
    states = [(s, counts.get(s, 0)) for s in order if counts.get(s, 0) or s == "sent"]
    if dry_run:
        states = [(s, n) for s, n in states if s != "sent" or n]
    n_requests = sum(requests.values())
    said = ", ".join(f"{n:,} {_REQUEST_WORDS.get(s, s)}" for s, n in sorted(requests.items()))
    timing = (
        f'<div style="{_MUTED}">{n_requests:,} request{"s" if n_requests != 1 else ""}'
        f"{': ' + said if said else ''}; {elapsed_s:.2f} s</div>"
    )
    sections = [
        counts_table(states, n_rows, STATE_NOTES),
        timing,
        notes_section(remarks),
        groups_table("Rows not delivered, by reason", groups, "rows", "state", "res.failures"),
    ]
    undelivered = counts.get("rejected", 0) + counts.get("failed", 0)
    if dry_run:
        mark, colour = "○", COLOURS["would_send"]
        title = (
            f"dry run of {kind}: {counts.get('would_send', 0):,} of {n_rows:,} rows would be sent"
        )
    else:
        mark, colour = "✔", COLOURS["sent"]
        if undelivered:
            mark, colour = "✘", COLOURS["failed"]
        elif counts.get("invalid", 0) or counts.get("expired", 0):
            mark, colour = "⚠", COLOURS["invalid"]
        skipped = counts.get("skipped", 0)
        title = f"{kind}: {counts.get('sent', 0):,} of {n_rows:,} rows sent" + (
            f", {skipped:,} skipped" if skipped else ""
        )
    hints = [
        f"{code('res.rows')}: one row per input row (status, message id, error)",
        f"{code('res.failures')}: the rows not delivered",
        f"{code('res.chunks')}: one row per request (HTTP status, attempts, timings, response)",
        f"{code('res.plot()')}",
    ]
    if counts.get("failed", 0):
        hints.insert(0, "failed rows are safe to re-send: run the same send again")
    return page(mark, colour, title, sections, hints)
