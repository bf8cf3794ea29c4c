"""Fixtures for the sandbox conformance suite: sandboxes, a small HTTP client, event factories.

Everything goes over real HTTP to 127.0.0.1. The sandbox clock is frozen at ``NOW`` so the
time-window tests are exact. Every test that posts through ``api`` runs twice: with bodies
spelled by the standard library (spaces after separators, ``\\u`` escapes: the sandbox's
strict parser reads them) and compact as orjson writes them (its fast parser's case, as the
package sends them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeAlias

import orjson
import pytest
import requests

from churn_connector._sandbox import Sandbox

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
TIMEOUT = 5.0
_DEFAULT = object()


def wire_time(when: datetime) -> str:
    """The contract's occurred_at form: YYYY-MM-DDTHH:MM:SS.mmmZ."""
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class Api:
    """A tiny client for one sandbox over one pooled ``requests`` session."""

    def __init__(self, sandbox: Sandbox, session: requests.Session, spelling: str = "json") -> None:
        self.sandbox = sandbox
        self.session = session
        self.spelling = spelling

    def encode(self, body: Any) -> bytes:
        """``body`` as JSON bytes in this client's spelling."""
        if self.spelling == "orjson":
            try:
                return orjson.dumps(body)
            except (TypeError, orjson.JSONEncodeError):
                pass  # integers beyond 64 bits, NaN: only the standard library writes them
        return json.dumps(body).encode()

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        key: Any = _DEFAULT,
        header: str = "Authorization",
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
        timeout: float = TIMEOUT,
    ) -> requests.Response:
        """POST ``body`` as JSON (or ``raw`` bytes); ``key=None`` sends no credentials."""
        sent: dict[str, str] = {}
        if content_type is not None:
            sent["Content-Type"] = content_type
        api_key = self.sandbox.api_key if key is _DEFAULT else key
        if api_key is not None:
            if header == "Authorization":
                sent["Authorization"] = f"Bearer {api_key}"
            else:
                sent[header] = api_key
        sent.update(headers or {})
        data = raw if raw is not None else self.encode(body)
        return self.session.post(
            self.sandbox.base_url + path, data=data, headers=sent, timeout=timeout
        )

    def batch(self, events: list[dict[str, Any]], **kwargs: Any) -> requests.Response:
        return self.post("/v1/events/batch", {"events": events}, **kwargs)

    def track(self, event: dict[str, Any], **kwargs: Any) -> requests.Response:
        return self.post("/v1/events/track", event, **kwargs)

    def identify(self, body: dict[str, Any], **kwargs: Any) -> requests.Response:
        return self.post("/v1/identify", body, **kwargs)

    @staticmethod
    def problems(response: requests.Response) -> set[tuple[int | None, str | None, str]]:
        """(index, field, code) of every detail in a 400 validation body."""
        assert response.status_code == 400, response.text
        details = response.json()["error"]["details"]
        return {(d["index"], d["field"], d["code"]) for d in details}

    @staticmethod
    def fields(response: requests.Response) -> set[str | None]:
        """The field paths named in an error body."""
        return {field for _, field, _ in Api.problems(response)}


class MakeEvent(Protocol):
    """The ``make_event`` fixture: ``make_event(n, **overrides)`` (see :func:`event`)."""

    def __call__(self, n: int = ..., **overrides: Any) -> dict[str, Any]: ...


class MakeSandbox(Protocol):
    """The ``make_sandbox`` fixture: ``make_sandbox(**sandbox_options)``, started."""

    def __call__(self, **options: Any) -> Sandbox: ...


ApiFor: TypeAlias = Callable[[Sandbox], Api]
"""The ``api_for`` fixture: a client for another sandbox."""

FmtTime: TypeAlias = Callable[[datetime], str]
"""The ``fmt_time`` fixture: a datetime as the contract's occurred_at string."""


def event(n: int = 0, **overrides: Any) -> dict[str, Any]:
    """A valid wire event; ``n`` varies the message id."""
    base: dict[str, Any] = {
        "external_user_id": "user-1",
        "event_type": "page_view",
        "occurred_at": wire_time(NOW - timedelta(hours=1)),
        "properties": {"plan": "pro", "n": n},
        "context": {"$message_id": f"msg-{n}"},
    }
    base.update(overrides)
    return base


@pytest.fixture
def now() -> datetime:
    """The frozen sandbox clock of the default fixtures."""
    return NOW


@pytest.fixture
def fmt_time() -> FmtTime:
    """Formats a datetime as the contract's occurred_at string."""
    return wire_time


@pytest.fixture
def make_event() -> MakeEvent:
    """Factory for valid wire events: ``make_event(n, **overrides)``."""
    return event


@pytest.fixture
def make_sandbox() -> Iterator[MakeSandbox]:
    """Factory for started sandboxes (clock frozen at NOW unless given); all closed after."""
    made: list[Sandbox] = []

    def make(**options: Any) -> Sandbox:
        options.setdefault("clock", lambda: NOW)
        sandbox = Sandbox(**options).start()
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.trust_env = False  # no proxies from the environment for loopback
        yield s


@pytest.fixture(params=["json", "orjson"])
def api_for(session: requests.Session, request: pytest.FixtureRequest) -> ApiFor:
    """``api_for(sandbox)``: a client for another sandbox, sharing the test's session; each
    test runs with both body spellings."""
    spelling: str = request.param
    return lambda sandbox: Api(sandbox, session, spelling)


@pytest.fixture
def sandbox(make_sandbox: MakeSandbox) -> Sandbox:
    """A default sandbox: one random key, in-memory DB, no faults, clock at NOW."""
    return make_sandbox()


@pytest.fixture
def api(sandbox: Sandbox, api_for: ApiFor) -> Api:
    return api_for(sandbox)
