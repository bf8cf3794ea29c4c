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
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._core import RowState, row_label
from .palette import COLOURS, ORDER, STATES, WORST_FIRST

MAX_GROUPS = 6  # failure groups shown; the rest are counted in one line
TEXT_LIMIT = 300  # characters of a message or reason (values cut first, never the fix)
VALUE_LIMIT = 24  # characters of a quoted value inside a message that is too long
LABEL_LIMIT = 40  # characters of a row label
NAME_LIMIT = 24  # characters of a column name in a group's detail
NAMES_SHOWN = 2  # column names a group lists before "+N more"
UNDELIVERED = ("invalid", "rejected", "failed", "expired", "held")
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
# a quoted value: what a message may lose first, for its fix to stay
_QUOTED = re.compile(rf"'[^']{{{VALUE_LIMIT},}}'|\"[^\"]{{{VALUE_LIMIT},}}\"")


def fit(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` on one line, at most about ``limit`` characters, cut where it tells least:
    first the quoted values it echoes (each cut in its middle to ``VALUE_LIMIT``), then, if
    still too long, its middle, so the start (the column) and the end (the fix) stay."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    text = _QUOTED.sub(lambda m: m[0][0] + middle_cut(m[0][1:-1], VALUE_LIMIT) + m[0][0], text)
    return middle_cut(text, limit)


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


def middle_cut(text: str, limit: int) -> str:
    """``text`` cut in the middle to ``limit`` characters: both ends tell the most."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def label_text(label: Any, limit: int = LABEL_LIMIT) -> str:
    """A row label cut to ``limit`` characters, keeping its row number: a part file's long
    name (``part-00000-1f2e…c000.snappy.parquet:42``) is cut in its middle."""
    text = " ".join(row_label(label).split())
    if len(text) <= limit:
        return text
    name, colon, number = text.rpartition(":")
    if colon and number.isdigit() and len(number) + 6 <= limit:
        return middle_cut(name, limit - len(number) - 1) + ":" + number
    return middle_cut(text, limit)


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


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


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
        lines.append(f"… and {_plural(hidden, 'more reason')} ({held}) in {code(frame)}")
    if found.several:
        lines.append(
            f"a row with several reasons is counted under each "
            f"({_plural(found.several, 'row')} {'has' if found.several == 1 else 'have'} "
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
        state, title = "invalid", f"{kind}: {n_invalid:,} of {_plural(n_rows, 'row')} invalid"
        hints = [
            f"{code('report.failures')} lists every failure",
            f"{code(_QUARANTINE)} writes the invalid rows with their reasons",
            f"{code(f'{send}(report.valid)')} sends the valid ones",
            f"{code('report.plot()')} charts the failures",
        ]
    return page(state, title, sections, hints)


# -- the send result -------------------------------------------------------------------------

_CHECKED = re.compile(r"\[([a-z0-9_]+)\] (.*?)(?=; \[[a-z0-9_]+\] |\Z)", re.DOTALL)
_HTTP = re.compile(r"HTTP \d{3}")
_REQUEST_WORDS = {
    "sent": "accepted",
    "rejected": "rejected",
    "failed": "failed",
    "split": "split and re-sent",
    "dry_run": "built, not sent",
}


# what varies between rows that share a reason: masked so those rows group together
_MASKS = (
    # a timestamp (the window's bounds, a server time): before its numbers are masked
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2})?"
        ),
        "<time>",
    ),
    # an id: a UUID, or a run of hex digits long enough to be one (a message id)
    (re.compile(r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b", re.IGNORECASE), "<id>"),
    # a number standing alone (an index, a count, a size), never digits inside a word
    (re.compile(r"(?<![\w.<])[-+]?\d+(?:[.,]\d+)*(?![\w>])"), "<n>"),
)


def normalised(message: str) -> str:
    """``message`` with what varies from row to row masked: timestamps (``<time>``), ids
    (``<id>``) and numbers (``<n>``), so rows the API refused for one reason group together
    whatever their values (``events[3]`` and ``events[7]``, 3 or 5 problems)."""
    text = " ".join(message.split())
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text


def reasons_of(error: str | None, state: str) -> list[tuple[str, str, str]]:
    """(reason, its text, example text) of one undelivered row's error: one per failed
    check for an invalid row (as the report groups them); else the error's own message:
    the reason is its text with the values masked (``normalised``), which rows share, and
    the example the row's own message. An answer's reason keeps its HTTP status: ``HTTP
    400: occurred_at: more than 30 days before server time``."""
    if not error:
        return [(state, state, "")]
    if state == "invalid":
        found = [(m.group(1), m.group(2)) for m in _CHECKED.finditer(error)]
        return [(k, k, v) for k, v in dict(found).items()] or [("invalid", "invalid", error)]
    text = " ".join(error.split())
    http = _HTTP.match(text)
    if http:
        said = text[http.end() :].lstrip(":; ").strip() or "the API said nothing more"
        return [(f"{http.group(0)}: {normalised(said)}", f"{http.group(0)}: {said}", said)]
    return [(normalised(text), text, text)]


@dataclass(frozen=True)
class Reason:
    """Undelivered rows that share a reason: the reason (its text when every row's is the
    same, else with the values masked), their state, how many, the first such row's
    position and its own text."""

    reason: str
    state: str
    count: int
    first: int
    example: str
    key: tuple[str, str]  # (the masked reason, the state): what the rows share


def reason_groups(
    status: np.ndarray, errors: Mapping[int, str], among: Sequence[str] = UNDELIVERED
) -> tuple[list[Reason], list[tuple[list[tuple[str, str]], int]], int]:
    """Rows not delivered, grouped by (reason, state), largest first; a row with several
    reasons (an invalid row failing two checks) is counted under each. Also returns each
    distinct error's (reason, state) keys with its rows, and the rows with several reasons.

    Vectorised over the rows: an interrupted million-row send has a million failed rows,
    but only a few distinct errors, each turned into reasons once.
    """
    codes = [int(RowState[s.upper()]) for s in among]
    positions = np.flatnonzero(np.isin(status, codes))
    texts = pd.Series([errors.get(p) for p in positions.tolist()], dtype=object)
    text_codes, texts_seen = pd.factorize(texts, use_na_sentinel=False)
    states = status[positions].astype(np.int64)
    pairs, first, counts = np.unique(
        text_codes.astype(np.int64) * len(RowState) + states, return_index=True, return_counts=True
    )
    # -> [count, first position, example, the reason's text (None: it varies)]
    found: dict[tuple[str, str], list[Any]] = {}
    keys_of_pair: list[tuple[list[tuple[str, str]], int]] = []
    several = 0
    for pair, at, count in zip(pairs.tolist(), first.tolist(), counts.tolist(), strict=True):
        error = texts_seen[pair // len(RowState)]
        state = RowState(pair % len(RowState)).label
        reasons = reasons_of(error if isinstance(error, str) else None, state)
        keys = [(reason, state) for reason, _, _ in reasons]
        keys_of_pair.append((keys, count))
        if len(keys) > 1:
            several += count
        p = int(positions[at])
        for key, (_, text, example) in zip(keys, reasons, strict=True):
            entry = found.get(key)
            if entry is None:
                found[key] = [count, p, example, text]
            else:
                entry[0] += count
                if p < entry[1]:
                    entry[1], entry[2] = p, example
                if entry[3] != text:
                    entry[3] = None
    ordered = sorted(found.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    reasons_found = [
        Reason(reason if text is None else text, state, count, first, example, (reason, state))
        for (reason, state), (count, first, example, text) in ordered
    ]
    return reasons_found, keys_of_pair, several


_RTL = frozenset(("R", "AL", "RLE", "RLO", "RLI"))


def isolated(text: str, *, ltr: bool = False) -> str:
    """``text`` between Unicode bidi isolates when it holds right-to-left characters
    (first-strong, or left-to-right for a row label ``name:row``), so a terminal shows the
    words and numbers around it in their places; other text is left as it is."""
    if not any(unicodedata.bidirectional(ch) in _RTL for ch in text):
        return text
    return ("\u2066" if ltr else "\u2068") + text + "\u2069"


def reason_lines(
    status: np.ndarray,
    errors: Mapping[int, str],
    label: Callable[[int], Any],
    frame: str = "res.failures",
) -> list[str]:
    """The reasons of the rows the API refused or that failed, as text (the summary's, the
    command line's): one line a reason, largest first, with its state, its rows and an
    example row, as the HTML groups them; then what the lines beyond the shown ones hold.
    Invalid rows are left to the validation report's lines, which list them by check."""
    found, keys_of_pair, several = reason_groups(status, errors, ("rejected", "failed"))
    lines = []
    for r in found[:MAX_GROUPS]:
        where = f"row {isolated(label_text(label(r.first)), ltr=True)}"
        example = "" if r.reason.endswith(r.example) else f": {isolated(fit(r.example))}"
        lines.append(f"{r.state} {r.count:,}: {isolated(fit(r.reason))} (e.g. {where}{example})")
    if len(found) > MAX_GROUPS:
        more = _beyond(found, keys_of_pair)
        lines.append(
            f"… and {_plural(len(found) - MAX_GROUPS, 'more reason')} ({_plural(more, 'row')}) "
            f"in {frame}"
        )
    if several:
        lines.append(
            f"a row with several reasons is counted under each ({_plural(several, 'row')} "
            f"{'has' if several == 1 else 'have'} more than one)"
        )
    return lines


def _beyond(found: list[Reason], keys_of_pair: list[tuple[list[tuple[str, str]], int]]) -> int:
    """The rows under the reasons beyond the first ``MAX_GROUPS`` (a row once)."""
    hidden = {r.key for r in found[MAX_GROUPS:]}
    return sum(count for keys, count in keys_of_pair if hidden.intersection(keys))


def undelivered_groups(
    status: np.ndarray, errors: Mapping[int, str], label: Callable[[int], Any]
) -> Groups:
    """Rows not delivered, grouped by reason (``reason_groups``), as the HTML shows them."""
    found, keys_of_pair, several = reason_groups(status, errors)
    more = _beyond(found, keys_of_pair)
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
            f"{_plural(n_rows, 'row')} would be sent"
        )
    skipped = counts.get("skipped", 0)
    return f"{kind}: {counts.get('sent', 0):,} of {_plural(n_rows, 'row')} sent" + (
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
        f'<div style="{_MUTED}">{_plural(n_requests, "request")}'
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
