"""Immutable client configuration with explicit timeouts; the API key is never shown."""

from __future__ import annotations

import ipaddress
import os
import random
from dataclasses import dataclass, field, replace
from typing import TypedDict, Unpack
from urllib.parse import urlsplit

from ._exceptions import ConfigurationError
from ._types import AuthHeader

MAX_BATCH_SIZE = 500


class Secret:
    """A string that does not print itself (repr, str, f-strings, logs, pickles of reprs)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a request (immutable)."""

    max_attempts: int = 8
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    max_retry_after: float = 120.0
    deadline: float | None = 3600.0  # seconds for the whole run; None = no deadline

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ConfigurationError("delays must not be negative")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter exponential wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return rng.uniform(0, ceiling)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ClientOptions(TypedDict, total=False):
    """The keyword form of :class:`ClientConfig`'s options (for ``Client(...)``)."""

    auth_header: AuthHeader
    connect_timeout: float
    read_timeout: float
    max_concurrency: int
    identify_concurrency: int
    batch_size: int
    max_request_bytes: int | None
    bisect_rejected: bool
    max_split_requests: int
    retry: RetryPolicy
    allow_insecure_http: bool


@dataclass(frozen=True)
class ClientConfig:
    """Everything a Client needs; build it with :meth:`create` to read the environment."""

    base_url: str
    api_key: Secret = field(repr=False)
    auth_header: AuthHeader = "bearer"
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_concurrency: int = 8
    identify_concurrency: int = 32
    batch_size: int = MAX_BATCH_SIZE
    max_request_bytes: int | None = None
    bisect_rejected: bool = True
    max_split_requests: int = 1000  # per run; then a rejected batch is reported whole
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    allow_insecure_http: bool = False

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if (
            parts.scheme == "http"
            and not _is_loopback(parts.hostname)
            and not self.allow_insecure_http
        ):
            raise ConfigurationError(
                "plain http:// is refused for a non-loopback host (the key would travel in "
                "clear text); use https:// or pass allow_insecure_http=True"
            )
        key = self.api_key.reveal()
        if not key:
            raise ConfigurationError("the API key is empty")
        if not (key.isascii() and key.isprintable()) or any(ch.isspace() for ch in key):
            # e.g. a trailing newline from a secrets file; the key itself is never echoed
            raise ConfigurationError(
                "the API key holds white space, control or non-ASCII characters; "
                "strip it (a trailing newline from a secrets file is the usual cause)"
            )
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ConfigurationError(
                f"batch_size must be between 1 and {MAX_BATCH_SIZE} (the API's limit), "
                f"got {self.batch_size}"
            )
        for name in ("max_concurrency", "identify_concurrency"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ConfigurationError("timeouts must be positive")
        if self.auth_header not in ("bearer", "x-api-key"):
            raise ConfigurationError("auth_header must be 'bearer' or 'x-api-key'")

    @classmethod
    def create(
        cls,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        **options: Unpack[ClientOptions],
    ) -> ClientConfig:
        """Fill ``base_url``/``api_key`` from CHURN_BASE_URL/CHURN_API_KEY when not given."""
        url = base_url or os.environ.get("CHURN_BASE_URL")
        if not url:
            raise ConfigurationError("no base_url given and CHURN_BASE_URL is not set")
        key = api_key if api_key is not None else os.environ.get("CHURN_API_KEY")
        if not key:
            raise ConfigurationError("no api_key given and CHURN_API_KEY is not set")
        secret = key if isinstance(key, Secret) else Secret(key)
        try:
            return cls(base_url=url.rstrip("/"), api_key=secret, **options)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None

    def with_options(self, **options: Unpack[ClientOptions]) -> ClientConfig:
        try:
            return replace(self, **options)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None
