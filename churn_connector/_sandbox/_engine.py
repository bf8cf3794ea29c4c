"""The request engine: routing, auth, faults, validation and storage, without sockets.

:class:`Engine` turns a parsed :class:`Request` into a :class:`Response`; ``_server`` does the
HTTP/1.1 framing around it. Checks run in this order, and the first failing one answers:

1. route: unknown path 404, known path with another method 405 (``Allow: POST``)
2. auth: missing or unknown key 401 (``WWW-Authenticate: Bearer``); never faked by faults;
   a body of more than 64 KiB of a request that fails 1 or 2 is never read (the
   connection is closed)
3. framing: query string 400, no ``Content-Length`` 411, body above ``max_body_bytes`` 413
   (32 MiB unless the sandbox is given another cap, or None)
4. faults: the next scripted one, else a seeded random draw (5xx / 429 answer at once;
   stall sleeps then continues; drop continues, stores, and then sends nothing)
5. ``Content-Type`` 415, strict JSON 400, contract validation 400 (all problems listed)
6. store, 200 with a small JSON body

Latency is slept before step 1, for every request.
"""

from __future__ import annotations

import email.message
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any, Final, Literal

from . import _rules
from ._faults import Fault, FaultPlan, format_retry_after
from ._store import RequestRecord, Store

_log = logging.getLogger("churn_connector.sandbox")

BATCH: Final = "/v1/events/batch"
TRACK: Final = "/v1/events/track"
IDENTIFY: Final = "/v1/identify"
ROUTES: Final = (BATCH, TRACK, IDENTIFY)
# Requests parsed, checked and stored at once. Two keep the store busy (one parses while the
# other is in SQLite, which releases the GIL); more gain nothing under the GIL and cost much:
# every parsed body that waits for the store survives into the collector's oldest generation,
# and 16 of them (the client's default concurrency) made a full collection every ~30k events.
WORKING: Final = 2
_SECRET_HEADERS: Final = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})
_REASONS: Final = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    411: "length_required",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}

Framing = Literal["ok", "missing_length", "chunked", "bad_length", "too_large", "unread"]
# a body larger than this is answered 413 unread (a test server must not be made to buffer
# gigabytes); far above any request the client builds. ``max_body_bytes=None``: no cap
DEFAULT_MAX_BODY_BYTES: Final = 32 << 20


@dataclass
class Request:
    """An HTTP request as read off the wire; ``body`` is None when it was not read."""

    method: str
    target: str
    headers: email.message.Message
    body: bytes | None
    framing: Framing = "ok"


@dataclass
class Response:
    """What to answer; ``drop`` means: close the connection without sending anything."""

    status: int
    body: dict[str, Any] | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    drop: bool = False


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The error body shape: ``{"error": {"code", "message", "details": [...]}}``."""
    return {"error": {"code": code, "message": message, "details": details or []}}


def default_code(status: int) -> str:
    if status in _REASONS:
        return _REASONS[status]
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def error_response(status: int, message: str, code: str | None = None, **headers: str) -> Response:
    return Response(
        status,
        error_body(code or default_code(status), message),
        [(name.replace("_", "-"), value) for name, value in headers.items()],
    )


def redact_headers(headers: email.message.Message) -> dict[str, str]:
    """Header names lower-cased; credentials replaced by ``<redacted>``; repeats joined."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        shown = "<redacted>" if key in _SECRET_HEADERS else value
        out[key] = f"{out[key]}, {shown}" if key in out else shown
    return out


class _InFlight:
    """Counts identify requests being handled per (app, user) and reports new maxima."""

    def __init__(self, on_new_max: Callable[[str, int], None]) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._max: dict[str, int] = {}
        self._lock = threading.Lock()
        self._on_new_max = on_new_max

    @contextmanager
    def track(self, app: str | None, user: str | None) -> Iterator[None]:
        if app is None or user is None:
            yield
            return
        key = (app, user)
        with self._lock:
            count = self._counts.get(key, 0) + 1
            self._counts[key] = count
            new_max = count > self._max.get(app, 0)
            if new_max:
                self._max[app] = count
        try:
            if new_max:
                self._on_new_max(app, count)
            yield
        finally:
            with self._lock:
                self._counts[key] -= 1
                if not self._counts[key]:
                    del self._counts[key]


class Engine:
    """Request -> Response, with storage and fault injection. Thread-safe."""

    def __init__(
        self,
        *,
        apps: Mapping[str, str],
        store: Store,
        plan: FaultPlan,
        clock: Callable[[], datetime],
        stopping: threading.Event,
        max_body_bytes: int | None,
    ) -> None:
        self._apps = dict(apps)  # api key -> app id
        self._store = store
        self._plan = plan
        self._clock = clock
        self._stopping = stopping
        self.max_body_bytes = max_body_bytes
        self._inflight = _InFlight(store.raise_max_concurrency)
        self._working = threading.Semaphore(WORKING)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() is None:
            raise TypeError("the sandbox clock must return a timezone-aware datetime")
        return now.astimezone(UTC)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)  # stop() wakes sleepers so shutdown stays quick

    def redact(self, text: str) -> str:
        """``text`` with every configured API key replaced by ``<redacted>``."""
        for key in self._apps:
            text = text.replace(key, "<redacted>")
        return text

    def authenticate(self, headers: email.message.Message) -> tuple[str | None, str]:
        """(app id, "") for a known key, else (None, why). Every credential sent must agree."""
        presented = [value.strip() for value in headers.get_all("X-API-Key") or []]
        for value in headers.get_all("Authorization") or []:
            scheme, _, credential = value.strip().partition(" ")
            if scheme.lower() != "bearer":
                return None, "the Authorization header must use the Bearer scheme"
            presented.append(credential.strip())
        if not presented:
            return None, "missing API key: send X-API-Key or Authorization: Bearer"
        apps = {self._apps.get(key) for key in presented}
        if None in apps:
            return None, "invalid API key"
        if len(apps) != 1:
            return None, "the request carries two different API keys"
        return apps.pop(), ""

    def reads_body(self, method: str, target: str, headers: email.message.Message) -> bool:
        """Whether a request's body is read: an authenticated POST to an endpoint's; any
        other is answered (404, 405, 401) without reading a body of more than 64 KiB, and
        the connection closed, so no one without a key makes the sandbox read their bytes."""
        path = target.partition("?")[0]
        return path in ROUTES and method == "POST" and self.authenticate(headers)[0] is not None

    def handle(self, request: Request) -> Response:
        """Answer one request and append it to the request log."""
        started = datetime.now(UTC)
        path, _, query = request.target.partition("?")
        app, why = self.authenticate(request.headers)
        fault: Fault | None = None
        user = None
        if path == IDENTIFY and request.method == "POST" and app is not None:
            user = _peek_user(request.body)
        try:
            with self._inflight.track(app, user):
                self._sleep(self._plan.knobs.latency)
                response, fault = self._respond(request, path, query, app, why, started)
        except Exception:
            # a bug or a bad clock must not look like a network failure to the client
            _log.debug("sandbox internal error", exc_info=True)
            response = error_response(500, "internal sandbox error", "internal_error")
        body = request.body or b""
        self._store.log_request(
            RequestRecord(
                app=app,
                method=request.method,
                path=path,
                status=None if response.drop else response.status,
                fault=None if fault is None else fault.kind,
                headers=redact_headers(request.headers),
                body_len=len(body),
                body_sha256=hashlib.sha256(body).hexdigest(),
                received_at=started,
            )
        )
        return response

    def _respond(
        self, request: Request, path: str, query: str, app: str | None, why: str, started: datetime
    ) -> tuple[Response, Fault | None]:
        if path not in ROUTES:
            return error_response(404, f"no endpoint {path}"), None
        if request.method != "POST":
            return error_response(405, f"{path} accepts POST only", Allow="POST"), None
        if app is None:
            return error_response(401, why, WWW_Authenticate="Bearer"), None
        framing = self._framing_error(request, query)
        if framing is not None:
            return framing, None
        fault = self._plan.next_fault(path)
        if fault is not None:
            injected = self._inject(fault)
            if injected is not None:
                return injected, fault
        with self._working:
            response = self._process(request, path, app, started)
        response.drop = fault is not None and fault.kind == "drop"
        return response, fault

    def _framing_error(self, request: Request, query: str) -> Response | None:
        if request.framing in ("missing_length", "chunked"):
            return error_response(411, "send the body with a Content-Length header")
        if request.framing == "bad_length":
            return error_response(400, "invalid Content-Length header", "invalid_request")
        if request.framing == "too_large":
            return error_response(413, f"the body exceeds {self.max_body_bytes} bytes")
        if query:
            return error_response(400, "query parameters are not accepted", "unknown_field")
        return None

    def _inject(self, fault: Fault) -> Response | None:
        """The response a fault forces, or None when handling continues (stall, drop)."""
        if fault.kind == "stall":
            self._sleep(fault.seconds)
            return None
        retry_after = fault.retry_after
        if fault.kind == "429":
            shown = format_retry_after(
                self._plan.knobs.retry_after if retry_after is None else retry_after
            )
            return error_response(429, "injected rate limit", Retry_After=shown)
        if fault.kind == "5xx":
            extra = {} if retry_after is None else {"Retry_After": format_retry_after(retry_after)}
            return error_response(fault.status, "injected server error", "injected_fault", **extra)
        return None

    def _process(self, request: Request, path: str, app: str, started: datetime) -> Response:
        if not _rules.is_json_content_type(request.headers.get("Content-Type")):
            return error_response(415, "Content-Type must be application/json")
        try:
            body, exact = _rules.parse_json(request.body or b"")
        except _rules.InvalidJSON as exc:
            return error_response(400, f"the body is not valid JSON: {exc}", "invalid_json")
        now = self._now()
        if path == IDENTIFY:
            issues = _rules.validate_identify(body)
        elif path == BATCH:
            issues = _rules.validate_batch(body, now)
        else:
            issues = _rules.validate_track(body, now)
        if issues:
            details = [issue.as_json() for issue in issues]
            message = f"{len(issues)} validation problem(s); nothing was stored"
            return Response(400, error_body("validation_failed", message, details))
        if path == IDENTIFY:
            changed = self._store.apply_identify(app, body, started, datetime.now(UTC))
            return Response(200, {"ok": True, "changed": changed})
        events = body["events"] if path == BATCH else [body]
        outcome = self._store.store_events(app, events, now, exact=exact)
        return Response(
            200,
            {
                "accepted": outcome.accepted,
                "duplicates": outcome.duplicates,
                "conflicts": outcome.conflicts,
            },
        )


def _peek_user(body: bytes | None) -> str | None:
    """The identify user id, for concurrency tracking before the body is validated."""
    try:
        parsed = _rules.parse_json(body or b"").value
    except _rules.InvalidJSON:
        return None
    if isinstance(parsed, dict):
        user = parsed.get("external_user_id")
        if type(user) is str and user:
            return user
    return None
