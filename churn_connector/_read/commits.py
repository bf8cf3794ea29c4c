"""Commit protocols: of the files in a folder, only those a job committed are its output.

Engines write beside the output what is not (yet) output, and say by convention what is:

* Hadoop and Spark (``FileOutputCommitter``): task attempts write under ``_temporary/``
  (``_temporary/0/_temporary/attempt_*/part-*``) and the job's commit moves them up; a
  ``_SUCCESS`` marker says the job finished. ``_temporary/`` is never read.
* Databricks (DBIO transactional commit): every file is written in place, named with its
  transaction (``part-00000-tid-<tid>-…``); ``_started_<tid>`` marks a transaction begun and
  ``_committed_<tid>``, JSON ``{"added": [...], "removed": [...]}``, lists the files it
  committed. A task that failed and was retried leaves its part behind, listed nowhere. In a
  folder that holds these markers, only the files some ``_committed_<tid>`` adds (and no
  later one removes) are read.
* Checksums (``.crc``), markers and hidden files: any name (of a file or of a folder on the
  way to it) starting with ``_`` or ``.`` is the engine's, not data.

A folder or a glob alike reads only what was committed; a ``**`` glob never descends into
``_`` or ``.`` folders.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._core import InputError

__all__ = ["committed", "hidden"]

log = logging.getLogger("churn_connector")
_STARTED, _COMMITTED = "_started_", "_committed_"


def hidden(relative: Path) -> bool:
    """Not data: a name on the way that starts with ``_`` or ``.``, or a checksum file."""
    return any(part.startswith((".", "_")) for part in relative.parts) or relative.suffix in (
        ".crc",
    )


def committed(files: Sequence[Path]) -> list[Path]:
    """``files`` without those a Databricks transaction did not commit (see the module)."""
    kept: list[Path] = []
    skipped: dict[Path, int] = {}
    listed: dict[Path, set[str] | None] = {}
    for path in files:
        folder = path.parent
        if folder not in listed:
            listed[folder] = _listed(folder)
        names = listed[folder]
        if names is None or path.name in names:
            kept.append(path)
        else:
            skipped[folder] = skipped.get(folder, 0) + 1
    for folder, count in skipped.items():
        log.info(
            "%s: %d part file(s) not listed in any %s<tid> (uncommitted or aborted tasks) "
            "left unread",
            folder,
            count,
            _COMMITTED,
        )
    return kept


def _listed(folder: Path) -> set[str] | None:
    """The file names the folder's ``_committed_<tid>`` markers commit (None: no markers)."""
    markers = [p for p in folder.iterdir() if p.name.startswith((_STARTED, _COMMITTED))]
    if not markers:
        return None
    if not any(m.name.startswith(_COMMITTED) for m in markers):
        started = min(m.name for m in markers)
        raise InputError(
            f"{folder} holds {started} but no {_COMMITTED}<tid>: the Databricks job writing "
            "it has not committed (it is still running, or it failed): read it once the job "
            "has committed",
            path=str(folder),
        )
    added: set[str] = set()
    removed: set[str] = set()
    for marker in sorted(markers):
        tid = marker.name.removeprefix(_COMMITTED)
        if marker.name.startswith(_STARTED) or not tid or tid.startswith("vacuum"):
            continue  # a transaction begun (its files count once committed), or a VACUUM's
        more, gone = _read_marker(marker)
        added.update(more)
        removed.update(gone)
    return added - removed


def _read_marker(marker: Path) -> tuple[Iterable[str], Iterable[str]]:
    try:
        content = json.loads(marker.read_text(encoding="utf-8"))
        added, removed = content.get("added", []), content.get("removed", [])
        if not all(isinstance(n, str) for n in [*added, *removed]):
            raise ValueError("file names must be strings")
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise InputError(
            f"{marker}: a Databricks commit marker that cannot be read ({exc}): which files "
            'its transaction committed is unknown (expected {"added": [...], "removed": '
            "[...]})",
            path=str(marker),
        ) from None
    return [Path(n).name for n in added], [Path(n).name for n in removed]
