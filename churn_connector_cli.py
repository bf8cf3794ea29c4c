"""The ``churn-connector`` program's first lines: quiet signals before the package loads.

The console script starts here, not in the package: importing churn_connector loads pandas
and pyarrow (half a second or more), and a Ctrl-C or SIGTERM in that time must end the
program as it does later, exit 130 / 143 without a traceback. Until the program's own
handlers take over (``churn_connector._cli.run``), a signal ends the process at once:
nothing has started that needs accounting for. A signal the caller ignores (``nohup``, a
shell's background job) stays ignored.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from types import FrameType

__all__ = ["run"]


def _stop_now(signum: int, frame: FrameType | None) -> None:
    os._exit(128 + signum)  # no file is open for writing yet: nothing to flush or finish


def run() -> int:
    """Take SIGINT and SIGTERM (where they are at Python's defaults), then load and run the
    program, handing them over to it."""
    taken = []
    for signum, default in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
    ):
        if signal.getsignal(signum) is default:
            signal.signal(signum, _stop_now)
            taken.append(signum)
    # Arrow's allocator (mimalloc) backs its arena with transparent huge pages where the
    # kernel allows them (THP "madvise"): a 2 MB page stays resident for one live buffer, and
    # a 3M-row dry run peaked ~15 MB higher. Read once, when pyarrow loads.
    os.environ.setdefault("MIMALLOC_ALLOW_THP", "0")
    # the package, only now that a signal during its import ends the process quietly
    from churn_connector._cli import run as program  # noqa: PLC0415

    try:
        return program(owned=taken)
    finally:
        # the program is done and has closed what it wrote; at exit the interpreter's last
        # collections would walk every object pandas, pyarrow and pandera made (0.3-0.5 s
        # here, a tenth of a 200k-row send): frozen, they are freed with the process
        gc.freeze()


if __name__ == "__main__":
    sys.exit(run())
