"""Local files that fail: one line naming the path and the reason, as a ``StorageError``."""

from __future__ import annotations

import contextlib
import errno as errnos
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .exceptions import StorageError

# what to do about it, by errno
_FIXES = {
    errnos.ENOSPC: "free space there",
    errnos.EDQUOT: "free space there (the disk quota is used up)",
    errnos.EROFS: "the file system is read-only: choose another folder",
    errnos.EACCES: "choose a folder you may write to",
    errnos.EPERM: "choose a folder you may write to",
    errnos.ENOENT: "the folder does not exist",
    errnos.ENOTDIR: "a part of the path is a file, not a folder",
    errnos.EISDIR: "the path is a folder: name a file",
    errnos.EMFILE: "too many open files: raise ulimit -n",
    errnos.EFBIG: "larger than a file may grow here (ulimit -f, or the file system's limit)",
}
# may pass without a change: the disk full, the quota used up, out of file descriptors
_PASSING = {errnos.ENOSPC, errnos.EDQUOT, errnos.EMFILE, errnos.ENFILE, errnos.EIO}


def storage_error(
    what: str, path: str | os.PathLike[str], exc: OSError, fix: str = ""
) -> StorageError:
    """The error for a local write that failed: ``cannot write <what> <path>: No space left
    on device (ENOSPC); free space there``. ``fix`` replaces the errno's own advice."""
    code = exc.errno
    name = errnos.errorcode.get(code, str(code)) if code is not None else None
    reason = exc.strerror or str(exc) or type(exc).__name__
    text = f"cannot write {what} {os.fspath(path)}: {reason}"
    if name is not None:
        text += f" ({name})"
    advice = fix or _FIXES.get(code or 0, "")
    if advice:
        text += f"; {advice}"
    return StorageError(text, path=os.fspath(path), errno=code, retryable=code in _PASSING)


def temp_file_error(exc: OSError, bytes_a_row: int) -> StorageError:
    """A temporary file of the message ids (digests, index positions) that failed, naming
    the temp folder and how much room a row takes there."""
    return storage_error(
        "the temporary file of the message ids in",
        tempfile.gettempdir(),
        exc,
        fix=f"free space there, or point TMPDIR at a folder with room ({bytes_a_row} bytes a row)",
    )


@contextlib.contextmanager
def replaced_whole(
    path: str | os.PathLike[str], what: str = "the result file"
) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through: written under a temporary name beside it,
    flushed to disk, then renamed over ``path`` when the block ends without an error. A run
    killed while writing never leaves a shorter file that reads as whole; a write that fails
    (a full disk, a read-only folder) is a StorageError naming ``what``, the path and the
    reason, and leaves no temporary file behind (the old file, if any, stays as it was)."""
    target = Path(path)
    temporary: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", suffix=".part", delete=False
        ) as fh:
            temporary = Path(fh.name)
            # the mode a plain open() would give (a temporary file is the owner's only)
            os.chmod(fh.fileno(), _mode_of(target))
            yield fh
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the name says it is complete
        os.replace(temporary, target)
        temporary = None
    except OSError as exc:
        raise storage_error(what, target, exc) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink()


def _mode_of(target: Path) -> int:
    """The permission bits ``target`` has (it is replaced), or a new file gets (umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux: read it, never set it (os.umask sets it, for every thread)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
