"""The sender over a scripted Poster: splitting, ordering and accounting, without sockets."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import orjson
import pandas as pd
import pyarrow as pa
import pytest

import churn_connector as cc
from churn_connector._core.book import RowBook
from churn_connector._core.contract import EVENTS_PATH, IDENTIFY_PATH
from churn_connector._delivery.answers import Outcome
from churn_connector._delivery.chunking import Request, batch_body
from churn_connector._delivery.chunklog import ChunkLog
from churn_connector._delivery.progress import Progress
from churn_connector._delivery.sender import Sender
from churn_connector._results.result import SendResult

SENT = Outcome("sent", 200, 1, 0.0, None, "{}")
REJECTED = Outcome("rejected", 400, 1, 0.0, "HTTP 400", "bad event")


class ScriptedPoster:
    """Answers each request by a rule over its body, and records what it was sent."""

    def __init__(self, answer: Callable[[str, bytes], Outcome]) -> None:
        self.answer = answer
        self.seen: list[tuple[str, bytes]] = []
        self.stopped = False
        self._lock = threading.Lock()

    def post(self, path: str, body: bytes) -> Outcome:
        with self._lock:
            self.seen.append((path, body))
        return self.answer(path, body)

    def stop(self, reason: str) -> None:
        self.stopped = True

    def close(self) -> None:
        pass


def book_of(n: int) -> RowBook:
    book = RowBook()
    book.extend(pd.RangeIndex(n))
    return book


def event_request(positions: list[int], names: list[str]) -> Request:
    parts = pa.array([orjson.dumps({"event_type": name}) for name in names], pa.binary())
    return Request(EVENTS_PATH, positions, parts)


def sender(
    poster: ScriptedPoster,
    book: RowBook,
    *,
    concurrency: int = 4,
    bisect: bool = True,
    split_budget: int = 1000,
) -> Sender:
    return Sender(
        poster,
        book,
        Progress("test", enabled=False),
        concurrency=concurrency,
        bisect=bisect,
        split_budget=split_budget,
    )


def refuse_poison(path: str, body: bytes) -> Outcome:
    return REJECTED if b"poison" in body else SENT


def test_a_rejected_batch_is_bisected_until_the_refused_event_stands_alone() -> None:
    names = ["ok"] * 7 + ["poison"]
    book = book_of(8)
    run = sender(ScriptedPoster(refuse_poison), book)
    run.run([event_request(list(range(8)), names)])
    result = SendResult("events", book, run.chunks, 0.0)
    assert result.counts["sent"] == 7
    assert result.counts["rejected"] == 1
    assert list(result.rows["status"])[7] == "rejected"
    chunks = result.chunks.set_index("chunk")
    # 8 -> 4 + 4 -> (2 + 2) -> (1 + 1): three splits on the poison's side
    assert (chunks["status"] == "split").sum() == 3
    assert chunks.loc[chunks["status"] == "rejected", "events"].tolist() == [1]


def test_a_spent_split_budget_reports_the_batch_whole() -> None:
    book = book_of(8)
    run = sender(ScriptedPoster(refuse_poison), book, split_budget=0)
    run.run([event_request(list(range(8)), ["ok"] * 7 + ["poison"])])
    assert SendResult("events", book, run.chunks, 0.0).counts["rejected"] == 8


def test_bisection_can_be_turned_off() -> None:
    book = book_of(2)
    run = sender(ScriptedPoster(refuse_poison), book, bisect=False)
    run.run([event_request([0, 1], ["ok", "poison"])])
    assert [c.status for c in run.chunks] == ["rejected"]


def test_requests_of_one_key_are_never_in_flight_together_and_keep_their_order() -> None:
    in_flight: dict[str, int] = {}
    most: dict[str, int] = {}
    order: list[bytes] = []
    lock = threading.Lock()

    def slow(path: str, body: bytes) -> Outcome:
        key = body[:1].decode()
        with lock:
            in_flight[key] = in_flight.get(key, 0) + 1
            most[key] = max(most.get(key, 0), in_flight[key])
            order.append(body)
        time.sleep(0.01)
        with lock:
            in_flight[key] -= 1
        return SENT

    keys = ["a", "b", "a", "c", "a", "b", "a"]
    requests = [
        Request(IDENTIFY_PATH, [i], body=f"{k}{i}".encode(), key=k) for i, k in enumerate(keys)
    ]
    book = book_of(len(keys))
    sender(ScriptedPoster(slow), book, concurrency=4).run(requests)
    assert most == {"a": 1, "b": 1, "c": 1}
    assert [b for b in order if b.startswith(b"a")] == [b"a0", b"a2", b"a4", b"a6"]
    assert (book.status == cc.RowState.SENT).all()


def test_a_request_that_stops_the_run_is_recorded_and_the_poster_stopped() -> None:
    def stop_on_second(path: str, body: bytes) -> Outcome:
        if b"second" in body:
            raise cc.AuthenticationError("refused", status=401, attempts=1)
        return SENT

    book = book_of(4)
    poster = ScriptedPoster(stop_on_second)
    run = sender(poster, book, concurrency=1)
    with pytest.raises(cc.AuthenticationError):
        run.run([event_request([0, 1], ["first"] * 2), event_request([2, 3], ["second"] * 2)])
    assert poster.stopped
    assert [(c.status, c.http_status) for c in run.chunks] == [("sent", 200), ("failed", 401)]
    assert book.chunk.tolist() == [1, 1, 2, 2]  # the stopping request's rows point to it
    # the client marks the undecided rows failed (tests/delivery/test_delivery.py checks the counts)
    assert book.status.tolist() == [cc.RowState.SENT] * 2 + [cc.RowState.PENDING] * 2


def test_a_hanging_request_is_abandoned_when_the_run_is_interrupted() -> None:
    release = threading.Event()

    def hang(path: str, body: bytes) -> Outcome:
        release.wait(10)
        return SENT

    class Interrupting:
        """A request source that raises KeyboardInterrupt once the first request hangs."""

        def __iter__(self) -> Iterator[Request]:
            yield event_request([0], ["first"])
            time.sleep(0.2)
            raise KeyboardInterrupt

    book = book_of(1)
    poster = ScriptedPoster(hang)
    run = sender(poster, book, concurrency=2)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run.run(Interrupting())
    release.set()
    assert time.monotonic() - started < 3
    assert poster.stopped
    assert book.status.tolist() == [cc.RowState.FAILED]
    assert "outcome unknown, safe to re-send" in book.errors[0]


def test_the_records_of_many_requests_stay_small() -> None:
    # a 30M-row send makes 60,000 requests, an identify of a million users a million: as
    # one Python object each, with its own numbers, row labels and answer text, ~400 bytes
    n = 2_000
    book = book_of(2 * n)

    def answer(path: str, body: bytes) -> Outcome:  # a new text per answer, as over HTTP
        return Outcome("sent", 200, 1, 0.0123, None, orjson.dumps({"accepted": 2}).decode())

    poster = ScriptedPoster(answer)  # kept: it keeps every body it was sent
    tracemalloc.start()
    try:
        run = sender(poster, book)
        run.run(event_request([2 * k, 2 * k + 1], ["a", "b"]) for k in range(n))
        assert len(run.chunks) == n
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        del run  # the records go with their sender
        gc.collect()
        held = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / n < 150


def test_a_request_record_reads_back_as_the_request_ended() -> None:
    book = RowBook()
    book.extend(pd.Index(["a.csv:2", "a.csv:3", "a.csv:4"]))
    run = sender(ScriptedPoster(refuse_poison), book, concurrency=1)
    run.run([event_request([0, 1, 2], ["ok", "ok", "poison"])])
    records = sorted(run.chunks, key=lambda c: c.chunk)
    assert [(c.chunk, c.parent_chunk, c.status) for c in records][:2] == [
        (1, None, "split"),
        (2, 1, "sent"),
    ]
    rejected = records[-1]
    assert (rejected.first_row, rejected.last_row, rejected.events) == ("a.csv:4", "a.csv:4", 1)
    assert (rejected.http_status, rejected.attempts) == (400, 1)
    assert (rejected.error, rejected.response) == ("HTTP 400", "bad event")
    assert rejected.endpoint == EVENTS_PATH


def test_a_request_body_is_built_with_one_copy_of_its_events() -> None:
    # two ~110 KB copies a request on 16 sender threads: freed space a long send's heap kept
    events = [orjson.dumps({"event_type": "opened", "n": k}) for k in range(500)]
    parts = pa.array(events, pa.binary())
    batch_body(parts)  # Arrow's kernels loaded before measuring
    tracemalloc.start()
    try:
        body = batch_body(parts)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert body == b'{"events":[' + b",".join(events) + b"]}"
    assert peak < 1.5 * len(body)


def test_request_records_read_back_across_the_logs_blocks() -> None:
    book = RowBook()
    book.extend(pd.Index([f"r{k}" for k in range(3_000)]))
    log = ChunkLog(book.labels)
    for k in range(2_500):  # more than two blocks of records
        log.append(
            chunk=k,
            parent_chunk=None if k % 2 else k + 10_000,
            endpoint=EVENTS_PATH,
            events=k % 7,
            first=k,
            last=k + 1,
            status="sent" if k % 3 else "failed",
            http_status=None if k % 5 == 0 else 200,
            attempts=1 + k % 4,
            elapsed_s=k / 8,
            finished_s=k / 4,
            bytes=3 * k,
            error=None if k % 3 else f"error {k}",
            response=None,
        )
    assert len(log) == 2_500
    for k in (0, 1_023, 1_024, 2_047, 2_048, 2_499):
        record = log[k]
        assert (record.chunk, record.first_row, record.last_row) == (k, f"r{k}", f"r{k + 1}")
        assert record.parent_chunk == (None if k % 2 else k + 10_000)
        assert record.http_status == (None if k % 5 == 0 else 200)
        assert (record.attempts, record.elapsed_s, record.finished_s) == (1 + k % 4, k / 8, k / 4)
        assert (record.bytes, record.error) == (3 * k, None if k % 3 else f"error {k}")
    assert [record.chunk for record in log[1_020:1_030]] == list(range(1_020, 1_030))
    assert log[-1].chunk == 2_499
