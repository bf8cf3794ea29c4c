"""The floor: what ``churn-connector send events`` does to the bench's exports, done with
Arrow kernels and a native hash only, to the very same bytes.

    .venv/bin/python benchmarks/floor.py FILE URL [--concurrency 16]
    .venv/bin/python benchmarks/floor.py FILE --dry-run     # build every body, send none

Reads the export with pyarrow (CSV: timestamps with offsets and JSON-object cells parsed by
Arrow's own readers), checks every row against the contract with Arrow kernels (no nulls,
the event_type fullmatch, the 30-day / 5-minute window), writes each event's canonical JSON
by joining columns of fragments, hashes it with SHA-256 in native code (polars-hash, Rust:
no Python loop over rows), formats the UUIDv8 ids with numpy, splices them in, drops
repeated ids, joins 500 events per body and posts the bodies over keep-alive connections
(``http.client``, one thread each; the key from ``CHURN_API_KEY``). Prints one JSON line:
events and requests acknowledged, errors, seconds.

It knows the bench's exports only (benchmarks/exports.py: the bench's own shape and flat
typed columns, Parquet and CSV) and refuses anything else, such as a string that would need
a JSON escape or a null: it is the floor of the benchmark's ratio, not a client. bench.py
checks that its bodies are byte-identical to the package's (the receiver records both).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import io
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import orjson
import polars as pl
import polars_hash as plh
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

PREFIX = b"churn-connector/message-id/v2\n" + b"\n"  # id format v2, no namespace
ID_OPEN = b'{"context":{"$message_id":"'
BATCH = 500
EVENT_TYPE = r"^[a-z0-9]+(?:_[a-z0-9]+)*$"
NEEDS_ESCAPE = r'["\\\x00-\x1f]'
TS = pa.timestamp("ms", tz="UTC")
# the 36 UUID characters from 32 hex digits and a dash (index 32)
UUID_IDX = np.array(
    [*range(0, 8), 32, *range(8, 12), 32, *range(12, 16), 32, *range(16, 20), 32, *range(20, 32)]
)
HEX = b"0123456789abcdef"
VARIANT = np.arange(256, dtype=np.uint8)  # hex digit d -> (d & 3) | 8, as ASCII
for _d, _c in enumerate(HEX):
    VARIANT[_c] = HEX[(_d & 3) | 8]


# ASCII digits of 0..99 and 0..999, for times written column by column
T2 = np.array([f"{i:02d}".encode() for i in range(100)], dtype="S2").view(np.uint8).reshape(-1, 2)
T3 = np.array([f"{i:03d}".encode() for i in range(1000)], dtype="S3").view(np.uint8).reshape(-1, 3)
DAY_MS = 86_400_000


class Unsupported(ValueError):
    """Not one of the bench's exports, or a row the contract refuses."""


# ----------------------------------------------------------------------------- read


def read(path: Path) -> pa.Table:
    """The export as a table: occurred_at timestamp[ms, UTC], properties a struct or
    ``properties.<key>`` columns."""
    if path.suffix == ".parquet":
        return pq.read_table(path)
    table = pcsv.read_csv(
        path,
        convert_options=pcsv.ConvertOptions(
            column_types={"occurred_at": TS, "event_type": pa.string(), "properties": pa.string()}
        ),
    )
    if "properties" in table.column_names:  # JSON objects: Arrow's JSON reader parses them
        text = pc.binary_join(
            pa.ListArray.from_arrays(
                pa.array([0, len(table)], pa.int32()), table["properties"].combine_chunks()
            ),
            "\n",
        )[0].as_py()
        parsed = pjson.read_json(io.BytesIO(text.encode()))
        if len(parsed) != len(table):
            raise Unsupported("a properties cell is not one JSON object")
        struct = pa.StructArray.from_arrays(
            [parsed[name].combine_chunks() for name in parsed.column_names], parsed.column_names
        )
        table = table.set_column(table.column_names.index("properties"), "properties", struct)
    return table


# ----------------------------------------------------------------------------- check


def check(table: pa.Table, now: dt.datetime) -> None:
    """Every row valid, or Unsupported: the floor sends all rows or none."""
    for name in table.column_names:
        if table[name].null_count:
            raise Unsupported(f"{name} has nulls")
    if not pc.all(pc.match_substring_regex(table["event_type"], EVENT_TYPE)).as_py():
        raise Unsupported("an event_type does not match the contract")
    occurred = table["occurred_at"]
    if occurred.type != TS:
        raise Unsupported(f"occurred_at is {occurred.type}, not {TS}")
    bounds = pc.min_max(occurred).as_py()
    earliest, latest = now - dt.timedelta(days=30), now + dt.timedelta(minutes=5)
    if bounds["min"] < earliest or bounds["max"] > latest:
        raise Unsupported("an occurred_at is outside the window")


# ----------------------------------------------------------------------------- wire


def times(occurred: pa.Array) -> pa.Array:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` of timestamp[ms] values, with numpy: each date spelled
    once, the clock from digit tables (Arrow's strftime takes ~1 µs a row)."""
    ms = occurred.cast(pa.int64()).to_numpy()
    n = len(ms)
    days, rem = np.divmod(ms, DAY_MS)
    lo, hi = int(days.min()), int(days.max())
    if hi - lo > 4096 or lo < 0:
        raise Unsupported("timestamps beyond a few years after 1970")
    epoch = dt.date(1970, 1, 1)
    dates = np.array(
        [(epoch + dt.timedelta(days=d)).strftime("%Y-%m-%dT").encode() for d in range(lo, hi + 1)],
        dtype="S11",
    )
    out = np.empty((n, 24), dtype=np.uint8)
    out[:, :11] = dates.view(np.uint8).reshape(-1, 11)[days - lo]
    secs, milli = np.divmod(rem, 1000)
    mins, sec = np.divmod(secs, 60)
    hour, minute = np.divmod(mins, 60)
    out[:, 11:13] = T2[hour]
    out[:, 14:16] = T2[minute]
    out[:, 17:19] = T2[sec]
    out[:, 20:23] = T3[milli]
    out[:, 13] = out[:, 16] = ord(":")
    out[:, 19] = ord(".")
    out[:, 23] = ord("Z")
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(24), n, [None, pa.py_buffer(out)])
    return fixed.cast(pa.binary())


def _value(arr: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, bytes]:
    """(JSON text without quotes, as binary; the quote) of a column of strings or integers."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_integer(arr.type):
        return pc.cast(arr, pa.string()).cast(pa.binary()), b""
    if pc.any(pc.match_substring_regex(arr, NEEDS_ESCAPE)).as_py():
        raise Unsupported("a string that needs a JSON escape")
    return arr.cast(pa.binary()), b'"'


def _members(table: pa.Table) -> list[Any]:
    """The pieces of the sorted ``"key":value`` members of properties."""
    if "properties" in table.column_names:
        struct = table["properties"].combine_chunks()
        columns = {
            struct.type.field(i).name: struct.field(i) for i in range(struct.type.num_fields)
        }
    else:
        columns = {
            name.removeprefix("properties."): table[name]
            for name in table.column_names
            if name.startswith("properties.")
        }
    pieces: list[Any] = []
    for i, key in enumerate(sorted(columns)):
        values, quote = _value(columns[key])
        pieces += [(b"," if i else b"") + orjson.dumps(key) + b":" + quote, values, quote]
    return pieces


def tails(table: pa.Table) -> pa.Array:
    """Each event's canonical JSON after ``{"context":{`` (context is empty here)."""
    users, _ = _value(table["external_user_id"])  # ids are strings on the wire, numbers too

    event_types, _ = _value(table["event_type"])
    joined = pc.binary_join_element_wise(
        b'},"event_type":"',
        event_types,
        b'","external_user_id":"',
        users,
        b'","occurred_at":"',
        times(table["occurred_at"].combine_chunks()),
        b'","properties":{',
        *_members(table),
        b"}}",
        b"",
    )
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def message_ids(tail: pa.Array) -> np.ndarray:
    """(n, 36) uint8: the UUIDv8 text of SHA-256(prefix + canonical), hashed in Rust."""
    hashed_input = pc.binary_join_element_wise(PREFIX + b'{"context":{', tail, b"").cast(
        pa.string()  # UTF-8 already: validated by the readers
    )
    hexed = (
        pl.from_arrow(pa.table({"c": hashed_input}))
        .select(plh.col("c").chash.sha2_256())
        .to_series()
        .to_arrow()
    )
    hexed = pc.cast(hexed, pa.large_string())
    n = len(hexed)
    offsets = np.frombuffer(hexed.buffers()[1], dtype=np.int64)[hexed.offset : hexed.offset + n + 1]
    if not np.array_equal(offsets - offsets[0], np.arange(n + 1) * 64):
        raise Unsupported("unexpected digest text")
    data = np.frombuffer(hexed.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[0] + 64 * n]
    digits = np.empty((n, 33), dtype=np.uint8)
    digits[:, :32] = data.reshape(n, 64)[:, :32]
    digits[:, 12] = ord("8")  # version 8
    digits[:, 16] = VARIANT[digits[:, 16]]  # the RFC 4122 variant bits
    digits[:, 32] = ord("-")
    return np.ascontiguousarray(digits[:, UUID_IDX])


def bodies(table: pa.Table) -> tuple[pa.Array, int]:
    """The request bodies (500 events each, in row order) and the number of events."""
    tail = tails(table)
    ids = message_ids(tail)
    uuid = pa.FixedSizeBinaryArray.from_buffers(pa.binary(36), len(ids), [None, pa.py_buffer(ids)])
    if len(pc.unique(uuid)) < len(uuid):  # repeated ids: the first one of each is sent
        _, first = np.unique(ids.view("S36").ravel(), return_index=True)
        keep = pa.array(np.sort(first))
        uuid, tail = uuid.take(keep), tail.take(keep)
    n = len(tail)
    wire = pc.binary_join_element_wise(ID_OPEN, uuid.cast(pa.binary()), b'"', tail, b"")
    offsets = pa.array([*range(0, n, BATCH), n], pa.int32())
    lists = pa.ListArray.from_arrays(offsets, wire.cast(pa.binary()))
    joined = pc.binary_join_element_wise(b'{"events":[', pc.binary_join(lists, b","), b"]}", b"")
    return joined, n


# ----------------------------------------------------------------------------- send


def send(payloads: pa.Array, url: str, key: str, concurrency: int) -> dict[str, Any]:
    """Post every body over ``concurrency`` keep-alive connections; count the answers."""
    parts = urlsplit(url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    lock = threading.Lock()
    queue = list(range(len(payloads)))
    totals = {"requests": 0, "errors": 0}

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    i = queue.pop()
                body = payloads[i].as_py()
                conn.request("POST", "/v1/events/batch", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                with lock:
                    totals["requests"] += 1
                    totals["errors"] += response.status != 200
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("url", nargs="?", help="the receiver (not with --dry-run)")
    parser.add_argument("--dry-run", action="store_true", help="build every body, send none")
    parser.add_argument("--concurrency", type=int, default=16)  # the package's default
    args = parser.parse_args()
    started = time.perf_counter()
    now = dt.datetime.now(dt.UTC)
    table = read(args.file)
    check(table, now)
    payloads, events = bodies(table)
    del table
    if args.dry_run or args.url is None:
        # the summary line callgrind.py reads, as the CLI's dry run prints it
        print(f"dry run: {events} rows -> sent 0, skipped 0, invalid 0 ({len(payloads)} bodies)")
        return 0
    totals = send(payloads, args.url, os.environ.get("CHURN_API_KEY", ""), args.concurrency)
    result = {"events": events, **totals, "seconds": time.perf_counter() - started}
    print(orjson.dumps(result).decode())
    return 1 if totals["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
