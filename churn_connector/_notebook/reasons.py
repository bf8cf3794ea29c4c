"""Why rows were not delivered, in words: the reasons that group them (the API's message with
its values masked, or a failed check), and the text helpers that keep a message readable
when cut (its values go first, never its fix) and in its place beside right-to-left text.
The notebook's HTML (``display``) and the summaries' text lines are both made from here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._core import RowState, row_label

MAX_GROUPS = 6  # failure groups shown; the rest are counted in one line
TEXT_LIMIT = 300  # characters of a message or reason (values cut first, never the fix)
VALUE_LIMIT = 24  # characters of a quoted value inside a message that is too long
LABEL_LIMIT = 40  # characters of a row label
UNDELIVERED = ("invalid", "rejected", "failed", "expired", "held")

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


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


_CHECKED = re.compile(r"\[([a-z0-9_]+)\] (.*?)(?=; \[[a-z0-9_]+\] |\Z)", re.DOTALL)
_HTTP = re.compile(r"HTTP \d{3}")
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
        more = beyond(found, keys_of_pair)
        lines.append(
            f"… and {plural(len(found) - MAX_GROUPS, 'more reason')} ({plural(more, 'row')}) "
            f"in {frame}"
        )
    if several:
        lines.append(
            f"a row with several reasons is counted under each ({plural(several, 'row')} "
            f"{'has' if several == 1 else 'have'} more than one)"
        )
    return lines


def beyond(found: list[Reason], keys_of_pair: list[tuple[list[tuple[str, str]], int]]) -> int:
    """The rows under the reasons beyond the first ``MAX_GROUPS`` (a row once)."""
    hidden = {r.key for r in found[MAX_GROUPS:]}
    return sum(count for keys, count in keys_of_pair if hidden.intersection(keys))
