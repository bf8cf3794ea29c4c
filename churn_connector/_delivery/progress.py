"""Progress: a tqdm bar in notebooks and terminals, periodic log lines otherwise.

It counts rows, not requests: every input row once it has its final state (sent, invalid,
skipped, expired, ...), so a bar whose total is the input's length (when that is known up
front: ``_inputs.row_count``) ends at 100% and its ETA means something.

In a Jupyter kernel the bar is a widget when ipywidgets is installed (the ``notebook``
extra); without it, a plain text bar on stdout: ``tqdm.auto`` would warn "IProgress not
found", and Jupyter paints stderr like an error. In a terminal, a text bar on stderr.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("churn_connector")

# above this many rows, 1.23M reads better than 1234567
_SCALE_FROM = 100_000


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


class Progress:
    """Counts finished rows; ``enabled=None`` picks a bar when interactive, log lines if not.

    ``done`` (when given) says how many rows have finished so far; it is asked at most every
    ``refresh_s`` seconds, so it may cost a little. Without it, ``update(n)`` adds ``n``.
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
    ) -> None:
        self.desc = desc
        self.total = total
        self.done = 0
        self._counter = done
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

    def close(self) -> None:
        with self._lock:
            if self._counter is not None:
                self._count(self._counter)
            if self._bar is not None:
                self._show()
                self._bar.close()

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
