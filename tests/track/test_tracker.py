"""One-off events over real HTTP against the sandbox: ``client.track``, ``cc.track`` and the
buffered tracker (queue-full policies, the spool across ``kill -9``, exit, fork)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

import churn_connector as cc

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


def stored(sandbox: cc.Sandbox) -> list[dict[str, Any]]:
    """The events the sandbox stored, as wire objects."""
    frame = sandbox.events()
    return [
        {
            "context": row["context"],
            "event_type": row["event_type"],
            "external_user_id": row["external_user_id"],
            "occurred_at": row["occurred_at"],
            "properties": row["properties"],
        }
        for row in frame.to_dict("records")
    ]


def one_row_wire(now: pd.Timestamp, **values: Any) -> dict[str, Any]:
    table = pd.DataFrame({k: [v] for k, v in values.items()})
    (wire,) = cc.events_to_wire(table, now=now)
    return wire


VALUES: dict[str, Any] = {
    "external_user_id": "u1",
    "event_type": "invoice_paid",
    "properties": {"amount": 19.9, "seats": 3.0, "plan": "pro"},
    "context": {"source": "stripe"},
}


@pytest.mark.parametrize("form", ["client", "one_call", "tracker"])
def test_each_form_stores_the_expected_event_once(
    form: str, sandbox: cc.Sandbox, client: cc.Client, now: pd.Timestamp
) -> None:
    when = now - pd.Timedelta(minutes=3)
    expected = one_row_wire(now, occurred_at=when, **VALUES)
    for _ in range(2):  # the second is the same event: stored once
        if form == "client":
            result = client.track(**VALUES, occurred_at=when, now=now)
            message_id = result.message_id
            assert (result.status, result.attempts) == (200, 1)
        elif form == "one_call":
            message_id = cc.track(
                **VALUES,
                occurred_at=when,
                now=now,
                base_url=sandbox.base_url,
                api_key=sandbox.api_key,
            ).message_id
        else:
            with client.tracker() as tracker:
                handle = tracker.track(**VALUES, occurred_at=when, now=now)
            message_id = handle.result(timeout=0).message_id
    assert stored(sandbox) == [expected]
    assert message_id == expected["context"]["$message_id"]
    stats = sandbox.stats()
    assert (stats["stored"], stats["duplicates"]) == (1, 1)


def test_a_webhook_id_keeps_a_redelivered_webhook_one_event(
    sandbox: cc.Sandbox, client: cc.Client
) -> None:
    for _ in range(2):  # the provider re-delivers; our clock has moved on
        result = client.track("u1", "invoice_paid", message_id="evt_1NRP5qLkdIwHu7ix")
    assert result.message_id == "evt_1NRP5qLkdIwHu7ix"
    assert len(sandbox.events()) == 1


def test_an_invalid_event_raises_and_sends_nothing(sandbox: cc.Sandbox, client: cc.Client) -> None:
    with pytest.raises(cc.DataValidationError) as caught:
        client.track("u1", "Invoice Paid")
    assert caught.value.checks == ("event_type_pattern",)
    with client.tracker() as tracker, pytest.raises(cc.DataValidationError):
        tracker.track("", "invoice_paid")
    assert sandbox.requests_log().empty


def test_track_raises_delivery_error_when_retries_give_up(client: cc.Client) -> None:
    with cc.Sandbox(error_rate=1.0) as failing:
        flaky = cc.Client(failing.base_url, failing.api_key, retry=cc.RetryPolicy(max_attempts=3))
        with pytest.raises(cc.DeliveryError) as caught:
            flaky.track("u1", "login")
    assert caught.value.retryable
    assert caught.value.counts == {"failed": 1}
    assert "not acknowledged after 3 attempt(s)" in str(caught.value)


def test_a_refused_key_raises_authentication_error(sandbox: cc.Sandbox) -> None:
    with pytest.raises(cc.AuthenticationError):
        cc.Client(sandbox.base_url, "not-the-key").track("u1", "login")


def test_a_tracker_whose_sender_stopped_itself_leaves_no_thread_behind(sandbox: cc.Sandbox) -> None:
    # a refused key stops the tracker's poster; the next request opens a new one, and the
    # stopped one's connections and watchdog thread must go with it, not live on forever
    before = set(threading.enumerate())
    client = cc.Client(sandbox.base_url, "not-the-key")
    with client.tracker(max_concurrency=1) as tracker:
        for _ in range(2):
            tracker.track("u1", "login")
            assert tracker.flush(timeout=30).counts["failed"] == 1
        report = tracker.close()
    client.close()
    assert report.pending == ()
    deadline = time.monotonic() + 5
    ours = ("churn-send", "churn-tracker")  # the client's threads (not the sandbox's)
    while left := [t.name for t in set(threading.enumerate()) - before if t.name.startswith(ours)]:
        assert time.monotonic() < deadline, f"threads left behind: {left}"
        time.sleep(0.05)


def test_leaving_the_block_raises_delivery_error_listing_the_undelivered() -> None:
    with cc.Sandbox(error_rate=1.0) as failing:
        client = cc.Client(failing.base_url, failing.api_key, retry=cc.RetryPolicy(max_attempts=2))
        with pytest.raises(cc.DeliveryError) as caught, client.tracker() as tracker:
            handle = tracker.track("u1", "login")
    assert handle.message_id in str(caught.value)
    assert caught.value.rows is not None
    assert caught.value.rows["message_id"].tolist() == [handle.message_id]
    with pytest.raises(cc.DeliveryError):
        handle.result(timeout=0)


@contextmanager
def slow_client(latency: float) -> Iterator[tuple[cc.Sandbox, cc.Client]]:
    """A sandbox that answers after ``latency`` seconds, and a client for it."""
    with cc.Sandbox(latency=latency) as sandbox:
        yield sandbox, cc.Client(sandbox.base_url, sandbox.api_key)


@pytest.mark.parametrize("on_full", ["raise", "block"])
def test_a_full_queue_raises_queue_full_and_queues_nothing(on_full: Any) -> None:
    with slow_client(latency=1.0) as (sandbox, client):
        tracker = client.tracker(max_queue=1, on_full=on_full, block_timeout=0.2, max_concurrency=1)
        first = tracker.track("u1", "login")  # taken by the sender: in flight
        while tracker._book.waiting:
            time.sleep(0.01)
        second = tracker.track("u1", "logout")  # waits: the queue is full
        with pytest.raises(cc.QueueFull) as caught:
            tracker.track("u1", "page_view")
        report = tracker.close()
    assert caught.value.max_queue == 1 and caught.value.retryable
    assert report.ok and report.n_delivered == 2
    assert sorted(sandbox.events()["message_id"]) == sorted([first.message_id, second.message_id])


def test_spill_keeps_the_overflow_in_the_spool_and_delivers_it(tmp_path: Path) -> None:
    with slow_client(latency=0.2) as (sandbox, client):
        with client.tracker(tmp_path / "spool.sqlite", max_queue=2, on_full="spill") as tracker:
            handles = [tracker.track("u1", "page_view", properties={"i": i}) for i in range(30)]
        assert all(h.result(timeout=0).status == 200 for h in handles)
    assert len(sandbox.events()) == 30


CHILD = """
import os, sys, time, logging
import churn_connector as cc
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
client = cc.Client(os.environ["URL"], os.environ["KEY"])
"""


def run_child(code: str, sandbox: cc.Sandbox, **kwargs: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "URL": sandbox.base_url, "KEY": sandbox.api_key}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD + textwrap.dedent(code)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_a_tracker_killed_part_way_loses_nothing_its_spool_held(tmp_path: Path) -> None:
    spool = tmp_path / "spool.sqlite"
    with slow_client(latency=0.3) as (sandbox, client):
        child = run_child(
            f"""
            t = client.tracker({str(spool)!r}, max_concurrency=1)
            for i in range(200):
                t.track("u1", "page_view", properties={{"i": i}})
            print("tracked", flush=True)
            time.sleep(60)
            """,
            sandbox,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "tracked"
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
        before = len(sandbox.events())
        with client.tracker(spool) as tracker:
            report = tracker.flush(timeout=30)
        events = sandbox.events()
    assert before < 200  # it was killed part way
    assert report.ok
    assert sorted(p["i"] for p in events["properties"]) == list(range(200))


def test_a_live_process_spool_is_never_adopted(tmp_path: Path, sandbox: cc.Sandbox) -> None:
    spool = tmp_path / "spool.sqlite"
    child = run_child(
        f"""
        t = client.tracker({str(spool)!r})
        print("open", flush=True)
        time.sleep(60)
        """,
        sandbox,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        with pytest.raises(cc.ConfigurationError, match="belongs to a running process"):
            cc.Client(sandbox.base_url, sandbox.api_key).tracker(spool)
    finally:
        child.kill()
        child.communicate(timeout=30)


def test_an_open_tracker_flushes_at_exit(sandbox: cc.Sandbox) -> None:
    child = run_child(
        """
        t = client.tracker()
        for i in range(50):
            t.track("u1", "page_view", properties={"i": i})
        """,
        sandbox,
    )
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert err == ""
    assert len(sandbox.events()) == 50


def test_what_exit_cannot_deliver_is_counted_and_a_second_ctrl_c_ends_quietly() -> None:
    with slow_client(latency=5.0) as (sandbox, _):
        child = run_child(
            """
            t = client.tracker(flush_timeout=60)
            t.track("u1", "page_view")
            print("leaving", flush=True)
            """,
            sandbox,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "leaving"
        time.sleep(1.0)  # inside the exit flush, waiting on the slow API
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert "Traceback" not in err
    assert "1 event(s) not delivered" in err and "lost: there is no spool" in err


def test_the_idna_codec_is_imported_with_the_connections_not_by_a_sender_thread() -> None:
    # getaddrinfo imports it on its first host name: a fork while a sender thread was inside
    # that import left the child's every connection waiting on the parent thread's lock
    code = (
        "import sys, churn_connector._delivery.connections; print('encodings.idna' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stdout.split() == ["True"]


def test_a_forked_child_sends_only_its_own_events() -> None:
    with slow_client(latency=0.5) as (sandbox, _):
        child = run_child(
            """
            t = client.tracker(max_concurrency=1)
            parent = [t.track("parent", "page_view", properties={"i": i}) for i in range(5)]
            pid = os.fork()
            if pid == 0:
                mine = t.track("child", "page_view")
                report = t.flush(timeout=30)
                ok = report.ok and report.n_delivered == 1 and mine.done()
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            report = t.flush(timeout=30)
            print(os.waitstatus_to_exitcode(status), report.n_delivered, flush=True)
            """,
            sandbox,
        )
        out, err = child.communicate(timeout=60)
        stats = sandbox.stats()
    assert out.split() == ["0", "5"], err
    assert sorted(sandbox.events()["external_user_id"]) == ["child"] + ["parent"] * 5
    assert stats["duplicates"] == 0  # the child never re-sent the parent's events


def test_a_tracker_in_a_forked_child_refuses_the_parents_spool(tmp_path: Path) -> None:
    with slow_client(latency=0.0) as (sandbox, _):
        child = run_child(
            f"""
            t = client.tracker({str(tmp_path / "spool.sqlite")!r})
            pid = os.fork()
            if pid == 0:
                try:
                    t.track("child", "page_view")
                except cc.ConfigurationError as exc:
                    os._exit(0 if "belongs to the parent" in str(exc) else 2)
                os._exit(1)
            _, status = os.waitpid(pid, 0)
            t.track("parent", "page_view")
            print(os.waitstatus_to_exitcode(status), t.close().n_delivered, flush=True)
            """,
            sandbox,
        )
        out, err = child.communicate(timeout=60)
    assert out.split() == ["0", "1"], err


def test_reports_and_results_never_show_the_key() -> None:
    canary = "canary-key-3c1f"
    with cc.Sandbox(api_keys=[canary], error_rate=1.0) as failing:
        client = cc.Client(failing.base_url, canary, retry=cc.RetryPolicy(max_attempts=2))
        with pytest.raises(cc.DeliveryError) as caught:
            client.track("u1", "login")
        tracker = client.tracker()
        handle = tracker.track("u1", "login")
        report = tracker.close()
    texts = [str(caught.value), repr(client), repr(tracker), repr(handle), repr(report)]
    texts.append(orjson.dumps(report.rows().to_dict("records")).decode())
    assert not any(canary in text for text in texts)


def test_each_call_has_the_whole_deadline_however_old_the_client(sandbox: cc.Sandbox) -> None:
    client = cc.Client(sandbox.base_url, sandbox.api_key, deadline=1.0)
    client.track("u1", "login")
    time.sleep(1.2)  # older than its deadline: a run's deadline would have passed
    assert client.track("u1", "logout").status == 200


def test_many_calls_a_second_log_one_line_pointing_to_batches(
    client: cc.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="churn_connector"):
        for i in range(60):
            client.track("u1", "page_view", properties={"i": i})
    nudges = [r for r in caplog.records if "client.track() was called" in r.getMessage()]
    assert len(nudges) == 1
    assert "send_events" in nudges[0].getMessage() and "tracker()" in nudges[0].getMessage()


def test_ctrl_c_during_a_call_raises_interrupted_with_the_id() -> None:
    with slow_client(latency=2.5) as (sandbox, _):
        child = run_child(
            """
            print("sending", flush=True)
            try:
                client.track("u1", "login", message_id="m-1")
            except cc.Interrupted as exc:
                print(type(exc).__name__, exc.signal, exc, flush=True)
            """,
            sandbox,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "sending"
        time.sleep(0.8)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    assert out.startswith("Interrupted 2 interrupted: event m-1 may or may not have been stored"), (
        err
    )


def test_a_spooled_event_past_the_window_is_reported_expired_not_sent(
    tmp_path: Path, sandbox: cc.Sandbox, client: cc.Client, now: pd.Timestamp
) -> None:
    # an event valid when it was tracked (``now`` 40 days ago) has aged out by the time a
    # request is built for it, as a spool's leftovers do after a long outage
    then = now - pd.Timedelta(days=40)
    spool = tmp_path / "spool.sqlite"
    with client.tracker(spool) as tracker:
        old = tracker.track("u1", "login", occurred_at=then - pd.Timedelta(hours=1), now=then)
        fresh = tracker.track("u1", "logout")
        report = tracker.flush(timeout=30)
        with pytest.raises(cc.DeliveryError, match="expired"):
            old.result(timeout=0)
        assert fresh.result(timeout=0).status == 200
    assert report.counts["expired"] == 1 and report.counts["sent"] == 1
    assert [u.message_id for u in report.undelivered] == [old.message_id]
    assert list(sandbox.events()["message_id"]) == [fresh.message_id]
    with client.tracker(spool) as again:  # the expired event left the spool
        assert again.flush(timeout=30).counts["sent"] == 0


def test_identical_events_tracked_in_one_millisecond_are_each_stored(
    sandbox: cc.Sandbox, client: cc.Client
) -> None:
    # no occurred_at and no message_id: a hashed id would make most of these one event
    with client.tracker() as tracker:
        handles = [tracker.track("user_42", "page_view", properties={"p": 1}) for _ in range(300)]
        report = tracker.flush(timeout=30)
    assert report.ok and report.n_delivered == 300
    assert len({h.message_id for h in handles}) == 300
    assert len(sandbox.events()) == 300
