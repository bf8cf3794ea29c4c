"""The row book and the de-duplication index: compact, exact, and the same whole or in parts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import churn_connector as cc
import churn_connector._core.book as book_module
import churn_connector._core.columns as columns_module
import churn_connector._events.seen as seen_module
import churn_connector._wire.events as wire_module
from churn_connector._core.book import RowBook
from churn_connector._core.columns import ChunkNumbers, Spill
from churn_connector._events.seen import SeenIds, fingerprints
from churn_connector._results.result import write_frame, write_frames
from tests.conftest import MakeEvents


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=-50, max_value=50), max_size=40), min_size=1, max_size=30
    )
)
def test_seen_ids_finds_the_first_row_of_every_key_across_slices(slices: list[list[int]]) -> None:
    seen = SeenIds()
    reference: dict[int, int] = {}
    position = 0
    for keys in slices:
        positions = np.arange(position, position + len(keys), dtype=np.int64)
        firsts = seen.firsts(np.asarray(keys, dtype=np.int64), positions)
        for key, pos, first in zip(keys, positions.tolist(), firsts.tolist(), strict=True):
            assert first == reference.setdefault(key, pos)
        position += len(keys)


def test_a_64_bit_key_collision_never_makes_two_events_one(
    monkeypatch: pytest.MonkeyPatch, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    # one key for every event: each collides with the first, yet duplicates are still found
    monkeypatch.setattr(wire_module, "key64", lambda digests: np.zeros(len(digests), np.int64))
    events = make_events(now, n=400, users=7)
    events = pd.concat([events, events.iloc[[3, 5]]], ignore_index=True)  # two true repeats
    with cc.Sandbox() as sb:
        result = cc.Client(sb.base_url, sb.api_key).send_events(events, now=now, slice_rows=50)
        assert len(sb.events()) == 400
    assert result.counts["sent"] == 400
    assert result.counts["skipped"] == 2
    assert list(result.rows.index[result.rows["status"] == "skipped"]) == [400, 401]


def test_ids_in_the_frozen_tier_sharing_its_bits_never_make_two_events_one(
    monkeypatch: pytest.MonkeyPatch, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    # a frozen tier after 200 ids, and keys crowded on 4 values of its 16 bits: its
    # answers are mostly candidates of other events, which the digests turn down
    events = make_events(now, n=2_000, users=13)
    events = pd.concat([events, events.iloc[[3, 5, 700, 1_999, 3]]], ignore_index=True)
    plain = cc.send_events(events, dry_run=True, now=now, slice_rows=97).rows
    key64 = wire_module.key64
    inverse_mix = pow(int(seen_module._MIX), -1, 1 << 64)

    def crowded(digests: np.ndarray) -> np.ndarray:
        mixed = key64(digests).view(np.uint64) * seen_module._MIX
        mixed = (mixed & ~np.uint64(0xFFFF << 28)) | (
            (mixed >> np.uint64(60)) % np.uint64(4) + np.uint64(1)
        ) << np.uint64(28)
        return (mixed * np.uint64(inverse_mix)).view(np.int64)

    monkeypatch.setattr(wire_module, "key64", crowded)
    monkeypatch.setattr(seen_module, "_PENDING_IDS", 200)
    monkeypatch.setattr(seen_module, "_FROZEN_FROM", 400)
    frozen = cc.send_events(events, dry_run=True, now=now, slice_rows=97).rows
    pd.testing.assert_frame_equal(frozen.drop(columns="chunk"), plain.drop(columns="chunk"))
    assert list(frozen.index[frozen["status"] == "skipped"]) == [2_000, 2_001, 2_002, 2_003, 2_004]


def test_the_spill_reads_back_what_was_written() -> None:
    spill = Spill()
    first, second = spill.write(b"abc"), spill.write(b"defgh")
    assert (spill.read(first, 3), spill.read(second + 1, 3)) == (b"abc", b"efg")
    spill.close()


def test_a_frame_of_some_rows_equals_those_rows_of_the_whole_frame(
    client: cc.Client, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=60)
    events.loc[[4, 40], "event_type"] = "Bad"
    result = client.send_events(events, now=now, slice_rows=7)
    book: RowBook = result._book
    some = np.array([0, 4, 13, 40, 59])
    whole = book.frame().iloc[some]
    pd.testing.assert_frame_equal(book.frame_at(some), whole)
    pd.testing.assert_frame_equal(result.first_failures(None), book.frame().iloc[[4, 40]])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rows_written_block_by_block_equal_the_whole_frame(
    suffix: str, client: cc.Client, make_events: MakeEvents, now: pd.Timestamp, tmp_path: Path
) -> None:
    events = make_events(now, n=50)
    events.loc[7, "event_type"] = "Bad"
    result = client.send_events(events, now=now)
    whole, blocks = tmp_path / f"whole{suffix}", tmp_path / f"blocks{suffix}"
    write_frame(result.rows, whole)
    write_frames(result._book.frames(block=8), blocks)
    read = pd.read_csv if suffix == ".csv" else pd.read_parquet
    pd.testing.assert_frame_equal(read(blocks), read(whole))
    assert read(blocks)["message_id"].isna().sum() == 1  # the invalid row: null, not "None"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("labels", ["range", "text"])
def test_the_rows_file_reads_back_as_the_rows_frame(
    suffix: str,
    labels: str,
    client: cc.Client,
    make_events: MakeEvents,
    now: pd.Timestamp,
    tmp_path: Path,
) -> None:
    events = make_events(now, n=20)
    events.loc[7, "event_type"] = "Bad"
    if labels == "text":
        events.index = pd.Index([f"part-0.parquet:{i + 1}" for i in range(20)])
    rows = client.send_events(events, now=now).rows
    path = tmp_path / f"rows{suffix}"
    write_frame(rows, path)
    if suffix == ".csv":
        text = {"row": "string"} if labels == "text" else {}
        kinds = {"status": "category", "message_id": "string", "chunk": "Int64", "error": "string"}
        back = pd.read_csv(path, index_col="row", dtype={**text, **kinds})
    else:
        back = pd.read_parquet(path, dtype_backend="numpy_nullable").set_index("row")
    assert list(back.columns) == ["status", "message_id", "chunk", "error"]  # the labels first
    pd.testing.assert_frame_equal(
        back,
        rows.astype({"status": str}).astype({"status": back["status"].dtype}),
        check_index_type=False,
        check_categorical=False,
    )


def test_the_rows_frame_uses_one_missing_value_marker(
    client: cc.Client, make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=10)
    events.loc[3, "event_type"] = "Bad"
    rows = client.send_events(events, now=now).rows
    assert rows.index.name == "row" and list(rows.index) == list(events.index)
    assert list(rows.columns) == ["status", "message_id", "chunk", "error"]  # no position
    assert {str(t) for t in rows.dtypes.iloc[1:]} == {"string", "Int64"}
    missing = [rows.at[3, "message_id"], rows.at[3, "chunk"], rows.at[0, "error"]]
    assert all(value is pd.NA for value in missing)


def test_a_book_reserved_for_the_input_is_allocated_once() -> None:
    book = RowBook()
    book.reserve(5_000)
    status = book._status
    for start in range(0, 5_000, 1_000):
        book.extend(pd.RangeIndex(start, start + 1_000))
    assert book._status is status
    assert len(book._status) == 5_000


def test_a_book_reserved_too_small_still_takes_every_row() -> None:
    book = RowBook()
    book.reserve(10)
    first = book.extend(pd.RangeIndex(0, 8))
    second = book.extend(pd.RangeIndex(8, 3_000))
    book.set(np.arange(2_990, 3_000), cc.RowState.SENT, chunk=7)
    assert (first, second, len(book)) == (0, 8, 3_000)
    assert book.counts()["sent"] == 10
    assert book.chunk[2_999] == 7 and book.chunk[:2_990].max() == -1


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=12),  # rows added
            st.lists(st.integers(min_value=0, max_value=60), max_size=8),  # rows finished
            st.sampled_from([cc.RowState.SENT, cc.RowState.INVALID, cc.RowState.FAILED]),
        ),
        max_size=25,
    )
)
def test_the_finished_count_follows_rows_finishing_in_any_order(
    steps: list[tuple[int, list[int], cc.RowState]],
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(book_module, "_COUNT_BLOCK", 4)  # the scans cross block edges
        book = RowBook()
        for added, finished, state in steps:
            book.extend(pd.RangeIndex(len(book), len(book) + added))
            book.set([p for p in finished if p < len(book)], state)
            assert book.finished() == np.count_nonzero(book.status != cc.RowState.PENDING)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(list(cc.RowState)), max_size=40),
    st.lists(st.sampled_from(list(cc.RowState)), max_size=3, unique=True),
)
def test_the_positions_of_rows_in_some_states_are_found_across_blocks(
    states: list[cc.RowState], asked: list[cc.RowState]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(book_module, "_COUNT_BLOCK", 4)
        book = RowBook()
        book.extend(pd.RangeIndex(0, len(states)))
        for position, state in enumerate(states):
            if state != cc.RowState.PENDING:
                book.set([position], state)
        found = book.positions(tuple(asked))
        assert found.dtype == np.int64
        assert found.tolist() == [p for p, state in enumerate(states) if state in asked]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(min_value=0, max_value=199), max_size=30), st.booleans()),
        max_size=40,
    )
)
def test_chunk_numbers_read_back_what_was_written_in_any_order(
    writes: list[tuple[list[int], bool]],
) -> None:
    # pages of 16 rows, two kept as arrays: every write order turns pages into runs and back
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns_module, "_PAGE_BITS", 4)
        patch.setattr(columns_module, "_PAGE", 16)
        patch.setattr(columns_module, "_DENSE_PAGES", 2)
        numbers, reference = ChunkNumbers(), np.full(200, -1, dtype=np.int32)
        for chunk, (positions, as_range) in enumerate(writes, start=1):
            # a request's rows in a row (the common case), or scattered ones
            where = (
                np.arange(positions[0], min(positions[0] + 20, 200), dtype=np.int64)
                if as_range and positions
                else np.array(positions, dtype=np.int64)
            )
            numbers.set(where, chunk)
            reference[where] = chunk
        np.testing.assert_array_equal(numbers.block(0, 200), reference)
        np.testing.assert_array_equal(numbers.block(7, 45), reference[7:45])
        picked = np.array([199, 3, 17, 16, 150, 3], dtype=np.int64)
        np.testing.assert_array_equal(numbers.get(picked), reference[picked])


def test_chunk_numbers_of_requests_in_input_order_take_runs_not_a_number_a_row() -> None:
    numbers, held = ChunkNumbers(), {}
    for chunk, lo in enumerate(range(0, 3_000_000, 500), start=1):
        positions = np.arange(lo, lo + 500, dtype=np.int64)
        numbers.set(positions[positions % 97 != 0], chunk)  # 1% invalid rows: no chunk
        held[lo + 500] = numbers.nbytes()
    # the pages being written are arrays; what grows with the rows is under a byte a row
    assert held[3_000_000] - held[1_000_000] < 2_000_000  # 4 bytes a row as an array
    assert numbers.get(np.array([0, 1, 499, 500, 2_999_999])).tolist() == [-1, 1, 1, 2, 6_000]


def test_seen_ids_find_every_first_row_while_their_tables_grow() -> None:
    rng = np.random.default_rng(7)
    # keys whose 36 compared bits differ (a shared fingerprint is the caller's to confirm)
    drawn = rng.integers(-(2**63), 2**63 - 1, size=120_000, dtype=np.int64)
    distinct = drawn[np.unique(fingerprints(drawn), return_index=True)[1]]
    rows = distinct[rng.integers(0, len(distinct), size=300_000)]
    seen = SeenIds()
    got = np.concatenate(
        [
            seen.firsts(rows[lo : lo + 7_919], np.arange(lo, min(lo + 7_919, len(rows))))
            for lo in range(0, len(rows), 7_919)
        ]
    )
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(got, first[inverse])


@pytest.mark.parametrize("reserved", [120_000, 1_000])  # enough, and too few: it grows
def test_seen_ids_reserved_for_the_input_find_every_first_row(reserved: int) -> None:
    rng = np.random.default_rng(11)
    drawn = rng.integers(-(2**63), 2**63 - 1, size=100_000, dtype=np.int64)
    distinct = drawn[np.unique(fingerprints(drawn), return_index=True)[1]]
    rows = distinct[rng.integers(0, len(distinct), size=120_000)]
    seen = SeenIds()
    seen.reserve(reserved)
    homes = [table.home for table in seen._tables]
    got = np.concatenate(
        [
            seen.firsts(rows[lo : lo + 10_007], np.arange(lo, min(lo + 10_007, len(rows))))
            for lo in range(0, len(rows), 10_007)
        ]
    )
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(got, first[inverse])
    rehashed = [table.home for table in seen._tables] != homes
    assert rehashed == (reserved < len(rows))


def test_seen_ids_of_a_large_input_keep_older_ids_on_disk_and_find_every_first_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a frozen tier (16 bits in memory) whose positions are written 4,000 at least at a time
    monkeypatch.setattr(seen_module, "_PENDING_IDS", 4_000)
    monkeypatch.setattr(seen_module, "_FROZEN_FROM", 8_000)
    rng = np.random.default_rng(5)
    drawn = rng.integers(-(2**63), 2**63 - 1, size=60_000, dtype=np.int64)
    prints = fingerprints(drawn)
    low = prints & np.uint64(0xFFFF)
    # keys that differ in the bits the frozen tier compares: every answer is exact
    distinct = drawn[
        np.unique((prints >> np.uint64(32) << np.uint64(16)) | low, return_index=True)[1]
    ]
    rows = distinct[rng.integers(0, len(distinct), size=150_000)]
    seen = SeenIds()
    seen.reserve(len(rows))
    got = np.concatenate(
        [
            seen.firsts(rows[lo : lo + 7_919], np.arange(lo, min(lo + 7_919, len(rows))))
            for lo in range(0, len(rows), 7_919)
        ]
    )
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(got, first[inverse])
    frozen = sum(int(table.fill.sum()) for table in seen._frozen)
    assert frozen > len(distinct) // 2  # most ids answered from the frozen tier
    assert seen._pending is not None
    waiting = sum(len(slots) for slots, _ in seen._pending.runs)
    assert waiting < frozen // 2  # the others' positions are in the file


def test_seen_ids_frozen_tier_answers_ids_sharing_its_16_bits_with_a_candidate_or_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ids whose 16 frozen bits collide: an answer is the id's first row, or an earlier row
    # with the same 20 bits (a candidate the caller's digest check turns down), never a
    # later one; and an id's repeats all get the first answer its first row got
    monkeypatch.setattr(seen_module, "_PENDING_IDS", 3_000)
    monkeypatch.setattr(seen_module, "_FROZEN_FROM", 6_000)
    rng = np.random.default_rng(9)
    # keys made from the fingerprints wanted (the mixing is a bijection): 16 tables, the
    # first 1/1024 of each table's buckets, 8 values of the 16 low bits
    table = rng.integers(0, 16, size=6_000, dtype=np.uint64)
    high = rng.integers(0, 1 << 6, size=6_000, dtype=np.uint64)
    low = rng.integers(1, 9, size=6_000, dtype=np.uint64)
    mixed = (table << np.uint64(60)) | (high << np.uint64(44)) | (low << np.uint64(28))
    inverse_mix = pow(int(seen_module._MIX), -1, 1 << 64)
    keys = np.array([(m * inverse_mix) % (1 << 64) for m in mixed.tolist()], dtype=np.uint64)
    crowded = keys.view(np.int64)[
        np.unique(fingerprints(keys.view(np.int64)), return_index=True)[1]
    ]
    rows = crowded[rng.integers(0, len(crowded), size=40_000)]
    seen = SeenIds()
    seen.reserve(len(rows))
    got = np.concatenate(
        [
            seen.firsts(rows[lo : lo + 997], np.arange(lo, min(lo + 997, len(rows))))
            for lo in range(0, len(rows), 997)
        ]
    )
    positions = np.arange(len(rows))
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    first = first[inverse]
    assert (got <= positions).all()
    other = got != first
    rows_bits = ((fingerprints(rows) >> np.uint64(32)) << np.uint64(16)) | (
        fingerprints(rows) & np.uint64(0xFFFF)
    )
    assert (rows_bits[got[other]] == rows_bits[other]).all()
    # a repeat gets what its first row got: the caller's digest check settles it once
    np.testing.assert_array_equal(got[positions != first], got[first[positions != first]])
    assert other.any()  # the test made candidates


def test_seen_ids_frozen_tier_keeps_ids_exactly_when_a_table_runs_out_of_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(seen_module, "_PENDING_IDS", 1_000)
    monkeypatch.setattr(seen_module, "_FROZEN_FROM", 2_000)
    # keys made from fingerprints of table 0 only: its sixteenth of the tier is too small,
    # and the other 15 tables stay empty
    inverse_mix = pow(int(seen_module._MIX), -1, 1 << 64)
    prints = np.arange(1, 3_001, dtype=np.uint64) * np.uint64(1_000_003)
    mixed = [(int(p) % (1 << 32)) << 28 for p in prints]
    keys = np.array([(m * inverse_mix) % (1 << 64) for m in mixed], dtype=np.uint64)
    keys = keys.view(np.int64)
    assert set((fingerprints(keys) >> np.uint64(32)).tolist()) == {0}
    seen = SeenIds()
    seen.reserve(6_000)
    rows = np.concatenate([keys, keys])
    got = np.concatenate(
        [seen.firsts(rows[lo : lo + 500], np.arange(lo, lo + 500)) for lo in range(0, 6_000, 500)]
    )
    np.testing.assert_array_equal(got, np.concatenate([np.arange(3_000), np.arange(3_000)]))


def test_seen_ids_frozen_tier_keeps_exactly_an_id_pushed_onto_an_older_ids_16_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # K's home bucket is full, the next has room when K is probed and none once its own
    # slice is placed: K lands in the bucket after, behind an older id with its 16 bits
    monkeypatch.setattr(seen_module, "_FROZEN_FROM", 100)
    seen = SeenIds()
    seen.reserve(2_000)
    buckets = seen._frozen[0].home
    inverse_mix = pow(int(seen_module._MIX), -1, 1 << 64)

    def key(bucket: int, low: int, j: int = 0) -> int:
        base = -(-bucket * (1 << 32) // buckets)  # the first fingerprint of the bucket
        fingerprint = base + j * 65_536 + (low - base) % 65_536
        return ((fingerprint << 28) * inverse_mix) % (1 << 64)  # table 0

    def firsts(keys: list[int], start: int) -> list[int]:
        positions = np.arange(start, start + len(keys))
        got = seen.firsts(np.array(keys, dtype=np.uint64).view(np.int64), positions)
        return [int(first) for first in got]

    older, k = key(4, 7), key(2, 7, j=20)
    assert firsts([key(2, 100 + i) for i in range(16)] + [older], 0) == list(range(17))
    assert firsts([k] + [key(3, 200 + i) for i in range(16)], 17) == list(range(17, 34))
    assert firsts([k, older], 34) == [17, 16]


def test_seen_ids_reserved_after_ids_are_stored_keep_them() -> None:
    seen = SeenIds()
    keys = np.arange(1, 5_001, dtype=np.int64) * 7_919
    seen.firsts(keys, np.arange(5_000))
    seen.reserve(1_000_000)
    np.testing.assert_array_equal(seen.firsts(keys, np.arange(5_000, 10_000)), np.arange(5_000))


def test_repeated_rows_keep_their_first_row_not_a_text_and_read_back_in_any_order(
    make_events: MakeEvents, now: pd.Timestamp
) -> None:
    events = make_events(now, n=300, users=7)
    result = cc.send_events(
        pd.concat([events, events], ignore_index=True), dry_run=True, now=now, slice_rows=97
    )
    book: RowBook = result._book
    assert result.counts["skipped"] == 300
    assert book.errors == {}  # a repeat is two numbers, its text written when asked for
    whole = book.frame()
    assert list(whole["error"].iloc[[300, 301, 599]]) == [
        f"duplicate of row {k} (same message id)" for k in (0, 1, 299)
    ]
    book.add_error(450, "a later note")
    some = np.array([450, 3, 301, 299, 450])
    got = book.frame_at(some)
    assert list(got["error"].fillna("-")) == [
        "duplicate of row 150 (same message id); a later note",
        "-",
        "duplicate of row 1 (same message id)",
        "-",
        "duplicate of row 150 (same message id); a later note",
    ]
    pd.testing.assert_frame_equal(got, book.frame().iloc[some])
