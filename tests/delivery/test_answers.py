"""What the API said: its message becomes the error of the rows it refused (the event's own
where the answer names it), masked and trimmed like every echoed body, whatever its shape."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest
import requests

import churn_connector as cc
from churn_connector._delivery.answers import RESPONSE_TEXT_LIMIT, Said, what_it_said
from tests.conftest import MakeEvents

KEY = "sk_test_CANARYKEY_0123456789abcdef"
NO_RETRY = cc.RetryPolicy(max_attempts=1)


def scrub(text: str) -> str:
    return text.replace(KEY, "********")


SANDBOX_BODY = (
    '{"error": {"code": "validation_failed", "message": "2 validation problem(s)", "details": '
    '[{"index": 1, "field": "events[1].event_type", "message": "must match the pattern"}, '
    '{"index": 1, "field": "events[1].occurred_at", "message": "too old"}, '
    '{"index": 3, "field": "events[3]", "message": "must be an object"}]}}'
)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            SANDBOX_BODY,
            Said(
                "2 validation problem(s)",
                (
                    (1, "event_type: must match the pattern; occurred_at: too old"),
                    (3, "must be an object"),
                ),
            ),
        ),
        ('{"message": "quota exceeded"}', Said("quota exceeded")),
        ('{"error": "bad request", "details": "x"}', Said("bad request")),
        ('{"detail": "Not Found"}', Said("Not Found")),
        ('{"error": {"code": "too_large"}}', Said("too_large")),
        ('{"status": 3}', Said('{"status": 3}')),
        ('["a", "b"]', Said('["a", "b"]')),
        ("upstream\n  timed out", Said("upstream timed out")),
        (
            "<html><title>502 Bad Gateway</title><h1>nginx</h1></html>",
            Said("502 Bad Gateway nginx"),
        ),
        ("", Said()),
        ("   ", Said()),
        (None, Said()),
    ],
    ids=[
        "sandbox",
        "message",
        "error-text",
        "detail",
        "code-only",
        "other-json",
        "json-list",
        "text",
        "html",
        "empty",
        "blank",
        "none",
    ],
)
def test_any_body_is_read_as_text_for_people(body: str | None, said: Said) -> None:
    assert what_it_said(body, scrub) == said


def test_a_long_body_is_trimmed() -> None:
    said = what_it_said("x" * 5_000, scrub)
    assert said.message == "x" * RESPONSE_TEXT_LIMIT + "…"


def test_a_key_escaped_in_json_is_masked_once_decoded() -> None:
    escaped = KEY.replace("s", "\\u0073", 1)  # the same text, once JSON is decoded
    said = what_it_said(f'{{"message": "you sent {escaped}"}}', scrub)
    assert said.message == "you sent ********"


@pytest.mark.parametrize("through", ["http.client", "requests.Session"])
def test_a_key_across_the_cut_is_masked_before_the_body_is_trimmed(
    odd_server: Callable[..., str], now: pd.Timestamp, events: pd.DataFrame, through: str
) -> None:
    head = "x" * (RESPONSE_TEXT_LIMIT - 10)  # the key starts 10 characters before the cut
    url = odd_server(400, f"{head}{KEY} and more".encode())
    session = requests.Session() if through == "requests.Session" else None
    client = cc.Client(url, KEY, retry=NO_RETRY, bisect_rejected=False, session=session)
    result = client.send_events(events, now=now)
    assert result.counts["rejected"] == 10
    texts = result.rows.to_csv() + result.chunks.to_csv() + result._repr_html_()
    assert "sk_test_CAN" not in texts and "sk_test" not in texts  # no part of it
    masked = f"{head}******** and more"
    assert result.chunks["response"].iloc[0] == masked[:RESPONSE_TEXT_LIMIT] + "…"


def test_rows_named_by_the_answer_carry_their_own_message(
    sandbox: cc.Sandbox, now: pd.Timestamp, make_events: MakeEvents
) -> None:
    events = make_events(now, n=6)
    later = now + pd.Timedelta(hours=1)
    events.loc[[1, 4], "occurred_at"] = later  # valid by our clock, not by the sandbox's
    client = cc.Client(sandbox.base_url, sandbox.api_key, bisect_rejected=False)
    res = client.send_events(events, now=later)
    assert res.counts["rejected"] == 6  # the whole request was refused
    errors = res.rows["error"]
    own = "HTTP 400: occurred_at: more than 5 minutes after server time"
    assert errors.loc[[1, 4]].tolist() == [own, own]
    others = errors.drop(index=[1, 4])
    assert others.str.startswith("HTTP 400: 2 validation problem(s); nothing was stored").all()
    assert others.str.endswith("(the answer named other events of the request, not this one)").all()
    assert res.chunks["error"].iloc[0] == "HTTP 400: 2 validation problem(s); nothing was stored"
    assert '"details"' in res.chunks["response"].iloc[0]  # the body, for whoever needs it


def test_a_failed_request_says_what_the_api_answered(
    odd_server: Callable[..., str], now: pd.Timestamp, events: pd.DataFrame
) -> None:
    url = odd_server(503, b'{"error": {"message": "maintenance until 10:00"}}')
    res = cc.Client(url, KEY, retry=NO_RETRY).send_events(events, now=now)
    assert res.counts["failed"] == 10
    assert set(res.rows["error"]) == {"HTTP 503: maintenance until 10:00"}
