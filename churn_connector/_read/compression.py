"""Compressed files: what the name says must be what the first bytes are.

A ``.gz`` that is not gzip, or gzip bytes under a plain name, is refused with both facts
rather than read as garbage. Decompression streams (pyarrow's codecs), so memory does not
grow with the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from .._core import InputError

_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"BZh": "bz2",
    b"\x04\x22\x4d\x18": "lz4",
    b"\xfd7zXZ\x00": "xz",
    b"PK\x03\x04": "zip",
}
SUFFIXES = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".bz2": "bz2",
    ".lz4": "lz4",
    ".xz": "xz",
    ".zip": "zip",
}
_UNREAD = {"xz": "decompress it first (xz -d)", "zip": "unzip it first"}


def compression_of(path: Path) -> str | None:
    """The compression of ``path`` (None: plain), checked against its first bytes."""
    with path.open("rb") as fh:
        head = fh.read(6)
    by_magic = next((kind for magic, kind in _MAGIC.items() if head.startswith(magic)), None)
    by_name = SUFFIXES.get(path.suffix.lower())
    if by_name is not None and by_magic != by_name:
        raise InputError(
            f"{path.name}: the name says {by_name}, but the file is "
            f"{by_magic or 'not compressed'} (it starts with bytes {head[:4].hex()})",
            path=str(path),
        )
    if by_magic is not None and by_name is None and by_magic != "zip":
        raise InputError(
            f"{path.name} is {by_magic}-compressed but its name does not say so: add the "
            f"suffix ({next(s for s, k in SUFFIXES.items() if k == by_magic)})",
            path=str(path),
        )
    if by_name in _UNREAD:
        raise InputError(
            f"{path.name}: {by_name} files are not read: {_UNREAD[by_name]}", path=str(path)
        )
    return by_name


def open_stream(path: Path) -> Any:
    """A binary stream of the file's (decompressed) bytes."""
    return pa.input_stream(str(path), compression=compression_of(path))
