"""Progress: a tqdm bar in notebooks and terminals, periodic log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("churn_connector")


def _interactive() -> bool:
    try:
        # optional: present only in notebooks, so imported only when asked
        from IPython import get_ipython  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        if get_ipython() is not None:
            return True
    except ImportError:
        pass
    return sys.stderr.isatty()


class Progress:
    """Counts finished rows; ``enabled=None`` picks a bar when interactive, log lines if not."""

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        enabled: bool | None = None,
        log_every_s: float = 10.0,
    ) -> None:
        self.desc = desc
        self.done = 0
        self._bar: Any = None
        self._log_every = log_every_s
        self._last_log = time.monotonic()
        if enabled is None:
            enabled = _interactive()
        if enabled:
            # imported only when a bar is shown: tqdm.auto probes the notebook stack
            from tqdm.auto import tqdm  # noqa: PLC0415

            self._bar = tqdm(total=total, desc=desc, unit="row", leave=True)

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif time.monotonic() - self._last_log >= self._log_every:
            self._last_log = time.monotonic()
            log.info("%s: %d rows done", self.desc, self.done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
