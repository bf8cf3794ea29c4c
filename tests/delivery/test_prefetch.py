"""Prefetch: requests built on their own thread arrive in order, errors where they occurred."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from churn_connector._delivery.prefetch import Handoff, Prefetch


def test_items_arrive_in_source_order_then_none() -> None:
    ahead = Prefetch(range(1_000), ahead=3)
    got = []
    while (item := ahead.take()) is not None:
        got.append(item)
    assert got == list(range(1_000))
    assert ahead.take() is None
    ahead.close()


def test_an_error_of_the_source_is_raised_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("the file broke at line 3")

    ahead = Prefetch(source(), ahead=10)
    assert [ahead.take(), ahead.take()] == [1, 2]
    with pytest.raises(ValueError, match="line 3"):
        ahead.take()
    ahead.close()


def test_close_stops_a_producer_that_is_ahead_and_runs_the_sources_clean_up() -> None:
    produced: list[int] = []
    cleaned = threading.Event()

    def source() -> Iterator[int]:
        try:
            for i in range(10_000):
                produced.append(i)
                yield i
        finally:
            cleaned.set()

    ahead = Prefetch(source(), ahead=2)
    assert ahead.take() == 0
    ahead.close()
    count = len(produced)
    assert count < 10  # it stopped while the queue was full, not at the end of the source
    assert cleaned.is_set()
    assert len(produced) == count  # nothing is built after close() returns


def test_a_handoff_source_is_read_only_by_the_thread_that_takes() -> None:
    readers: set[int] = set()

    def source() -> Iterator[int]:
        for i in range(200):
            readers.add(threading.get_ident())
            yield i

    feed = Handoff(source(), ahead=2)
    ahead = Prefetch((i * 10 for i in feed.items()), ahead=3, feed=feed)
    got = []
    while (item := ahead.take()) is not None:
        got.append(item)
    ahead.close()
    assert got == [i * 10 for i in range(200)]
    assert readers == {threading.get_ident()}


def test_a_handoff_sources_error_is_raised_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise ValueError("the cursor broke")

    feed = Handoff(source())
    ahead = Prefetch(feed.items(), ahead=3, feed=feed)
    assert ahead.take() == 1
    with pytest.raises(ValueError, match="the cursor broke"):
        ahead.take()
    ahead.close()


def test_close_stops_a_producer_waiting_for_the_callers_source_and_closes_it() -> None:
    cleaned = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield from range(10_000)
        finally:
            cleaned.set()

    feed = Handoff(source(), ahead=1)
    ahead = Prefetch(feed.items(), ahead=1, feed=feed)
    assert ahead.take() == 0
    started = time.monotonic()
    ahead.close()
    assert time.monotonic() - started < 5  # the producer did not wait out its join timeout
    assert cleaned.is_set()


def test_the_builder_waits_with_enough_ready_until_the_consumer_has_started() -> None:
    produced: list[int] = []
    started = threading.Event()

    def source() -> Iterator[int]:
        for i in range(100):
            produced.append(i)
            yield i

    ahead = Prefetch(source(), ahead=50, warm=(started, 2))
    for _ in range(200):  # bounded: the first two come at once
        if len(produced) >= 2:
            break
        time.sleep(0.01)
    time.sleep(0.2)  # time enough to fill the queue, were it not waiting
    assert len(produced) == 2
    started.set()
    got = [ahead.take() for _ in range(100)]
    assert got == list(range(100))
    assert ahead.take() is None
    ahead.close()
