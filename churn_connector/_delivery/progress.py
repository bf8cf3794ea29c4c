"""Progress: a tqdm bar in notebooks and terminals, periodic log lines otherwise.

It counts rows, not requests: every input row once it has its final state (sent, invalid,
skipped, expired, ...), so a bar whose total is the input's length (when that is known up
front: ``_inputs.row_count``) moves to the end and its ETA means something. Numbers are
whole, with thousands separators (``1,994/2,001``). When the send ends, the bar speaks as
the result does: its delivered part (sent, or skipped as already delivered) in the colour
of ``sent``, the rest in the colours of the rows' states (``palette``), the rows never read
blank; "1,994 of 2,001 rows delivered", never a percentage (a finished run is not "99%");
its mark and word those of the worst state present ("delivered", "with failures",
"stopped"; "no rows" for an empty input, as the result's headline), and the rows by state:
the numbers of ``res.counts`` (and, for a stopped run, of the exception's ``counts`` and
message, plus the rows never read).

In a Jupyter kernel the bar is a widget when ipywidgets is installed (the ``notebook``
extra); without it, a plain text bar on stdout: ``tqdm.auto`` would warn "IProgress not
found", and Jupyter paints stderr like an error. For the same reason retries are shown in
the bar there (``retried``), and logged at INFO, not as WARNING lines on stderr; in a
terminal or a scheduler they are logged as WARNING lines, as before. In a terminal, a text
bar on stderr.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._notebook import COLOURS, MARKS, ORDER, WORST_FIRST

log = logging.getLogger("churn_connector")

_DELIVERED = ("sent", "skipped")
BAR_WIDTH = 30  # characters of a finished text bar, where the line's width is not known
_RUNNING = (
    "{desc}: {percentage:3.0f}%|{bar}| {n:,}/{total:,} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)
_RUNNING_UNKNOWN = "{desc}: {n:,} rows [{elapsed}, {rate_fmt}{postfix}]"


def _interactive() -> bool:
    try:
        # optional: present only in notebooks, so imported only when asked
        from IPython import get_ipython  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        if get_ipython() is not None:
            return True
    except ImportError:
        pass
    return sys.stderr.isatty()


def in_jupyter_kernel() -> bool:
    """Running in a Jupyter kernel (JupyterLab, Notebook, VS Code), where widgets can show."""
    return "ipykernel.zmqshell" in sys.modules


def widgets_available() -> bool:
    return importlib.util.find_spec("ipywidgets") is not None


def make_bar(desc: str, total: int | None) -> Any:
    """A tqdm bar for this place: a widget in a notebook, else text (see the docstring)."""
    options: dict[str, Any] = {
        "total": total,
        "desc": desc,
        "unit": " rows",
        "unit_scale": True,  # the rate: 12.3k rows/s; the counts are whole (bar_format)
        "leave": True,
        "bar_format": _RUNNING_UNKNOWN if total is None else _RUNNING,
    }
    # imported only when a bar is shown: tqdm.auto probes the notebook stack
    if in_jupyter_kernel() and not widgets_available():
        from tqdm.std import tqdm as text_bar  # noqa: PLC0415

        return text_bar(file=sys.stdout, ncols=100, **options)
    from tqdm.auto import tqdm  # noqa: PLC0415

    return tqdm(**options)


def outcome(counts: Mapping[str, int], *, stopped: bool) -> tuple[str, str]:
    """(state whose colour and mark the end wears, the word for it)."""
    if stopped:
        return "failed", "stopped"
    if not any(counts.values()):
        return "skipped", "no rows"  # as the result's headline says it
    worst = next((s for s in WORST_FIRST if counts.get(s, 0)), None)
    return (worst, "with failures") if worst else ("sent", "delivered")


def counts_text(counts: Mapping[str, int], unread: int = 0, retries: int = 0) -> str:
    """``1,993 sent · 1 skipped · 7 invalid``: the rows by state, in the palette's order."""
    parts = [f"{counts[s]:,} {s}" for s in ORDER if counts.get(s, 0)]
    if unread:
        parts.append(f"{unread:,} not read")
    if retries:
        parts.append(f"{retries:,} retr{'y' if retries == 1 else 'ies'}")
    return " · ".join(parts) or "no rows"


def segments(counts: Mapping[str, int], unread: int, width: int) -> list[tuple[str | None, int]]:
    """A finished bar's parts, ``width`` cells in all: (colour, cells) for the delivered
    rows (in ``sent``'s colour), then each undelivered state's, then the rows never read
    (None: blank). A state with rows gets a cell at least; cells are taken from the largest
    part so the parts add up to ``width``."""
    parts = [("sent", sum(counts.get(s, 0) for s in _DELIVERED))]
    parts += [(s, counts.get(s, 0)) for s in ORDER if s not in _DELIVERED and s != "would_send"]
    parts.append(("", unread))
    whole = sum(n for _, n in parts)
    if not whole:
        return [(None, width)]
    cells = [(name, max(1, round(width * n / whole)) if n else 0) for name, n in parts]
    excess = sum(c for _, c in cells) - width
    while excess:  # the largest part gives or takes what rounding got wrong
        k = max(range(len(cells)), key=lambda i: cells[i][1])
        step = 1 if excess > 0 else -1
        cells[k] = (cells[k][0], cells[k][1] - step)
        excess -= step
    return [(COLOURS[name] if name else None, c) for name, c in cells if c]


def text_bar(counts: Mapping[str, int], unread: int, width: int) -> str:
    """A finished bar as text: full blocks in each part's colour (24-bit ANSI, as tqdm
    colours its own bars), the rows never read as blanks."""
    out = []
    for colour, cells in segments(counts, unread, width):
        if colour is None:
            out.append(" " * cells)
        else:
            r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
            out.append(f"\x1b[38;2;{r};{g};{b}m{'█' * cells}\x1b[0m")
    return "".join(out)


def html_bar(counts: Mapping[str, int], unread: int) -> str:
    """A finished bar for a notebook's widget: the same parts, as inline-styled blocks."""
    whole = sum(c for _, c in segments(counts, unread, 1000))
    blocks = "".join(
        f'<div style="width:{100 * cells / whole:.2f}%;height:100%;'
        f'background:{colour or "transparent"}"></div>'
        for colour, cells in segments(counts, unread, 1000)
    )
    return (
        '<div style="display:flex;width:100%;min-width:120px;height:14px;margin-top:4px;'
        f'background:rgba(127,127,127,.18)">{blocks}</div>'
    )


class Progress:
    """Counts finished rows; ``enabled=None`` picks a bar when interactive, log lines if not.

    ``done`` (when given) says how many rows have finished so far; it is asked at most every
    ``refresh_s`` seconds, so it may cost a little. Without it, ``update(n)`` adds ``n``.
    ``counts`` (when given) gives the rows by state (``pending`` too): the bar's end reads it.
    """

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        enabled: bool | None = None,
        log_every_s: float = 10.0,
        done: Callable[[], int] | None = None,
        refresh_s: float = 0.2,
        counts: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self.desc = desc
        self.total = total
        self.done = 0
        self.retries = 0
        self._last_retry_drawn = 0.0
        self.end: str | None = None  # the outcome's word, once closed
        self.final: tuple[dict[str, int], int] | None = None  # the end's counts and unread
        self._widget_bar: str | None = None
        self._counter = done
        self._counts = counts
        self._bar: Any = None
        self._log_every = log_every_s
        self._refresh = refresh_s
        self._last_log = time.monotonic()
        self._last_count = 0.0
        self._lock = threading.Lock()
        if enabled is None:
            enabled = _interactive()
        if enabled:
            self._bar = make_bar(desc, total)
        # a notebook shows retries in the bar, not as log lines painted like errors
        self.takes_retries = in_jupyter_kernel()

    def update(self, n: int = 0) -> None:
        """``n`` more rows finished (called from sender threads)."""
        with self._lock:
            if self._counter is None:
                self.done += n
            elif time.monotonic() - self._last_count >= self._refresh:
                self._count(self._counter)
            else:
                return
            self._show()

    def retried(self, cause: str, wait: float, *, rate_limited: bool = False) -> None:
        """A request is retried (called from sender threads): said in the bar."""
        with self._lock:
            self.retries += 1
            if self._bar is None:
                return
            said = (
                f"rate limited: pausing {wait:.1f} s" if rate_limited else f"retrying after {cause}"
            )
            # drawn at once the first time (a retry storm can be over before the next row
            # count is drawn), then at most once a refresh interval
            now = time.monotonic()
            draw = self.retries == 1 or now - self._last_retry_drawn >= self._refresh
            if draw:
                self._last_retry_drawn = now
            self._bar.set_postfix_str(f"{said} ({self.retries:,} so far)", refresh=draw)

    def close(self, *, stopped: bool | None = None) -> None:
        """The send ended (``stopped``: part way; None: when rows were left unfinished):
        the bar says how (see the module's docstring)."""
        with self._lock:
            if self._counter is not None:
                self._count(self._counter)
            if self._bar is None:
                return
            self._show()
            if self._counts is not None:
                self._finish(dict(self._counts()), stopped=stopped)
            self._bar.close()
            if self._widget_bar is not None:
                self._paint_widget(self._widget_bar)

    def _paint_widget(self, drawn: str) -> None:
        """In a notebook's widget, the progress bar (one colour) gives way to the finished
        bar of parts (``html_bar``)."""
        # optional (the notebook extra): present, since the bar is its widget
        from ipywidgets import HTML  # type: ignore[import-untyped]  # noqa: PLC0415

        container = self._bar.container
        text, _, postfix = container.children
        container.children = (text, HTML(value=drawn, layout={"flex": "2"}), postfix)

    def _finish(self, counts: dict[str, int], *, stopped: bool | None) -> None:
        pending = counts.pop("pending", 0)
        if stopped is None:
            stopped = pending > 0  # rows read but never finished: the run did not end
        counts["failed"] = counts.get("failed", 0) + pending  # as the stopped run books them
        read = sum(counts.values())
        unread = max((self.total or 0) - read, 0) if stopped else 0
        state, self.end = outcome(counts, stopped=stopped)
        self.final = (dict(counts), unread)
        bar = self._bar
        delivered = sum(counts.get(s, 0) for s in _DELIVERED)
        bar.n = delivered  # filled to what was delivered
        # no percentage, no ETA, no rate: the counts say it, and must not be cut off
        said = (
            f"{delivered:,} of {read + unread:,} row{'' if read + unread == 1 else 's'} delivered"
        )
        widget = hasattr(bar, "container")  # tqdm.notebook's: a bar widget, HTML beside it
        if in_jupyter_kernel() or widget:
            bar.ncols = None  # an output cell has no width to keep to: the line is whole
        bar.set_description_str(f"{self.desc} {MARKS[state]} {self.end}", refresh=False)
        postfix = counts_text(counts, unread, self.retries)
        bar.set_postfix_str(postfix, refresh=False)
        if widget:
            bar.bar_format = f"{{desc}}: |{{bar}}| {said} [{{elapsed}}{{postfix}}]"
            bar.colour = COLOURS["sent"]
        elif read + unread == 0:
            bar.bar_format = "{desc} [{elapsed}]"
        else:
            line = f"{bar.desc}: || {said} [00:00, {postfix}]"
            room = (bar.ncols or 0) - len(line) if bar.ncols else BAR_WIDTH
            drawn = text_bar(counts, unread, max(min(room, BAR_WIDTH), 10))
            bar.bar_format = f"{{desc}}: |{drawn}| {said} [{{elapsed}}{{postfix}}]"
        bar.refresh()
        self._widget_bar = html_bar(counts, unread) if widget and read + unread else None

    def _count(self, counter: Callable[[], int]) -> None:
        self._last_count = time.monotonic()
        self.done = max(self.done, counter())

    def _show(self) -> None:
        if self._bar is not None:
            if self.done > self._bar.n:
                self._bar.update(self.done - self._bar.n)
        elif time.monotonic() - self._last_log >= self._log_every:
            self._last_log = time.monotonic()
            if self.total:
                log.info(
                    "%s: %s of %s rows done (%d%%)",
                    self.desc,
                    f"{self.done:,}",
                    f"{self.total:,}",
                    100 * self.done // self.total,
                )
            else:
                log.info("%s: %s rows done", self.desc, f"{self.done:,}")
