"""The async network seam: each attempt the delivery policy asks for, made over httpx.

The decisions are ``policy``'s, as for the thread poster (``transport``): how an answer is
judged, the back-off and ``Retry-After``, the 429 pause shared by the client's requests,
the request budget (``max_requests_per_second``), the breaker for a host that cannot be
reached (``fail_fast_after``) and the deadlines, with the same messages and exceptions. A
failed attempt is named by ``failures``, in the thread poster's words; trust and proxies
are ``connections``' (the same CAs; a proxy only as a CONNECT tunnel to an https base URL).
Only the transport and the waiting differ: httpx's ``AsyncClient`` (an optional extra,
``churn-connector[async]``), so an ASGI handler awaits instead of blocking its event loop,
and ``asyncio.sleep``.

A cancelled call (``asyncio.timeout``, a task cancelled) raises ``CancelledError`` at once;
httpx closes the connection of the request it interrupted, so nothing half-read is reused.
A stop (a refused key, the breaker) ends every wait within ``_WAKE`` seconds and prevents
new attempts; an attempt already in flight on another task runs on, within its timeout
(httpx owns it).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .._core import ClientConfig, ConfigurationError, TransportError
from .answers import Outcome
from .chunking import Request
from .connections import proxy_for, ssl_context
from .failures import NetworkFailure, classify, root_of
from .landing import Landing
from .policy import Attempt, Done, Policy, Wait
from .pool import BODY_LIMIT, Answer
from .transport import request_headers

try:  # httpx: the optional async extra
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    httpx = None  # type: ignore[assignment]


__all__ = ["AsyncConnections", "AsyncPoster", "deliver_async"]

_WAKE = 0.25  # seconds: the longest a wait goes without looking whether the run stopped


def _require_httpx() -> None:
    if httpx is None:
        raise ConfigurationError("cc.AsyncClient needs httpx: pip install 'churn-connector[async]'")


class _Headers(Sequence[tuple[str, str]]):
    """The request headers, the key among them, never shown whole (read by httpx as a
    sequence of pairs)."""

    __slots__ = ("_items",)

    def __init__(self, config: ClientConfig) -> None:
        self._items = list(request_headers(config).items())

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        return self._items[index]

    def __repr__(self) -> str:
        return f"_Headers({', '.join(name for name, _ in self._items)})"


class AsyncConnections:
    """The connections to the API: one ``httpx.AsyncClient``, made at first use in the
    running event loop, of at most ``max_concurrency`` connections. One attempt at a time
    per call of ``post``; ``transport``: an httpx transport to send through (tests,
    mounts)."""

    def __init__(self, config: ClientConfig, transport: Any = None) -> None:
        _require_httpx()
        self.config = config
        self.transport = transport
        self.headers = _Headers(config)
        # decided (and refused) as for the thread poster, never by httpx from the environment
        self.proxy = proxy_for(config)
        self._http: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._http is None:
            config = self.config
            https = config.base_url.startswith("https://")
            self._http = httpx.AsyncClient(
                base_url=config.base_url,
                timeout=httpx.Timeout(
                    connect=config.connect_timeout,
                    read=config.read_timeout,
                    write=config.read_timeout,
                    pool=config.request_timeout,
                ),
                verify=ssl_context(config) if https else True,
                trust_env=False,  # the environment's proxy was read (or not) by proxy_for
                proxy=self.proxy,
                follow_redirects=False,  # a redirect would carry the key elsewhere
                limits=httpx.Limits(max_connections=config.max_concurrency),
                transport=self.transport,
            )
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def post(self, path: str, body: bytes, attempt: Attempt, where: str) -> Answer:
        """One POST within ``attempt.timeout``: the answer (its first ``BODY_LIMIT`` bytes),
        or ``NetworkFailure`` named as the thread poster names it."""
        failure: NetworkFailure | None = None
        data = bytearray()
        try:
            async with (
                asyncio.timeout(attempt.timeout),
                self.client().stream("POST", path, content=body, headers=self.headers) as answer,
            ):
                async for part in answer.aiter_raw():
                    data += part
                    if len(data) >= BODY_LIMIT:
                        break  # a huge or endless body is cut off (its connection goes)
        except TimeoutError:
            failure = NetworkFailure(attempt.reason, unreachable=False)
        except httpx.TransportError as exc:
            failure = _failure(exc, attempt, where)
        if failure is not None:
            failure.message = self.config.api_key.scrub(failure.message)
            raise failure  # outside the except block: no context of httpx's frames
        cut = len(data) >= BODY_LIMIT
        text = bytes(data[:BODY_LIMIT]).decode("utf-8", "replace") if data else None
        return Answer(answer.status_code, text, answer.headers.get("Retry-After"), cut)


def _failure(exc: httpx.TransportError, attempt: Attempt, where: str) -> NetworkFailure:
    """An httpx error as the package names a failed attempt (``failures.classify``)."""
    if isinstance(exc, httpx.PoolTimeout):  # no connection free within the attempt's time
        return NetworkFailure(attempt.reason, unreachable=False)
    if isinstance(exc, httpx.TimeoutException):
        kind = "read"
        if isinstance(exc, httpx.ConnectTimeout):
            kind = "connect"
        elif isinstance(exc, httpx.WriteTimeout):  # a server that stopped reading the request
            kind = "write"
        return NetworkFailure(f"{kind} timeout", unreachable=False)
    if isinstance(exc, httpx.ProxyError):
        code = str(exc).split()[:1]  # "502 Bad Gateway"; a 5xx may heal
        return NetworkFailure(
            f"the proxy refused the tunnel to {where} ({exc})",
            unreachable=True,
            retryable=bool(code) and code[0].startswith("5"),
        )
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending" in str(exc):
        return NetworkFailure(
            "the server closed the connection without an answer", unreachable=False
        )
    phase = "answer"
    if isinstance(exc, httpx.ConnectError):
        phase = "tls" if isinstance(root_of(exc), ssl.SSLError) else "connect"
    elif isinstance(exc, httpx.WriteError):
        phase = "send"
    return classify(exc, where, phase=phase)


class AsyncPoster:
    """Posts JSON bytes as the delivery ``policy`` decides, over ``connections``; the
    ``Poster`` of async code. ``policy``: whose shared state (pause, budget, breaker) the
    requests count against (the async client's one-off calls share one; each tracker has
    its own, as the thread client's do)."""

    def __init__(self, connections: AsyncConnections, policy: Policy | None = None) -> None:
        self.connections = connections
        self.policy = policy or Policy(connections.config, deadline="call")

    def stop(self, reason: str) -> None:
        """Make no new attempts, and end every wait (the run is ending)."""
        self.policy.stop(reason)

    def flush(self) -> None:
        """Log the retries counted but not yet logged."""
        self.policy.retries.flush()

    async def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` until the policy is done with it; raise what stops the run
        (``AuthenticationError`` on 401/403, ``TransportError`` when the host cannot be
        used), as the thread poster does."""
        policy = self.policy
        delivery = policy.delivery(path)
        step = delivery.next()
        while True:
            if isinstance(step, Attempt):
                try:
                    answer = await self.connections.post(path, body, step, policy.where)
                except NetworkFailure as exc:
                    step = delivery.failed(exc)
                else:
                    step = delivery.answered(answer)
            elif isinstance(step, Wait):
                await asyncio.sleep(min(step.seconds, _WAKE))  # then asked again: a stop ends it
                step = delivery.next()
            elif isinstance(step, Done):
                return step.outcome
            else:
                self.stop(step.reason)
                raise step.error


async def deliver_async(landing: Landing, poster: AsyncPoster, req: Request) -> None:
    """``landing.deliver`` in an event loop: one request (and, if it is split, its halves)
    sent through ``poster`` as ``landing`` decides. What stops the run raises."""
    kept = landing.unexpired(req)
    if kept is None:
        return
    payload = kept.payload()
    parts = landing.fit(kept, len(payload))
    if parts is not None:
        for part in parts:
            await deliver_async(landing, poster, part)
        return
    number = landing.take_off(kept, len(payload))
    try:
        outcome = await poster.post(kept.path, payload)
    except TransportError as exc:
        landing.stopped(kept, number, len(payload), exc)
        raise
    for half in landing.landed(kept, number, len(payload), outcome):
        await deliver_async(landing, poster, half)
