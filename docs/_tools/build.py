"""``make docs``: ``mkdocs build --strict`` with MkDocs's INFO lines left out, never a warning.

``mkdocs build --quiet`` cannot be used for that: it raises the log level to ERROR, so the
warnings are never logged, strict mode never counts them, and a broken link passes. This runs
MkDocs's own command line with the level at WARNING instead: every warning is shown and
fails the build, the INFO chatter (cleaning, cache hits, copied notebooks) is not printed.

    python docs/_tools/build.py [mkdocs build options: -f FILE, -d DIR, ...]
"""

from __future__ import annotations

import logging
import os
import sys

from mkdocs.__main__ import State, cli


def main(argv: list[str]) -> None:
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # mkdocs-material's notice about MkDocs 2
    # the command line's logging, which it finds here rather than making it
    state = State()  # type: ignore[no-untyped-call]  # mkdocs leaves __init__ unannotated
    state.logger.setLevel(logging.WARNING)
    cli.main(["build", "--strict", *argv], obj=state, prog_name="mkdocs")  # exits


if __name__ == "__main__":
    main(sys.argv[1:])
