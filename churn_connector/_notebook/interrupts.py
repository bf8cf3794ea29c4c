"""An interrupted send in a notebook: one line, not a traceback through the package.

Pressing ■ (or Ctrl-C in IPython) while a send runs ends the cell with ``cc.Interrupted``,
whose message says what was delivered; IPython would print it under a chained traceback of
40 to 70 lines through the package's threads and waits. While a send runs in IPython, an
``Interrupted`` that reaches the prompt is shown as IPython shows an exception it was asked
to keep short: its one line, and the pointer to ``%tb``, which prints the whole traceback
(IPython keeps it in ``sys.last_traceback``). Nothing is installed where the user's shell
already has a handler of its own.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["short_interrupts"]


def _shown_short(
    shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
) -> None:
    shell.showtraceback((etype, value, tb), exception_only=True)


def short_interrupts(kind: type[BaseException]) -> None:
    """Show ``kind`` in one line in this IPython shell, if there is one and it has no
    handler of its own."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return
    shell = ipython.get_ipython()
    if shell is None:
        return
    mine = getattr(shell, "_churn_short", None)
    if shell.custom_exceptions and mine is None:
        return  # the user's own handler: left alone
    if mine is not kind:
        shell.set_custom_exc((kind,), _shown_short)
        shell._churn_short = kind
