"""decide(): what each answer means, row by row of the table."""

from __future__ import annotations

import pytest

from churn_connector._delivery.retry import Failure, Verdict, decide

TABLE: list[tuple[int | None, Failure | None, Verdict]] = [
    (200, None, "sent"),
    (201, None, "sent"),
    (204, None, "sent"),
    (299, None, "sent"),
    (301, None, "stop_endpoint"),
    (307, None, "stop_endpoint"),
    (308, None, "stop_endpoint"),
    (400, None, "reject"),
    (401, None, "stop_auth"),
    (402, None, "reject"),
    (403, None, "stop_auth"),
    (404, None, "stop_endpoint"),
    (405, None, "stop_endpoint"),
    (408, None, "retry"),
    (409, None, "reject"),
    (413, None, "reject"),
    (422, None, "reject"),
    (429, None, "retry"),
    (499, None, "reject"),
    (500, None, "retry"),
    (502, None, "retry"),
    (503, None, "retry"),
    (599, None, "retry"),
    (100, None, "fail"),
    (600, None, "fail"),
    (None, "network", "retry"),
    (None, "local", "fail"),
]


@pytest.mark.parametrize(("status", "failure", "verdict"), TABLE)
def test_each_answer_has_one_verdict(
    status: int | None, failure: Failure | None, verdict: Verdict
) -> None:
    assert decide(status, failure) == verdict
