"""Alerts: ``alert_webhook`` posts one JSON message (Slack-compatible ``text`` and the
receipt) when a run ends with undelivered rows or invalid rows above ``alert_invalid``,
over real HTTP to a receiver the tests start on 127.0.0.1; never the key or a row's values;
a webhook that is down is a warning, never a failed run."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._cli import main
from churn_connector._results.alerts import ATTEMPTS

pytestmark = pytest.mark.e2e

KEY = "sk_test_ALERT_CANARY_0123456789"
VALUE = "row_value_CANARY_5f3e"


class Receiver(ThreadingHTTPServer):
    """Records each POST's body; answers with ``statuses`` in turn (then 200)."""

    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses = statuses
        self.bodies: list[bytes] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/services/T0/B0/secret"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        self.server.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def _receiver(statuses: list[int]) -> Iterator[Receiver]:
    server = Receiver(statuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from _receiver([])


@pytest.fixture
def sandbox_with_key() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[KEY]) as box:
        yield box


def _events(now: pd.Timestamp, good: int, bad: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(good)] + [""] * bad,
            "event_type": ["login"] * (good + bad),
            "occurred_at": [now - pd.Timedelta(minutes=i + 1) for i in range(good + bad)],
            "properties": [{"plan": VALUE}] * (good + bad),
        }
    )


def test_invalid_rows_post_one_message_without_the_key_or_row_values(
    sandbox_with_key: cc.Sandbox, receiver: Receiver, now: pd.Timestamp
) -> None:
    client = cc.Client(base_url=sandbox_with_key.base_url, api_key=KEY)
    result = client.send_events(_events(now, 8, 2), alert_webhook=receiver.url)
    assert result.exit_code == 1
    [body] = receiver.bodies
    assert KEY.encode() not in body and VALUE.encode() not in body
    message = json.loads(body)
    assert message["text"].endswith("2 invalid rows (10 rows read)")
    assert message["receipt"]["run_id"] == result.run_id
    assert message["receipt"]["counts"]["invalid"] == 2


def test_a_clean_run_and_invalid_rows_within_the_threshold_post_nothing(
    client: cc.Client, receiver: Receiver, now: pd.Timestamp
) -> None:
    client.send_events(_events(now, 10, 0), alert_webhook=receiver.url)
    result = client.send_events(
        _events(now, 18, 2), alert_webhook=receiver.url, alert_invalid="10%"
    )
    assert result.counts["invalid"] == 2
    assert receiver.bodies == []
    client.send_events(_events(now, 18, 2), alert_webhook=receiver.url, alert_invalid=1)
    assert len(receiver.bodies) == 1
    assert "2 invalid rows, above 1" in json.loads(receiver.bodies[0])["text"]


def test_undelivered_rows_alert_from_the_command_line(
    sandbox: cc.Sandbox,
    receiver: Receiver,
    now: pd.Timestamp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHURN_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("CHURN_API_KEY", sandbox.api_key)
    sandbox.set_faults(error_rate=1.0)  # every attempt of the one batch: a 5xx
    export = tmp_path / "e.csv"
    _events(now, 5, 0).drop(columns="properties").to_csv(export, index=False)
    code = main(["send", "events", str(export), "--alert-webhook", receiver.url, "-q"])
    assert code == 2
    [body] = receiver.bodies
    assert "5 valid rows not delivered" in json.loads(body)["text"]


def test_an_alert_is_tried_again_after_a_5xx(client: cc.Client, now: pd.Timestamp) -> None:
    for flaky in _receiver([503]):
        client.send_events(_events(now, 1, 1), alert_webhook=flaky.url)
        assert len(flaky.bodies) == 2  # one refused, one delivered


def test_a_webhook_that_is_down_is_a_warning_not_a_failed_run(
    client: cc.Client, now: pd.Timestamp, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    down = f"http://127.0.0.1:{port}/services/T0/B0/secret_path_CANARY"
    with caplog.at_level(logging.WARNING, logger="churn_connector"):
        result = client.send_events(_events(now, 3, 1), alert_webhook=down)
    assert result.exit_code == 1
    assert f"not delivered (ConnectError, {ATTEMPTS} attempts at most)" in caplog.text
    assert "secret_path_CANARY" not in caplog.text


def test_a_plain_http_webhook_off_this_machine_is_refused(client: cc.Client) -> None:
    with pytest.raises(cc.ConfigurationError, match="https://"):
        client.send_events(pd.DataFrame(), alert_webhook="http://hooks.example.com/x")
