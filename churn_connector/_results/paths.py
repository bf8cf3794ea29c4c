"""The files a run is asked to write, checked before it reads or sends anything.

A result path that resolves to the input (the same file by any spelling, a symbolic or a
hard link to it, a file inside an input folder or matched by an input glob) or to another
result path of the same run is refused: writing it would replace the user's export, or one
of the two results would be lost. Each path must be writable too (its folder made or
writable, not a folder itself), so a run never fails on its reports after the rows were sent.
"""

from __future__ import annotations

import errno
import glob
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._core import ConfigurationError, receipts_path, storage_error

__all__ = ["check_receipts_path", "check_report_path", "refuse_clashes"]

Named = tuple[str, "Path | None"]  # (the flag, the path it was given)


def _resolved(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


def _same(a: Path, b: Path) -> bool:
    if _resolved(a) == _resolved(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links: two names, one file
    except OSError:  # either does not exist (yet)
        return False


def _inside(path: Path, folder: Path) -> bool:
    return _resolved(folder) in _resolved(path).parents


def _clash_with_input(path: Path, data: object) -> str | None:
    """How ``path`` would overwrite or join the input ``data`` (None: it would not)."""
    if data is None or (isinstance(data, str) and "://" in data):
        return None  # a table's URL: no local file of ours to overwrite
    text = os.fspath(data)  # type: ignore[call-overload]
    if glob.has_magic(text):
        matches = [Path(p) for p in glob.glob(text, recursive=True)]
        if any(_same(path, m) or (m.is_dir() and _inside(path, m)) for m in matches):
            return f"is matched by the input glob {text}"
        if _resolved(path).match(os.path.abspath(text)):
            return f"would be matched by the input glob {text}"
        return None
    source = Path(text)
    if source.is_dir():
        if _inside(path, source):
            return f"lies inside the input folder {source}"
        return None
    if _same(path, source):
        return f"is the input file {source}"
    return None


def refuse_clashes(inputs: Iterable[object], results: Sequence[Named]) -> None:
    """Refuse (ConfigurationError naming both) a result path that is an input, or that
    another result path of the same run names too; before anything is read or sent."""
    given = [(flag, path) for flag, path in results if path is not None]
    for flag, path in given:
        for data in inputs:
            how = _clash_with_input(path, data)
            if how is not None:
                raise ConfigurationError(
                    f"{flag} {path} {how}: writing it would replace the input; "
                    "name a file outside the input"
                )
    for k, (flag, path) in enumerate(given):
        for other_flag, other in given[k + 1 :]:
            if _same(path, other):
                raise ConfigurationError(
                    f"{flag} {path} and {other_flag} {other} name one file: one result would "
                    "replace the other; give each its own file"
                )


def check_report_path(path: Path | None, what: str = "the report") -> None:
    """Refuse a report file (``--json``, ``--junit``) that cannot be written, before the run:
    a folder, or a folder that cannot be made or written to (a StorageError naming it)."""
    if path is None:
        return
    if path.is_dir():
        raise storage_error(what, path, IsADirectoryError(errno.EISDIR, "is a folder"))
    _probe(path, what)


def check_receipts_path(path: Path | None) -> None:
    """Refuse a ``--receipts`` file or folder that cannot be written, before the run."""
    if path is None:
        return
    target = receipts_path(path)
    if target.is_dir():
        raise storage_error(
            "the receipts file", target, IsADirectoryError(errno.EISDIR, "is a folder")
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise storage_error(
            "the receipts file", target, PermissionError(errno.EACCES, "Permission denied")
        )
    _probe(target, "the receipts file")


def _probe(path: Path, what: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a real write: permission bits, a read-only mount, a full inode table all show here
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".check"):
            pass
    except OSError as exc:
        raise storage_error(what, path, exc) from None
