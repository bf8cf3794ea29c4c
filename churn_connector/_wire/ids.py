"""Stable message ids: a UUID-formatted hash of the canonical wire event.

The canonical form is a compatibility promise (golden vectors in the tests pin it):

    digest = SHA-256( b"churn-connector/message-id/v2\\n" + NAMESPACE_UTF8 + b"\\n" + CANONICAL )
    id     = digest[:16] with the version nibble set to 8 and the RFC 4122 variant bits,
             printed as a lowercase 8-4-4-4-12 UUID (an RFC 9562 UUIDv8)

where CANONICAL is the wire event without ``context.$message_id`` serialised as JSON with
keys sorted by code point, no insignificant white space, UTF-8 (orjson ``OPT_SORT_KEYS``),
numbers as JSON means them: a float that holds an integer strictly inside +-2**53 is
written as that integer (``3.0`` -> ``3``, ``-0.0`` -> ``0``), other floats as orjson
spells them (shortest round trip: ``0.1``, ``1e+16``); booleans stay ``true``/``false``.
NAMESPACE is the caller's namespace or the empty string. With ``id_columns`` the canonical
object is ``{column: wire value}`` for the chosen columns instead (a ``properties.<key>``
that is absent on a row is ``null``). The wire carries the same bytes (plus the id), so
one export read by pandas, pyarrow, polars or DuckDB gives the same ids and events; the
value rules behind that (integral floats, null members omitted) are in ``_json.values``;
the canonical spelling itself is ``canonical``.

Id format ``v1`` (``id_format="v1"``, for backfills begun with 0.1) hashes with the prefix
``churn-connector/message-id/v1`` and the form of 0.1: floats as orjson spells them
(``3.0``) and null members of structs, maps and dicts sent as ``null``.

Content digests (the ledger's, for given ids and ``id_columns``) keep the v1 prefix in
both formats, so an event whose bytes did not change keeps its recorded digest.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .._core import ConfigurationError, IdFormat, Spill
from .._json import data_bytes
from .canonical import canonical, json_numbers

PREFIXES: dict[IdFormat, bytes] = {
    "v1": b"churn-connector/message-id/v1\n",
    "v2": b"churn-connector/message-id/v2\n",
}
CONTENT_PREFIX = PREFIXES["v1"]  # content digests: a ledger promise, the same in v1 and v2

# Every canonical event begins with its context ("context" sorts first of the five keys);
# on the wire the id is spliced in as the context's first member, so each event is
# serialised once: CANONICAL = CONTEXT_OPEN + tail, WIRE = ID_OPEN + id + [","] + tail.
CONTEXT_OPEN = b'{"context":{'
ID_OPEN = CONTEXT_OPEN + b'"$message_id":'

# the UUID's groups of hex digits (8-4-4-4-12) and where its dashes go
_GROUPS = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))
_DASHES = [8, 13, 18, 23]


def digests(
    rows: Sequence[bytes] | pa.BinaryArray,
    namespace: str | None = None,
    prefix: bytes = PREFIXES["v2"],
    *,
    lead: bytes = b"",
) -> np.ndarray:
    """(n, 16) uint8 array: the UUIDv8 bytes of ``lead + row`` for each row (the
    column-wise path hashes its rows' tails after the shared ``CONTEXT_OPEN``).

    The one hashing of every wire path: one native call over the column with the ``fast``
    extra, else a hashlib loop over the rows (the reference; tests hold the two equal). A
    few rows given as bytes (a one-off event) take the declared fast path, ``few_digests``:
    the same hash, without the arrays whose fixed cost is ten times the hash of one row.
    """
    head = head_of(namespace, prefix) + lead
    if not isinstance(rows, pa.Array) and len(rows) < FEW:
        return np.frombuffer(few_digests(head, rows), dtype=np.uint8).reshape(-1, 16)
    arr = rows if isinstance(rows, pa.Array) else pa.array(rows, pa.binary())
    hashed = native_sha256(head, arr) if len(arr) >= _NATIVE_FROM else None
    return uuid8(python_sha256(head, arr) if hashed is None else hashed)


FEW = 8  # rows: below, ``digests`` and ``quoted_ids`` work row by row (a one-off event)


def head_of(namespace: str | None, prefix: bytes) -> bytes:
    """What every hashed row is preceded by: the id format's prefix and the namespace."""
    return prefix + (namespace or "").encode("utf-8") + b"\n"


def few_digests(head: bytes, rows: Sequence[bytes]) -> bytearray:
    """The bytes of ``uuid8(python_sha256(head, rows))``, row by row in plain Python."""
    copy = _seeded(head).copy
    out = bytearray()
    for row in rows:
        h = copy()
        h.update(row)
        out += h.digest()[:16]
    for k in range(0, len(out), 16):  # the version nibble 8 and the RFC 4122 variant bits
        out[k + 6] = (out[k + 6] & 0x0F) | 0x80
        out[k + 8] = (out[k + 8] & 0x3F) | 0x80
    return out


@functools.lru_cache(maxsize=16)
def _seeded(head: bytes) -> Any:
    """A SHA-256 that has read ``head``, to be copied (never updated): a one-off event's
    namespace and id format rarely change."""
    return hashlib.sha256(head)


def quoted_ids(digests: np.ndarray) -> list[bytes]:
    """Each digest's UUID text as a JSON string (``b'"8f0c...-..."'``), as the wire splices
    it in: formatted as one array, or, for a few (a one-off event), row by row."""
    if len(digests) >= FEW:
        return [b'"' + u + b'"' for u in format_uuids(digests).tolist()]
    return quoted_few(digests.tobytes())


def quoted_few(raw: bytes | bytearray) -> list[bytes]:
    """``quoted_ids`` of joined 16-byte digests, row by row in plain Python."""
    out = []
    for k in range(0, len(raw), 16):
        x = raw[k : k + 16].hex()
        out.append(f'"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"'.encode())
    return out


def python_sha256(head: bytes, arr: pa.BinaryArray) -> bytes:
    """The joined 32-byte SHA-256 digests of ``head + row``, row by row with hashlib: the
    rows' bytes are sliced out of one buffer, and each hash continues a copy of the hash of
    ``head``."""
    copy = hashlib.sha256(head).copy
    data = bytes(data_bytes(arr))  # one copy; slicing bytes beats to_pylist/memoryview
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if _large(arr) else np.int32)
    bounds = (offsets[arr.offset : arr.offset + len(arr) + 1] - offsets[arr.offset]).tolist()
    out: list[bytes] = []
    append = out.append
    for lo, hi in itertools.pairwise(bounds):
        h = copy()
        h.update(data[lo:hi])
        append(h.digest())
    return b"".join(out)


def native_sha256(head: bytes, arr: pa.BinaryArray) -> bytes | None:
    """What python_sha256 returns, in one native call over the column (polars-hash: Rust,
    with the CPU's SHA instructions where it has them); None without the ``fast`` extra,
    for bytes that are not UTF-8 (it hashes strings) or when the plugin fails."""
    if _forked_from_polars():
        return None
    native = _native()
    if native is None:
        return None
    if len(arr) == 0:
        return b""
    pl, plh = native
    try:
        texts = pc.binary_join_element_wise(head, arr, b"").cast(
            pa.large_string() if _large(arr) else pa.string()
        )
        hexed = pc.cast(
            pl.from_arrow(pa.table({"c": texts}))
            .select(plh.col("c").chash.sha2_256())
            .to_series()
            .to_arrow(),
            pa.large_string(),
        )
    except Exception:  # an accelerator: whatever fails falls back to hashlib
        return None
    n = len(hexed)
    offsets = np.frombuffer(hexed.buffers()[1], dtype=np.int64)[hexed.offset : hexed.offset + n + 1]
    if hexed.null_count or not np.array_equal(offsets - offsets[0], np.arange(n + 1) * 64):
        return None
    return binascii.unhexlify(memoryview(hexed.buffers()[2])[offsets[0] : offsets[0] + 64 * n])


@functools.cache
def _native() -> tuple[Any, Any] | None:
    try:
        import polars as pl  # noqa: PLC0415 - heavy optional dependency (the fast extra)
        import polars_hash as plh  # noqa: PLC0415 - optional, with polars (the fast extra)
    except ImportError:
        return None
    global _polars_pid
    _polars_pid = os.getpid()
    return pl, plh


# polars' thread pool does not survive a fork: a child forked (a multiprocessing pool,
# Celery, gunicorn) from a process that had polars loaded would wait for ever on the
# parent's threads at its first native call. Such a child hashes with hashlib.
_polars_pid: int | None = None  # the process that loaded polars here


def _forked_from_polars() -> bool:
    """True in a process forked from one that had polars loaded (``os.fork`` is seen by
    its hook, any other fork by the pid)."""
    if _FORKED:
        return True
    pid = _polars_pid
    return pid is not None and pid != os.getpid()


_FORKED = False


def _after_fork_in_child() -> None:
    global _FORKED
    if "polars" in sys.modules:  # loaded by us or by the program: its pool may be running
        _FORKED = True


os.register_at_fork(after_in_child=_after_fork_in_child)


_NATIVE_FROM = 256  # rows: below, the native call's fixed cost is more than the loop's


def _large(arr: pa.Array) -> bool:
    return bool(pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type))


def uuid8(sha256_digests: bytes) -> np.ndarray:
    """Joined 32-byte SHA-256 digests -> (n, 16) uint8: each one's first 16 bytes with the
    version nibble 8 and the RFC 4122 variant bits."""
    arr = np.frombuffer(sha256_digests, dtype=np.uint8).reshape(-1, 32)[:, :16].copy()
    arr[:, 6] = (arr[:, 6] & 0x0F) | 0x80
    arr[:, 8] = (arr[:, 8] & 0x3F) | 0x80
    return arr


def uuid_text(digests: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 -> (n, 36) uint8: lowercase 8-4-4-4-12 UUID text (hexlify, then the
    five groups copied as blocks: a gather by index costs ~3x as many instructions)."""
    n = digests.shape[0]
    hexed = np.frombuffer(
        binascii.hexlify(np.ascontiguousarray(digests).tobytes()), dtype=np.uint8
    ).reshape(n, 32)
    out = np.empty((n, 36), dtype=np.uint8)
    for k, (lo, hi) in enumerate(_GROUPS):  # group k starts k dashes further on
        out[:, lo + k : hi + k] = hexed[:, lo:hi]
    out[:, _DASHES] = 45  # '-'
    return out


def format_uuids(arr: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 -> (n,) array of 36-byte lowercase UUID strings (``S36``)."""
    return uuid_text(arr).view("S36").ravel()


def with_id(row: bytes, id_json: bytes) -> bytes:
    """The wire bytes of one canonical event: ``id_json`` spliced in as the first member
    of its context."""
    tail = row[len(CONTEXT_OPEN) :]
    return ID_OPEN + id_json + (b"" if tail[:1] == b"}" else b",") + tail


def message_ids(
    rows: Sequence[bytes] | pa.BinaryArray, namespace: str | None = None, id_format: IdFormat = "v2"
) -> list[str]:
    """Message ids (str) for canonical rows; see the module docstring for the format."""
    if len(rows) == 0:
        return []
    hashed = digests(rows, namespace, PREFIXES[id_format])
    return format_uuids(hashed).astype("U36").tolist()  # type: ignore[no-any-return]


def message_id(
    event: dict[str, Any], namespace: str | None = None, *, id_format: IdFormat = "v2"
) -> str:
    """The id of one wire event (its ``$message_id``, if any, is ignored); ``id_format``
    ``"v1"`` gives the id 0.1 gave it."""
    if id_format not in PREFIXES:
        raise ConfigurationError(f"id_format must be 'v1' or 'v2', not {id_format!r}")
    context = {k: v for k, v in event.get("context", {}).items() if k != "$message_id"}
    bare = {**event, "context": context}
    # v2: 3.0 and 3 are one number (nulls are kept: in a wire event a null is data)
    form = json_numbers(bare) if id_format == "v2" else bare
    return message_ids([canonical(form)], namespace, id_format)[0]


def _texts(digests: np.ndarray) -> list[str]:
    texts: list[str] = format_uuids(digests).astype("U36").tolist()
    return texts


class IdTexts(Sequence[str]):
    """The UUID texts of (k, 16) digests, formatted only when read (a ledger reads them)."""

    def __init__(self, digests: np.ndarray) -> None:
        self.digests = digests

    def __len__(self) -> int:
        return len(self.digests)

    def __iter__(self) -> Iterator[str]:
        return iter(_texts(self.digests))  # formatted together: one vectorised pass

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return _texts(self.digests[index])
        return _texts(self.digests[index : index + 1 or None])[0]


class HashedIds:
    """A slice's message ids as 16-byte digests (all zero where a row has no id), kept in
    the row book's spill file rather than in memory: millions of rows stay small."""

    def __init__(self, n: int, rows: np.ndarray, digests: np.ndarray, spill: Spill) -> None:
        full = np.zeros((n, 16), dtype=np.uint8)
        full[rows] = digests
        self.n = n
        self.spill = spill
        self.offset = spill.write(full.tobytes())

    def __len__(self) -> int:
        return self.n

    def _read(self, lo: int, hi: int) -> np.ndarray:
        data = self.spill.read(self.offset + 16 * lo, 16 * (hi - lo))
        return np.frombuffer(data, dtype=np.uint8).reshape(-1, 16)

    def digest(self, i: int) -> bytes:
        return self.spill.read(self.offset + 16 * i, 16)

    def texts(self, lo: int, hi: int) -> list[str | None]:
        block = self._read(lo, hi)
        present = block.any(axis=1)
        out: list[str | None] = [None] * len(block)
        for i, text in zip(np.flatnonzero(present).tolist(), _texts(block[present]), strict=True):
            out[i] = text
        return out


class GivenIds:
    """A slice's message ids as the caller gave them (None where a row has none)."""

    def __init__(self, n: int, rows: np.ndarray, given: Sequence[str]) -> None:
        self.values: list[str | None] = [None] * n
        for i, value in zip(rows.tolist(), given, strict=True):
            self.values[i] = value

    def __len__(self) -> int:
        return len(self.values)

    def digest(self, i: int) -> bytes:
        """The digest de-duplication compares: of the id's exact JSON text."""
        return given_digest(orjson.dumps(self.values[i]))

    def texts(self, lo: int, hi: int) -> list[str | None]:
        return self.values[lo:hi]


def given_digest(quoted: bytes) -> bytes:
    """16 bytes standing for a caller's id (its JSON text) when ids are compared."""
    return hashlib.sha256(quoted).digest()[:16]
