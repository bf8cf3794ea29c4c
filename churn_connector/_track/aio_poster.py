"""The async network seam: one POST with the client's retry policy, over httpx.

The same decisions as the thread sender's ``HttpPoster``, from the same core: ``decide`` reads
each answer (``_delivery.retry``'s table), ``next_wait`` gives the back-off or the honoured
``Retry-After``, ``RetryLog`` says what was retried, ``what_it_said`` reads an error body
with the key masked. Only the transport differs: httpx's ``AsyncClient`` (an optional extra,
``churn-connector[async]``), so an ASGI handler awaits instead of blocking its event loop.

A cancelled call (``asyncio.timeout``, a task cancelled) raises ``CancelledError`` at once;
httpx closes the connection of the request it interrupted, so nothing half-read is reused.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any, overload

from ..__version__ import __version__
from .._core import AuthenticationError, ClientConfig, ConfigurationError, TransportError
from .._delivery import (
    BODY_LIMIT,
    Outcome,
    OutcomeStatus,
    RetryLog,
    decide,
    next_wait,
    retry_testing,
    ssl_context,
    trim,
    what_it_said,
)

try:  # httpx: the optional async extra
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    httpx = None  # type: ignore[assignment]


__all__ = ["AsyncPoster"]

log = logging.getLogger("churn_connector")


def _require_httpx() -> None:
    if httpx is None:
        raise ConfigurationError("cc.AsyncClient needs httpx: pip install 'churn-connector[async]'")


class _Headers(Sequence[tuple[str, str]]):
    """The request headers, the key among them, never shown whole (read by httpx as a
    sequence of pairs)."""

    __slots__ = ("_items",)

    def __init__(self, config: ClientConfig) -> None:
        self._items = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
            ("Accept-Encoding", "identity"),
            ("User-Agent", f"churn-connector/{__version__}"),
            *config.api_key.auth_headers(config.auth_header).items(),
        ]

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


class AsyncPoster:
    """POSTs JSON bytes with retries over one ``httpx.AsyncClient`` (made at first use,
    in the running event loop)."""

    def __init__(self, config: ClientConfig, transport: Any = None) -> None:
        _require_httpx()
        self.config = config
        self.transport = transport
        self.headers = _Headers(config)
        self.retries = RetryLog(log)
        self._http: httpx.AsyncClient | None = None
        self._paused_until = 0.0  # one 429 pause shared by every request of this client
        self._rng = random.Random()

    def _client(self) -> httpx.AsyncClient:
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
                trust_env=config.trust_env,
                proxy=config.proxy,
                follow_redirects=False,  # a redirect would carry the key elsewhere
                limits=httpx.Limits(max_connections=config.max_concurrency),
                transport=self.transport,
            )
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
        self.retries.flush()

    async def _attempt(
        self, path: str, body: bytes, limit: float
    ) -> tuple[int, str | None, str | None]:
        """One POST: (status, body text, Retry-After), or an httpx/timeout error."""
        async with asyncio.timeout(limit):
            async with self._client().stream(
                "POST", path, content=body, headers=self.headers
            ) as answer:
                data = b""
                async for part in answer.aiter_raw():
                    data += part
                    if len(data) >= BODY_LIMIT:
                        data = data[:BODY_LIMIT]
                        break
        text = data.decode("utf-8", "replace") if data else None
        return answer.status_code, text, answer.headers.get("Retry-After")

    async def post(self, path: str, body: bytes) -> Outcome:
        """POST ``body`` with retries, within the configured deadline; raise
        AuthenticationError on 401/403, TransportError when the API cannot be used."""
        config, policy = self.config, self.config.retry
        started = time.monotonic()
        deadline = None if config.deadline is None else started + config.deadline
        scrub = config.api_key.scrub
        attempt, status, text, error = 0, None, None, None
        unreachable_only = True
        events: tuple[tuple[int, str], ...] = ()
        while attempt < policy.max_attempts:
            pause = self._paused_until - time.monotonic()
            if pause > 0 and not retry_testing():
                await asyncio.sleep(pause)
            left = float("inf") if deadline is None else deadline - time.monotonic()
            if left <= 0:
                error = "deadline exceeded before the request could be delivered"
                break
            attempt += 1
            retry_after = None
            unreachable = False
            try:
                status, raw, retry_after = await self._attempt(
                    path, body, min(config.request_timeout, left)
                )
            except TimeoutError:
                status, text = None, None
                error = cause = (
                    "deadline exceeded"
                    if left < config.request_timeout
                    else f"no complete answer within request_timeout ({config.request_timeout:g} s)"
                )
                verdict = decide(None, "network")
            except httpx.TransportError as exc:
                status, text = None, None
                unreachable = isinstance(exc, httpx.ConnectError)
                error = cause = f"{type(exc).__name__}: {scrub(str(exc)) or 'no answer'}"
                verdict = decide(None, "network")
            else:
                text = scrub(raw) if raw is not None else None
                verdict = decide(status)
                said = what_it_said(text, scrub) if verdict != "sent" else None
                cause = f"HTTP {status}"
                error = f"{cause}: {said.message}" if said and said.message else cause
                events = tuple((i, f"{cause}: {m}") for i, m in said.events) if said else ()
            elapsed = time.monotonic() - started
            if verdict == "sent":
                return Outcome("sent", status, attempt, elapsed, None, trim(text))
            if verdict == "stop_auth":
                raise AuthenticationError(
                    f"the API refused the key (HTTP {status}); check CHURN_API_KEY",
                    status=status,
                    attempts=attempt,
                )
            if verdict == "stop_endpoint":
                raise TransportError(
                    f"the API answered HTTP {status} for {path}: check base_url (redirects "
                    "are not followed: they would carry the key elsewhere)",
                    status=status,
                    attempts=attempt,
                    retryable=False,
                )
            if verdict in ("reject", "fail"):
                state: OutcomeStatus = "rejected" if verdict == "reject" else "failed"
                return Outcome(state, status, attempt, elapsed, error, trim(text), events)
            unreachable_only = unreachable_only and unreachable
            if attempt >= policy.max_attempts:
                break
            wait = next_wait(policy, attempt, retry_after, self._rng)
            remaining = float("inf") if deadline is None else deadline - time.monotonic()
            if wait > remaining:
                error = f"{error}; deadline would pass before the next retry"
                break
            if status == 429:
                self._paused_until = max(self._paused_until, time.monotonic() + wait)
            self.retries.note(cause, wait, rate_limited=status == 429)
            if not retry_testing():
                await asyncio.sleep(wait)
        if unreachable_only and attempt > 0 and status is None:
            where = httpx.URL(self.config.base_url)
            raise TransportError(
                f"cannot reach the API at {where.host}:{where.port or ''}: {error}",
                attempts=attempt,
            )
        elapsed = time.monotonic() - started
        return Outcome("failed", status, attempt, elapsed, error, trim(text), events)
