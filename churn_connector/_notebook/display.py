"""HTML for notebooks: how a ValidationReport and a SendResult look in Jupyter.

Compact and styled with inline CSS only: no scripts, no stylesheet, nothing fetched, so it
looks the same in JupyterLab, Notebook, VS Code and a notebook saved as HTML, in light and
dark themes: text keeps the theme's colour (muted text is the same colour, fainter), each
state its colour and mark (``palette``), and rows a transparent background, so the
notebook's striping and hover never make one row look highlighted. The size is bounded
whatever the input: counts by state, a few groups of failures with one example each, every
text trimmed, so a million bad rows render like ten. Every number shown is one the frames
give back (``report.failures``, ``res.rows``). Nothing technical by default (byte counts,
whole responses): the hint at the bottom points to the frames that have it. Only counts,
check names, row labels, validation messages and the API's (scrubbed) messages reach this
module; never a key.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .palette import COLOURS, ORDER, STATES, WORST_FIRST
from .reasons import (
    MAX_GROUPS,
    TEXT_LIMIT,
    UNDELIVERED,
    beyond,
    fit,
    label_text,
    middle_cut,
    plural,
    reason_groups,
)

NAME_LIMIT = 24  # characters of a column name in a group's detail
NAMES_SHOWN = 2  # column names a group lists before "+N more"
_TEXT = "\ufe0e"  # a mark is text, never an emoji picture

_BOX = (
    "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:13px;"
    "line-height:1.45;max-width:72em;padding:2px 0"
)
_TABLE = "border-collapse:collapse;margin:4px 0 8px 0;border:none;table-layout:auto"
_ROW = "background:transparent"  # Jupyter stripes and hovers table rows: not these
_CELL = "padding:2px 12px 2px 0;text-align:left;vertical-align:top;border:none"
_NUM = "padding:2px 12px 2px 0;text-align:right;vertical-align:top;border:none"
_HEAD = f"{_ROW};border-bottom:1px solid rgba(127,127,127,.35)"  # the header row
# the theme's text colour, fainter: >= 4.5:1 on light and dark themes alike
MUTED_OPACITY = 0.72
_MUTED = "opacity:.72"
# a long text wraps in its cell, whole: nothing is hidden by a line clamp or an ellipsis,
# and a long word (an id, a path) breaks rather than widen the table past a narrow window
_WRAP = "overflow-wrap:anywhere"


def esc(value: Any, limit: int = TEXT_LIMIT) -> str:
    """``value`` as fitted (``fit``), escaped text (one line)."""
    return html.escape(fit(str(value), limit))


def bdi(text: str, direction: str = "auto") -> str:
    """Escaped ``text`` in a bidi isolate: right-to-left text (a Hebrew label, an Arabic
    message) keeps its own order without moving the words and numbers around it."""
    return f'<bdi dir="{direction}">{html.escape(text)}</bdi>'


def where_text(label: str | None) -> str:
    """``row <label>`` (the label isolated left to right, as ``name:row`` is built, so its
    row number stays at its end), or ``whole table``."""
    return "whole table" if label is None else f"row {bdi(label, 'ltr')}"


def _percent(share: float) -> str:
    # never round a share that is not all (or not nothing) to 100.0% (or 0.0%)
    if 0 < share < 0.0005:
        return "<0.1%"
    if 0.9995 <= share < 1:
        return ">99.9%"
    return f"{share:.1%}"


def mark(state: str) -> str:
    """The state's mark, in its colour."""
    style = STATES[state]
    return f'<span style="color:{style.colour}">{style.mark}{_TEXT}</span>'


def _bar(share: float, colour: str) -> str:
    width = 0.0 if share <= 0 else max(share * 100, 0.5)
    return (
        '<div style="width:140px;height:8px;margin-top:5px;border-radius:2px;'
        'background:rgba(127,127,127,.18)">'
        f'<div style="width:{width:.1f}%;height:8px;border-radius:2px;background:{colour}">'
        "</div></div>"
    )


def _row(cells: str) -> str:
    return f'<tr style="{_ROW}">{cells}</tr>'


def counts_table(
    rows: Iterable[tuple[str, int]],
    total: int,
    notes: Mapping[str, str],
    *,
    reasons_below: bool = False,
) -> str:
    """One line per state: its mark, name, rows, share of ``total``, a bar, what it means;
    ``reasons_below``: the reasons are listed under it, and the undelivered states say so
    (never a pointer to reasons that are not shown)."""
    lines = []
    for name, n in rows:
        share = n / total if total else 0.0
        meaning = notes.get(name, STATES[name].meaning)
        if reasons_below and n and name in UNDELIVERED:
            meaning += " (reasons below)"
        lines.append(
            _row(
                f'<td style="{_CELL};white-space:nowrap">{mark(name)} '
                f"{esc(name)}</td>"
                f'<td style="{_NUM}">{n:,}</td>'
                f'<td style="{_NUM};{_MUTED}">{html.escape(_percent(share))}</td>'
                f'<td style="{_CELL}">{_bar(share, COLOURS[name])}</td>'
                f'<td style="{_CELL};{_MUTED}">'
                f"{esc(meaning)}</td>"
            )
        )
    return f'<table style="{_TABLE}">{"".join(lines)}</table>'


@dataclass(frozen=True)
class Group:
    """Failures that share a reason: how many, and one example."""

    reason: str
    detail: str  # HTML: the columns (report) or the row state (send result)
    count: int
    example_row: str | None  # the example's row label (None: the whole table)
    example: str


@dataclass(frozen=True)
class Groups:
    """Failure groups, largest first, and what the lines under them count.

    ``more``: what the groups beyond the shown ones hold (failures, or distinct rows);
    ``several``: rows counted under more than one reason.
    """

    groups: list[Group] = field(default_factory=list)
    more: int = 0
    several: int = 0


def groups_table(title: str, found: Groups, unit: str, where: str, frame: str) -> str:
    """The first groups (largest first) with an example each, then "… and N more reasons
    (M <unit>)" for those not shown."""
    groups = found.groups
    if not groups:
        return ""
    shown = groups[:MAX_GROUPS]
    cells = "".join(f'<th style="{_CELL}">{h}</th>' for h in ("reason", where, unit, "example"))
    head = f'<tr style="{_HEAD}">{cells}</tr>'
    body = "".join(
        _row(
            f"{_reason_cell(g.reason)}"
            f'<td style="{_CELL};white-space:nowrap">{g.detail}</td>'
            f'<td style="{_NUM}">{g.count:,}</td>{_example_cell(g)}'
        )
        for g in shown
    )
    lines = []
    hidden = len(groups) - len(shown)
    if hidden:
        held = f"{found.more:,} {unit.removesuffix('s') if found.more == 1 else unit}"
        lines.append(f"… and {plural(hidden, 'more reason')} ({held}) in {code(frame)}")
    if found.several:
        lines.append(
            f"a row with several reasons is counted under each "
            f"({plural(found.several, 'row')} {'has' if found.several == 1 else 'have'} "
            "more than one)"
        )
    extra = "".join(f'<div style="{_MUTED}">{line}</div>' for line in lines)
    return (
        f'<div style="font-weight:600;margin-top:6px">{esc(title)}</div>'
        f'<table style="{_TABLE}">{head}{body}</table>{extra}'
    )


def _reason_cell(reason: str) -> str:
    # a check name stays on its line; an error's own text wraps, whole
    if " " not in reason:
        return f'<td style="{_CELL};white-space:nowrap"><code>{bdi(fit(reason))}</code></td>'
    return f'<td style="{_CELL};{_WRAP}">{bdi(fit(reason))}</td>'


def _example_cell(group: Group) -> str:
    where = f'<span style="{_MUTED};white-space:nowrap">{where_text(group.example_row)}</span>'
    if not group.example or group.reason.endswith(group.example):  # the reason says it all
        return f'<td style="{_CELL}">{where}</td>'
    return f'<td style="{_CELL};{_WRAP}">{where}: {bdi(fit(group.example))}</td>'


def page(state: str, title: str, sections: Sequence[str], hints: Sequence[str]) -> str:
    """The whole repr: a headline marked like ``state``, its sections, what to call next."""
    hint = " · ".join(hints)
    return (
        f'<div style="{_BOX}">'
        f'<div style="font-weight:600;font-size:14px">{mark(state)} {esc(title, 200)}</div>'
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


def columns_text(names: Sequence[str]) -> str:
    """The first column names, each trimmed, and how many more: the count is never cut."""
    if not names:
        return "—"
    shown = ", ".join(esc(middle_cut(n, NAME_LIMIT), NAME_LIMIT) for n in names[:NAMES_SHOWN])
    rest = len(names) - NAMES_SHOWN
    return shown + (f' <span style="white-space:nowrap">+{rest:,} more</span>' if rest > 0 else "")


def check_groups(failures: pd.DataFrame) -> Groups:
    """Failures by check, largest first, each with its columns and its first failure."""
    if failures.empty:
        return Groups()
    counts = failures["check"].astype(str).value_counts(sort=True)
    first = {str(r["check"]): r for r in failures.drop_duplicates("check").to_dict("records")}
    columns: dict[str, list[str]] = {}
    pairs = failures[["check", "column"]].dropna().astype(str).drop_duplicates()
    for check, column in zip(pairs["check"].tolist(), pairs["column"].tolist(), strict=True):
        columns.setdefault(check, []).append(column)
    groups = []
    for check, count in counts.items():
        example = first[str(check)]
        where = None if pd.isna(example["position"]) else label_text(example["row"])
        groups.append(
            Group(
                str(check),
                columns_text(columns.get(str(check), [])),
                int(count),
                where,
                str(example["message"]),
            )
        )
    more = int(counts.iloc[MAX_GROUPS:].sum())  # one failure is one check's: no overlap
    return Groups(groups, more)


_QUARANTINE = 'report.quarantine("bad_rows.csv")'


def report_html(
    kind: str,
    n_rows: int,
    n_invalid: int,
    duplicates: int,
    failures: pd.DataFrame,
    remarks: Sequence[Mapping[str, Any]] = (),
) -> str:
    send = "client.identify" if kind == "identities" else "client.send_events"
    if n_rows == 0 and failures.empty:
        return page(
            "skipped",
            f"{kind}: no rows",
            [f'<div style="{_MUTED}">the input holds no rows: nothing to validate or send</div>'],
            [f"{code(f'{send}(...)')} with a table that has rows"],
        )
    n_valid = n_rows - n_invalid
    states = [("valid", n_valid), ("invalid", n_invalid)]
    notes = {
        "valid": "ready to send"
        + (
            f" ({duplicates:,} exact repeat{'s' if duplicates != 1 else ''}, sent once)"
            if duplicates
            else ""
        ),
        "invalid": "never sent: fix the data",
    }
    groups = check_groups(failures)
    sections = [
        counts_table(states, n_rows, notes, reasons_below=bool(groups.groups)),
        notes_section(remarks),
        groups_table("Failures by check", groups, "failures", "column", "report.failures"),
    ]
    if failures.empty:
        everything = "the 1 row is valid" if n_rows == 1 else f"all {n_rows:,} rows valid"
        state, title = "sent", f"{kind}: {everything}"
        hints = [f"{code(f'{send}(report.valid)')} sends them"]
    else:
        state, title = "invalid", f"{kind}: {n_invalid:,} of {plural(n_rows, 'row')} invalid"
        hints = [
            f"{code('report.failures')} lists every failure",
            f"{code(_QUARANTINE)} writes the invalid rows with their reasons",
            f"{code(f'{send}(report.valid)')} sends the valid ones",
            f"{code('report.plot()')} charts the failures",
        ]
    return page(state, title, sections, hints)


# -- the send result -------------------------------------------------------------------------

_REQUEST_WORDS = {
    "sent": "accepted",
    "rejected": "rejected",
    "failed": "failed",
    "split": "split and re-sent",
    "dry_run": "built, not sent",
}


def undelivered_groups(
    status: np.ndarray, errors: Mapping[int, str], label: Callable[[int], Any]
) -> Groups:
    """Rows not delivered, grouped by reason (``reason_groups``), as the HTML shows them."""
    found, keys_of_pair, several = reason_groups(status, errors)
    more = beyond(found, keys_of_pair)
    groups = [
        Group(
            r.reason,
            f"{mark(r.state)} {esc(r.state)}",
            r.count,
            label_text(label(r.first)),
            r.example,
        )
        for r in found
    ]
    return Groups(groups, more, several)


def result_title(kind: str, n_rows: int, counts: Mapping[str, int], *, dry_run: bool) -> str:
    """The result's headline in words: ``events: 1,194 of 1,201 rows sent, 1 skipped``;
    ``dry run of events: 10 of 10 rows would be sent``; ``events: no rows``."""
    if n_rows == 0:
        return f"{'dry run of ' if dry_run else ''}{kind}: no rows"
    if dry_run:
        return (
            f"dry run of {kind}: {counts.get('would_send', 0):,} of "
            f"{plural(n_rows, 'row')} would be sent"
        )
    skipped = counts.get("skipped", 0)
    return f"{kind}: {counts.get('sent', 0):,} of {plural(n_rows, 'row')} sent" + (
        f", {skipped:,} skipped" if skipped else ""
    )


def headline_state(counts: Mapping[str, int], *, dry_run: bool) -> str:
    """The state whose mark and colour the headline wears: the worst one present."""
    if dry_run:
        return "would_send"
    return next((s for s in WORST_FIRST if counts.get(s, 0)), "sent")


def result_html(
    kind: str,
    n_rows: int,
    counts: Mapping[str, int],
    requests: Mapping[str, int],
    elapsed_s: float,
    groups: Groups,
    *,
    dry_run: bool,
    remarks: Sequence[Mapping[str, Any]] = (),
    retries: int = 0,
) -> str:
    hints = [
        f"{code('res.rows')}: one row per input row (status, message id, error)",
        f"{code('res.failures')}: the rows not delivered",
        f"{code('res.chunks')}: one row per request (HTTP status, attempts, timings, response)",
        f"{code('res.plot()')}",
    ]
    if n_rows == 0:
        title = result_title(kind, n_rows, counts, dry_run=dry_run)
        text = "the input holds no rows: nothing was sent"
        return page("skipped", title, [f'<div style="{_MUTED}">{text}</div>'], hints[:1])
    states = [(s, counts.get(s, 0)) for s in ORDER if counts.get(s, 0) or s == "sent"]
    if dry_run:
        states = [(s, n) for s, n in states if s != "sent" or n]
    n_requests = sum(requests.values())
    said = ", ".join(f"{n:,} {_REQUEST_WORDS.get(s, s)}" for s, n in sorted(requests.items()))
    if retries:
        said += f" ({retries:,} retr{'y' if retries == 1 else 'ies'})"
    timing = (
        f'<div style="{_MUTED}">{plural(n_requests, "request")}'
        f"{': ' + said if said else ''}; {elapsed_s:.2f} s</div>"
    )
    sections = [
        counts_table(states, n_rows, {}, reasons_below=bool(groups.groups)),
        timing,
        notes_section(remarks),
        groups_table("Rows not delivered, by reason", groups, "rows", "state", "res.failures"),
    ]
    title = result_title(kind, n_rows, counts, dry_run=dry_run)
    if counts.get("failed", 0):
        hints.insert(0, "failed rows are safe to re-send: run the same send again")
    return page(headline_state(counts, dry_run=dry_run), title, sections, hints)
