"""Progress: a tqdm bar in notebooks and terminals, periodic log lines otherwise.

It counts rows, not requests: every input row once it has its final state (sent, invalid,
skipped, expired, ...), so a bar whose total is the input's length (when that is known up
front: ``_inputs.row_count``) moves to the end and its ETA means something. When the send
ends, the bar tells its outcome: it is filled to the rows delivered (sent or skipped as
already delivered), wears the colour and mark of the worst state present (``palette``, as
the result's headline does), says "delivered", "with failures" or "stopped", and lists the
rows by state: the numbers of ``res.counts`` (and, for a stopped run, of the exception's
``counts``, plus the rows never read).

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

# above this many rows, 1.23M reads better than 1234567
_SCALE_FROM = 100_000
_DELIVERED = ("sent", "skipped")


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
        "unit_scale": total is None or total >= _SCALE_FROM,
        "leave": True,
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

    def _finish(self, counts: dict[str, int], *, stopped: bool | None) -> None:
        pending = counts.pop("pending", 0)
        if stopped is None:
            stopped = pending > 0  # rows read but never finished: the run did not end
        counts["failed"] = counts.get("failed", 0) + pending  # as the stopped run books them
        read = sum(counts.values())
        unread = max((self.total or 0) - read, 0) if stopped else 0
        state, self.end = outcome(counts, stopped=stopped)
        bar = self._bar
        bar.n = sum(counts.get(s, 0) for s in _DELIVERED)  # filled to what was delivered
        if bar.total:
            # tqdm rounds 99.5% up to 100%: a share short of the whole never reads as it
            share = min(100 * bar.n // bar.total, 99 if bar.n < bar.total else 100)
            # the ETA and rate give way to the counts, which must not be cut off
            bar.bar_format = (
                f"{{desc}}: {share:3d}%|{{bar}}| {{n_fmt}}/{{total_fmt}} [{{elapsed}}{{postfix}}]"
            )
        else:
            bar.bar_format = "{desc}: {n_fmt} [{elapsed}{postfix}]"
        if in_jupyter_kernel():
            bar.ncols = None  # an output cell has no width to keep to: the line is whole
        bar.colour = COLOURS[state]
        bar.set_description_str(f"{self.desc} {MARKS[state]} {self.end}", refresh=False)
        bar.set_postfix_str(counts_text(counts, unread, self.retries), refresh=False)
        bar.refresh()

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
