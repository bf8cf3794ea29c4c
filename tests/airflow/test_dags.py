"""Real ``dag.test()`` runs (SQLite metadata DB) against a ``cc.Sandbox`` in this process."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import churn_connector as cc
from tests.airflow.conftest import (
    BAD_KEY,
    GOOD_KEY,
    Query,
    leaks,
    run_dag,
    use_connection,
    xcom,
)

N_EVENTS = 10
USERS = ["user_0", "user_1", "user_2"]
EMAILS = ["a@example.com", "b@example.com", "c@example.com"]


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    now = pd.Timestamp.now(tz="UTC").floor("s")
    events = pd.DataFrame(
        {
            "external_user_id": [USERS[i % 3] for i in range(N_EVENTS)],
            "event_type": ["login"] * N_EVENTS,
            "occurred_at": [now - pd.Timedelta(hours=1, minutes=i) for i in range(N_EVENTS)],
            "properties.seq": list(range(N_EVENTS)),
        }
    )
    users = pd.DataFrame(
        {"external_user_id": USERS, "email": EMAILS, "traits.plan": ["pro", "free", "pro"]}
    )
    events.to_parquet(tmp_path / "events.parquet")
    users.to_parquet(tmp_path / "users.parquet")
    return {
        "events": str(tmp_path / "events.parquet"),
        "users": str(tmp_path / "users.parquet"),
        "ledger": str(tmp_path / "state" / "ledger.sqlite"),
    }


def statuses(path: str | Path) -> dict[str, int]:
    rows = pd.read_parquet(path)
    return {str(k): int(v) for k, v in rows["status"].astype(str).value_counts().items()}


def test_events_and_identities_land_exactly_once(
    sandbox: cc.Sandbox,
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    query: Query,
    airflow_home: Path,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY, max_concurrency=2)
    state, tis, run_id = run_dag("churn_send", inputs)
    assert state == "success", tis
    assert tis == {t: ("success", 1) for t in ("send_events", "load_users", "identify")}

    assert sorted(sandbox.events()["properties"].map(lambda p: p["seq"])) == list(range(N_EVENTS))
    assert sandbox.stats()["duplicates"] == 0
    assert sorted(sandbox.users()["external_user_id"]) == USERS

    events = xcom("churn_send", "send_events", run_id)
    assert events["counts"] == {
        "sent": N_EVENTS,
        "invalid": 0,
        "rejected": 0,
        "failed": 0,
        "skipped": 0,
        "expired": 0,
        "held": 0,
    }
    assert (events["requests"], events["exit_code"], events["try_number"]) == (3, 0, 1)
    folder = Path(events["results_dir"])  # <base>/<dag>/<run>/<task>/try_<n>
    assert folder.parts[-5:-2] == (
        "churn_results",
        "churn_send",
        run_id.replace(":", "_").replace("+", "_"),
    )
    assert folder.parts[-2:] == ("send_events", "try_1")
    assert folder.is_relative_to(airflow_home)
    assert events["files"] == {
        "chunks": str(folder / "events_chunks.csv"),
        "rows": str(folder / "events_rows.parquet"),
        "receipts": str(folder / "receipts.jsonl"),  # one line: this run's
    }
    assert pd.read_csv(events["files"]["chunks"])["status"].tolist() == ["sent"] * 3
    assert statuses(events["files"]["rows"]) == {"sent": N_EVENTS}

    identify = xcom("churn_send", "identify", run_id)
    assert identify["counts"]["sent"] == 3 and identify["requests"] == 3
    # no email_opted_in column: the contract's default, said in the summary
    assert [(n["kind"], n["count"]) for n in identify["notes"]] == [("opted_in_by_default", 3)]
    assert statuses(identify["files"]["rows"]) == {"sent": 3}
    assert Path(identify["files"]["rows"]).parent.parent.name == "identify"

    # the rendered fields hold the path and the options; an upstream frame is not rendered
    rendered: dict[str, str] = dict(
        query(
            "SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE run_id = ?",
            run_id,
        )
    )
    send_fields = json.loads(rendered["send_events"])
    assert send_fields["source"] == inputs["events"]
    assert send_fields["results_dir"] == str(folder)
    assert json.loads(rendered["identify"])["source"] is None
    assert not any(email in str(rendered) for email in EMAILS)


def test_a_refused_key_fails_the_task_at_once_with_the_message(
    sandbox: cc.Sandbox,
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    use_connection(monkeypatch, sandbox.base_url, BAD_KEY)
    state, tis, run_id = run_dag("churn_send", inputs)
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed"
    assert tis["send_events"] == ("failed", 1)  # no retry: a refused key stays refused
    assert "churn events: the API refused the key (HTTP 401)" in logs
    assert sandbox.events().empty and sandbox.users().empty
    summary = xcom("churn_send", "send_events", run_id, key="churn_summary")
    assert summary["error"].startswith("AuthenticationError: the API refused the key")
    assert summary["exit_code"] == 3


def test_undeliverable_rows_fail_the_task_with_the_runs_summary(
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with cc.Sandbox(api_keys=[GOOD_KEY], error_rate=1.0) as sb:  # every request: a 5xx
        use_connection(monkeypatch, sb.base_url, GOOD_KEY, max_attempts=2)
        state, tis, run_id = run_dag("churn_send", inputs)
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed" and tis["send_events"] == ("failed", 1)
    assert (
        "churn events: rows not delivered: events: 10 rows -> sent 0, skipped 0, invalid 0, "
        "rejected 0, failed 10; 3 requests (failed 3)"
    ) in logs
    summary = xcom("churn_send", "send_events", run_id, key="churn_summary")
    assert summary["counts"]["failed"] == N_EVENTS and summary["exit_code"] == 2
    assert statuses(summary["files"]["rows"]) == {"failed": N_EVENTS}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("api", "tries", "error"),
    [
        ("refused", 2, "connection refused"),  # the API down: a later try may find it up
        ("not_tls", 1, "does not speak TLS on this port"),  # the URL must change first
    ],
)
def test_a_stopped_run_is_retried_only_when_its_error_is_retryable(
    sandbox: cc.Sandbox,
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    api: str,
    tries: int,
    error: str,
) -> None:
    url = (
        f"http://127.0.0.1:{_closed_port()}"
        if api == "refused"
        else sandbox.base_url.replace("http://", "https://")
    )
    use_connection(monkeypatch, url, GOOD_KEY, max_attempts=1)
    state, tis, run_id = run_dag("churn_retry", inputs)  # retries=1
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed"
    assert tis["send_events"] == ("failed", tries)
    assert error in logs
    summary = xcom("churn_retry", "send_events", run_id, key="churn_summary")
    assert summary["error"].startswith("TransportError: cannot reach the API")


@pytest.mark.parametrize("with_ledger", [False, True], ids=["no_ledger", "ledger"])
def test_a_task_retried_after_sending_part_of_its_chunks_stores_nothing_twice(
    sandbox: cc.Sandbox,
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    with_ledger: bool,
) -> None:
    # try 1: the first batch of 2 is stored but its answer is lost; with one attempt per
    # request its rows end "failed", the other 4 batches are sent, the task fails, Airflow
    # retries it
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY, max_attempts=1)
    sandbox.script_faults([cc.Fault("drop", endpoint="/v1/events/batch")])
    dag_id = "churn_retry_ledger" if with_ledger else "churn_retry"
    state, tis, run_id = run_dag(dag_id, inputs)
    assert state == "success"
    assert tis["send_events"] == ("success", 2)

    stats = sandbox.stats()
    assert stats["stored"] == N_EVENTS == len(sandbox.events())  # each event once
    summary = xcom(dag_id, "send_events", run_id)
    assert summary["try_number"] == 2
    if with_ledger:  # try 2 sent only the 2 rows of unknown outcome
        assert stats["duplicates"] == 2
        assert summary["counts"] | {"sent": 2, "skipped": 8} == summary["counts"]
    else:  # try 2 re-sent all 10: the API de-duplicated them by message id
        assert stats["duplicates"] == N_EVENTS
        assert summary["counts"]["sent"] == N_EVENTS
    first_try = Path(summary["results_dir"]).parent / "try_1"  # kept, not overwritten
    assert statuses(first_try / "events_rows.parquet") == {"sent": 8, "failed": 2}


def test_invalid_rows_are_reported_and_fail_the_task_only_when_asked(
    sandbox: cc.Sandbox,
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    events = pd.read_parquet(inputs["events"])
    events.loc[0, "event_type"] = "Not Valid"
    events.to_parquet(tmp_path / "some_invalid.parquet")
    use_connection(monkeypatch, sandbox.base_url, GOOD_KEY)
    state, tis, run_id = run_dag(
        "churn_strictness", {"events": str(tmp_path / "some_invalid.parquet")}
    )
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed"
    # no retries for data that must change, or for a typo in the DAG
    assert tis == {"lenient": ("success", 1), "strict": ("failed", 1), "typo": ("failed", 1)}
    lenient = xcom("churn_strictness", "lenient", run_id)
    assert lenient["counts"]["invalid"] == 1 and lenient["counts"]["sent"] == N_EVENTS - 1
    assert lenient["exit_code"] == 1
    assert "churn events: 1 invalid, 0 expired and 0 held rows were not sent" in logs
    strict = xcom("churn_strictness", "strict", run_id, key="churn_summary")
    assert strict["counts"]["invalid"] == 1
    assert statuses(strict["files"]["rows"]) == {"sent": N_EVENTS - 1, "invalid": 1}
    assert (
        "churn events: rows not delivered: events: 10 rows -> sent 9, skipped 0, invalid 1" in logs
    )
    assert "churn events: unknown send_options ['namepsace']; known: [" in logs
    assert sandbox.stats()["stored"] == N_EVENTS - 1


def _kill_after(sb: cc.Sandbox, requests: int) -> list[float]:
    """SIGTERM this process once the sandbox has seen ``requests`` more requests (within
    20 s), as Airflow's supervisor does to a task it stops; returns [the time it did]."""
    killed: list[float] = []

    def seen() -> int:
        return sum(sb.stats()["requests"].values())

    before = seen()

    def watch() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if seen() >= before + requests:
                killed.append(time.time())
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def test_sigterm_stops_the_send_through_on_kill_and_keeps_the_results(
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    query: Query,
) -> None:
    with cc.Sandbox(api_keys=[GOOD_KEY], latency=0.3) as sb:
        use_connection(monkeypatch, sb.base_url, GOOD_KEY)
        killed = _kill_after(sb, 2)
        state, tis, run_id = run_dag("churn_kill", inputs)
        stored = sb.stats()["stored"]
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed" and tis["send_events"] == ("failed", 1)
    assert "churn events: stopping the send (the task was killed)" in logs
    assert "Interrupted: interrupted: " in logs
    assert 2 <= stored < N_EVENTS  # 10 requests of 0.3 s would take 3 s
    ((ended,),) = query(
        "SELECT end_date FROM task_instance WHERE run_id = ? AND task_id = 'send_events'", run_id
    )
    assert 0 <= pd.Timestamp(ended).timestamp() - killed[0] < 3  # stopped, written, failed
    summary = xcom("churn_kill", "send_events", run_id, key="churn_summary")
    assert summary["error"].startswith("Interrupted: interrupted: ")
    rows = pd.read_parquet(summary["files"]["rows"])
    assert len(rows) == N_EVENTS
    sent = summary["counts"]["sent"]
    assert (rows["status"] == "sent").sum() == sent
    assert sent <= stored <= sent + 1  # the one request in flight: outcome unknown
    failed = rows.loc[rows["status"] == "failed", "error"]
    assert set(failed) <= {"interrupted; outcome unknown, safe to re-send", "not sent: interrupted"}


def test_an_execution_timeout_stops_the_send_and_keeps_the_results(
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with cc.Sandbox(api_keys=[GOOD_KEY], latency=0.5) as sb:
        use_connection(monkeypatch, sb.base_url, GOOD_KEY)
        state, tis, run_id = run_dag("churn_timeout", inputs)
        stored = sb.stats()["stored"]
    logs = "".join(capfd.readouterr()) + caplog.text
    assert state == "failed" and tis["send_events"][0] == "failed"
    assert "AirflowTaskTimeout" in logs  # Airflow's own exception, handled as a timeout
    assert stored < N_EVENTS  # 10 requests of 0.5 s, stopped after 2 s
    summary = xcom("churn_timeout", "send_events", run_id, key="churn_summary")
    assert summary["counts"]["sent"] <= stored <= summary["counts"]["sent"] + 1
    assert len(pd.read_parquet(summary["files"]["rows"])) == N_EVENTS


def test_the_keys_appear_nowhere(
    inputs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    query: Query,
    airflow_home: Path,
) -> None:
    # last in this file: the DB then holds every run above too; these add a successful,
    # a refused and a killed run whose logs are checked here
    with cc.Sandbox(api_keys=[GOOD_KEY], latency=0.2) as sb:
        use_connection(monkeypatch, sb.base_url, GOOD_KEY)
        assert run_dag("churn_send", inputs)[0] == "success"
        _kill_after(sb, 1)
        assert run_dag("churn_kill", inputs)[0] == "failed"
        use_connection(monkeypatch, sb.base_url, BAD_KEY)
        assert run_dag("churn_send", inputs)[0] == "failed"
    # dag.test() writes task logs to this process's stdout/stderr (and logging)
    logs = "".join(capfd.readouterr()) + caplog.text
    assert "events: 10 rows -> sent 10" in logs and "refused the key" in logs
    assert "stopping the send" in logs
    assert leaks(logs.encode()) == []
    assert not any(email in logs for email in EMAILS)  # nor identity values

    tables = [str(t) for (t,) in query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert {"rendered_task_instance_fields", "xcom", "connection"} <= set(tables)
    assert query("SELECT count(*) FROM xcom WHERE key = 'churn_summary'")[0][0] >= 3
    for table in tables:  # every table, every column, as text and as bytes
        for row in query(f'SELECT * FROM "{table}"'):
            for value in row:
                blob = value if isinstance(value, bytes) else str(value).encode()
                assert leaks(blob) == [], table
    # the DB file itself (free pages, journal), log files if any, and every result file
    files = [p for p in airflow_home.rglob("*") if p.is_file()]
    assert sum(p.suffix == ".parquet" for p in files) >= 3
    for path in files:
        assert leaks(path.read_bytes()) == [], path
