"""Redshift UNLOAD manifests: the list of parts an unload wrote, read instead of the folder.

``UNLOAD ... MANIFEST`` writes ``<prefix>manifest``, a JSON object whose ``entries`` list
each part (``{"url": "s3://bucket/prefix0000_part_00", "meta": {"content_length": N}}``);
``MANIFEST VERBOSE`` adds ``record_count`` to each entry's ``meta`` and the column names
(``schema.elements[].name``). A local folder holding a manifest and the downloaded parts is
read through it: the listed parts, in its order, matched by base name, each one present and
of the length the manifest gives (a shorter part is a broken download); other files are not
part of that unload.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from .._core import InputError


@dataclass(frozen=True)
class Manifest:
    """The parts a manifest lists, in its order, and what it says of them."""

    path: Path
    parts: list[Path]
    columns: tuple[str, ...] | None  # MANIFEST VERBOSE names them
    records: int | None  # MANIFEST VERBOSE counts them


def is_manifest_name(path: Path) -> bool:
    """``manifest`` or ``<prefix>manifest`` (Redshift's names: no suffix)."""
    return path.name.lower().endswith("manifest") and not path.suffix


def manifests_in(folder: Path) -> list[Path]:
    """The manifest files directly in ``folder``."""
    return sorted(p for p in folder.iterdir() if p.is_file() and is_manifest_name(p))


def _document(path: Path) -> dict[str, Any]:
    try:
        document = orjson.loads(path.read_bytes())
    except (orjson.JSONDecodeError, OSError) as exc:
        raise InputError(
            f"{path.name} looks like a Redshift UNLOAD manifest by its name but is not JSON "
            f"({exc}): rename it if it is not one",
            path=str(path),
        ) from None
    entries = document.get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("url"), str) for e in entries
    ):
        raise InputError(
            f"{path.name} is not a Redshift UNLOAD manifest: it needs an 'entries' list of "
            '{"url": ...} objects',
            path=str(path),
        )
    return dict(document)


def _columns(document: dict[str, Any]) -> tuple[str, ...] | None:
    schema = document.get("schema")
    elements = schema.get("elements") if isinstance(schema, dict) else None
    if not isinstance(elements, list):
        return None
    names = [e.get("name") for e in elements if isinstance(e, dict)]
    if not names or not all(isinstance(n, str) and n for n in names):
        return None
    return tuple(str(n) for n in names)


def _records(entries: list[dict[str, Any]]) -> int | None:
    counts = [(e.get("meta") or {}).get("record_count") for e in entries]
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return None
    return sum(int(c) for c in counts if c is not None)


def read_manifest(path: Path) -> Manifest:
    """The parts ``path`` lists, found beside it; a missing or short part is an InputError."""
    document = _document(path)
    entries: list[dict[str, Any]] = document["entries"]
    folder = path.parent
    here = {p.name: p for p in folder.rglob("*") if p.is_file()}
    parts = []
    for number, entry in enumerate(entries, 1):
        name = PurePosixPath(entry["url"]).name
        part = here.get(name)
        if part is None:
            raise InputError(
                f"{path.name} lists {len(entries)} parts, but part {number}, {name} "
                f"({entry['url']}), is not in {folder}: download every part (aws s3 cp "
                "--recursive), or the unload is incomplete",
                path=str(folder / name),
            )
        length = (entry.get("meta") or {}).get("content_length")
        size = part.stat().st_size
        if isinstance(length, int) and size != length:
            raise InputError(
                f"{name} has {size} bytes, but {path.name} says {length}: the part is "
                "incomplete or another file; download it again",
                path=str(part),
            )
        parts.append(part)
    return Manifest(path, parts, _columns(document), _records(entries))
