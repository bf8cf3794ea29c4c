"""Immutable client configuration with explicit timeouts; the API key is never shown."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from .contract import MAX_BATCH_SIZE
from .declarations import declare, meta, registered
from .exceptions import ConfigurationError
from .secrets import Secret, as_secret
from .types import AuthHeader, CaStore
from .urls import check_budget, check_ca_store, check_proxy, endpoint_of, is_loopback
from .words import Placeholder, named, on_command_line, option

# a dry run without a base URL or key: stand-ins, never contacted (.invalid never resolves)
DRY_RUN_URL = "https://dry-run.invalid"


DRY_RUN_KEY = Secret("dry-run-without-a-key")


def _no_url() -> str:
    return f"no {named('base_url')} given and CHURN_BASE_URL is not set"


def _no_key() -> str:
    if on_command_line():
        return "CHURN_API_KEY is not set (the command line reads the key from there only)"
    return "no api_key given and CHURN_API_KEY is not set"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a request (immutable).

    ``max_attempts`` counts the first attempt too; the wait after attempt *n* is drawn
    uniformly from 0 to ``min(max_delay, initial_delay * multiplier ** (n - 1))`` seconds
    (full jitter), or is the server's ``Retry-After`` up to ``max_retry_after``.
    """

    max_attempts: int = declare(8, doc="attempts per request, the first included")
    initial_delay: float = declare(
        0.5, doc="seconds: the ceiling of the first back-off (full jitter)"
    )
    max_delay: float = declare(30.0, doc="seconds: the largest back-off ceiling")
    multiplier: float = declare(2.0, doc="the back-off ceiling grows by this factor per attempt")
    max_retry_after: float = declare(120.0, doc="seconds: the longest `Retry-After` honoured")

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ConfigurationError("delays must not be negative")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter exponential wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return rng.uniform(0, ceiling)


def _seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{named(name)} must be a number of seconds, not {value!r}")


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """How long a client waits, in seconds: a group of four, like httpx's ``Timeout``.

    ``connect`` for a connection, ``read`` for each read of an answer, ``request`` for one
    whole attempt (answer included), ``deadline`` for the whole run (None: no deadline;
    then the rest of the rows are ``failed``). Immutable, checked when made.

    ``Client(timeouts=cc.Timeouts(read=10, deadline=600))`` is ``Client(read_timeout=10,
    deadline=600)``: the flat keywords stay, as an Airflow connection's extra, Spark's
    options and the command line spell them (``--read-timeout``). ``client.config.timeouts``
    shows the four.
    """

    connect: float = declare(5.0, doc="seconds to connect (`connect_timeout`)")
    read: float = declare(30.0, doc="seconds for each read of an answer (`read_timeout`)")
    request: float = declare(
        120.0, doc="seconds for one whole attempt, answer included (`request_timeout`)"
    )
    deadline: float | None = declare(
        3600.0, doc="seconds for the whole run (`None`: none); then the rest is `failed`"
    )

    def __post_init__(self) -> None:
        for name in TIMEOUT_FIELDS:
            value = getattr(self, TIMEOUT_FIELDS[name])
            if value is not None or name != "deadline":
                _seconds(name, value)
        timeouts = (self.connect, self.read, self.request)
        if min(timeouts) <= 0 or (self.deadline is not None and self.deadline <= 0):
            raise ConfigurationError("timeouts and the deadline must be positive")


# ClientConfig's flat timeout fields -> their names in a Timeouts
TIMEOUT_FIELDS = {
    "connect_timeout": "connect",
    "read_timeout": "read",
    "request_timeout": "request",
    "deadline": "deadline",
}


def flat_timeouts(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with a ``timeouts`` group spelled as the four flat fields; a flat one
    given beside the group must agree with it (one value, said once)."""
    options = dict(options)
    if "timeouts" not in options:
        return options
    group = options.pop("timeouts")
    if not isinstance(group, Timeouts):
        raise ConfigurationError(f"timeouts must be a cc.Timeouts(...), not {group!r}")
    for flat, name in TIMEOUT_FIELDS.items():
        value = getattr(group, name)
        if flat in options and options[flat] != value:
            raise ConfigurationError(
                f"{flat}={options[flat]!r} and timeouts={group!r} disagree: give each once"
            )
        options[flat] = value
    return options


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
    request_timeout: float
    deadline: float | None
    fail_fast_after: float
    ca_bundle: str | None
    ca_store: CaStore
    verify: bool
    proxy: str | None
    trust_env: bool
    max_requests_per_second: float | None
    budget: str | None
    timeouts: Timeouts  # the four timeouts as one group (the flat ones stay)


@registered
@dataclass(frozen=True)
class ClientConfig:
    """Everything a Client needs; build it with :meth:`create` to read the environment.

    Frozen and checked when made: a bad value raises ``ConfigurationError`` at once. Every
    field is a keyword of ``Client`` (the docs' options page tables them with their defaults
    and command-line spellings); ``repr`` never shows the key.
    """

    base_url: str = field(
        metadata=meta(
            doc="the API's base URL, `https://` (plain `http://` for loopback only)",
            help="API base URL (default: CHURN_BASE_URL)",
            shown_default="`CHURN_BASE_URL`",
        )
    )
    api_key: Secret = field(
        repr=False,
        metadata=meta(
            doc="the key; kept in a `cc.Secret` that never prints it",
            shown_default="`CHURN_API_KEY`",
            shown_flag="only `CHURN_API_KEY`",
        ),
    )
    auth_header: AuthHeader = declare(
        "bearer",
        doc='`Authorization: Bearer <key>`, or `"x-api-key"`',
        help="how to send the key",
    )
    connect_timeout: float = declare(
        5.0, doc="seconds to connect", help="seconds to connect (default 5)", metavar="S"
    )
    read_timeout: float = declare(
        30.0,
        doc="seconds for each read of an answer",
        help="seconds to wait for each read of an answer (default 30)",
        metavar="S",
    )
    # 16 batches in flight keep ~85% of 16 x 500 events per round trip at 50 ms; identify
    # sends one user per request, so it needs more in flight to pass 1,000 users/s there
    max_concurrency: int = declare(
        16,
        doc="event requests in flight",
        flag="--concurrency",  # the call's max_concurrency (SendOptions), which overrides it
        shown_flag="`send events --concurrency N`",
    )
    identify_concurrency: int = declare(
        64,
        doc="identify requests in flight (never two for one user)",
        flag="--concurrency",
        shown_flag="`send identities --concurrency N`",
    )
    batch_size: int = declare(
        MAX_BATCH_SIZE,
        doc=f"events per request (the API's limit is {MAX_BATCH_SIZE})",
        help=f"events per request (at most {MAX_BATCH_SIZE})",
        metavar="N",
    )
    max_request_bytes: int | None = declare(
        None,
        doc="keep every request body under N bytes",
        help="keep every request body under N bytes",
        metavar="N",
    )
    bisect_rejected: bool = declare(
        True, doc="split a rejected batch to isolate the offending events"
    )
    max_split_requests: int = declare(  # per run; then a rejected batch is reported whole
        1000, doc="extra requests a run may spend bisecting"
    )
    retry: RetryPolicy = declare(
        default_factory=RetryPolicy,
        doc="how often and how long to retry (below)",
        shown_default="`cc.RetryPolicy()`",
    )
    allow_insecure_http: bool = declare(
        False,
        doc="allow plain `http://` to a host other than loopback",
        help="allow a plain http:// base URL for a host other than this machine (the key "
        "travels in clear text)",
    )
    request_timeout: float = declare(  # one attempt, from connecting to the last byte read
        120.0,
        doc="seconds for one whole attempt, answer included",
        help="seconds for one whole request, answer included (default 120)",
        metavar="S",
    )
    deadline: float | None = declare(  # the whole run; None = no deadline
        3600.0,
        doc="seconds for the whole run (`None`: none); then the rest is `failed`",
        help="end the whole run after S seconds (default 3600)",
        metavar="S",
    )
    fail_fast_after: float = declare(  # seconds of nothing but unreachable-host failures
        10.0, doc="seconds of nothing but unreachable-host failures before the run stops"
    )
    ca_bundle: str | None = declare(  # PEM file of trusted CAs (default: REQUESTS_CA_BUNDLE)
        None,
        doc="trust the CAs in this file (a private CA)",
        help="trust the CAs in this file (private CA)",
        metavar="PEM",
    )
    ca_store: CaStore = declare(  # the last step of the trust order: no bundle was named
        "certifi",
        doc="the CAs trusted when no bundle is named (`ca_bundle`, `REQUESTS_CA_BUNDLE`, "
        "`CURL_CA_BUNDLE`, `SSL_CERT_FILE` / `SSL_CERT_DIR`): certifi's, or the operating "
        'system\'s store (`"system"`, the `truststore` extra)',
        help="CAs trusted when no bundle is named: certifi's, or the operating system's "
        "store (system: the truststore extra)",
    )
    verify: bool = declare(  # False only for loopback hosts (a local TLS test server)
        True, doc="`False` only for loopback hosts (a local TLS test server)"
    )
    proxy: str | None = declare(  # http://[user:pass@]host:port, for https base URLs only
        None,
        doc="a CONNECT proxy for `https://` base URLs",
        help="http://[user:password@]host:port; a CONNECT tunnel, for https base URLs only",
        metavar="URL",
    )
    trust_env: bool = declare(
        False,
        doc="use `HTTPS_PROXY` / `NO_PROXY` from the environment",
        help="use HTTPS_PROXY / NO_PROXY from the environment",
    )
    # attempts per second, retries included; None: no limit (Spark tasks: a share each)
    max_requests_per_second: float | None = declare(
        None,
        doc="attempts per second across the workers (a `budget`'s processes), retries included",
        help="attempts per second at most, retries included (with --budget: across every "
        "process sharing it)",
        metavar="N",
    )
    budget: str | None = declare(
        None,
        doc="share `max_requests_per_second` and 429 pauses with every process given the "
        "same budget: a `postgresql://` URL (no password in it: `PGPASSWORD` or "
        '`~/.pgpass`), or `"ledger"` for a send\'s PostgreSQL ledger '
        "([Operate it](../guides/operating.md#one-request-budget-for-many-workers))",
        help="share --max-requests-per-second and 429 pauses with every process given the "
        "same budget: postgresql://USER@HOST/DB (password from PGPASSWORD or ~/.pgpass), or "
        "'ledger' for the --ledger's PostgreSQL database",
        metavar="URL",
    )

    @property
    def timeouts(self) -> Timeouts:
        """The four timeouts as one :class:`Timeouts`."""
        return Timeouts(**{name: getattr(self, flat) for flat, name in TIMEOUT_FIELDS.items()})

    def __post_init__(self) -> None:
        parts = endpoint_of(self.base_url)
        if parts.scheme == "http" and not is_loopback(parts.host) and not self.allow_insecure_http:
            raise ConfigurationError(
                "plain http:// is refused for a non-loopback host (the key would travel in "
                f"clear text); use https:// or pass {option('allow_insecure_http')}"
            )
        problem = self.api_key.problem()
        if problem is not None:
            raise ConfigurationError(problem)
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ConfigurationError(
                f"batch_size must be between 1 and {MAX_BATCH_SIZE} (the API's limit), "
                f"got {self.batch_size}"
            )
        for name in ("max_concurrency", "identify_concurrency"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        _ = self.timeouts  # checks the four, as a Timeouts does
        rate = self.max_requests_per_second
        number = isinstance(rate, int | float) and not isinstance(rate, bool)
        if rate is not None and not (number and 0 < rate < float("inf")):
            raise ConfigurationError(
                f"max_requests_per_second must be a positive number (or None), got {rate!r}"
            )
        check_budget(self.budget, rate)
        if self.fail_fast_after < 0:
            raise ConfigurationError("fail_fast_after must not be negative")
        if not self.verify and not is_loopback(parts.host):
            raise ConfigurationError(
                "verify=False is refused for a non-loopback host: it would send the key to "
                "anyone in between; pass "
                f"{option('ca_bundle', Placeholder('<your CA>.pem'))} for a private CA"
            )
        if self.ca_bundle is not None and not os.path.isfile(self.ca_bundle):
            raise ConfigurationError(f"{named('ca_bundle')} {self.ca_bundle!r} is not a file")
        check_ca_store(self.ca_store)
        if self.proxy is not None:
            check_proxy(self.proxy, self.base_url, source=named("proxy"))
        if self.auth_header not in ("bearer", "x-api-key"):
            raise ConfigurationError("auth_header must be 'bearer' or 'x-api-key'")

    @classmethod
    def create(
        cls,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        dry_run: bool = False,
        **options: Unpack[ClientOptions],
    ) -> ClientConfig:
        """Fill ``base_url``/``api_key`` from CHURN_BASE_URL/CHURN_API_KEY when not given.

        ``dry_run``: a dry run contacts nothing, so it needs neither; where none is set, a
        placeholder stands in, which ``check_run`` refuses for anything but a dry run.
        """
        url = base_url or os.environ.get("CHURN_BASE_URL") or (DRY_RUN_URL if dry_run else "")
        if not url:
            raise ConfigurationError(_no_url())
        api_key = as_secret(api_key)  # no frame below holds the raw key in a local variable
        if api_key is None:
            api_key = Secret(os.environ.get("CHURN_API_KEY", ""))
            if api_key.problem() == "the API key is empty":
                if not dry_run:
                    raise ConfigurationError(_no_key())
                api_key = DRY_RUN_KEY
        try:
            return cls(base_url=url.rstrip("/"), api_key=api_key, **flat_timeouts(options))
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None

    def check_run(self, *, dry_run: bool, ledger: bool) -> None:
        """Refuse a run that a dry run's placeholders cannot serve (see ``create``): a real
        send, or a dry run with a ledger, whose records are scoped to the real URL and key."""
        missing = [
            say()
            for say, stands_in in (
                (_no_url, self.base_url == DRY_RUN_URL),
                (_no_key, self.api_key == DRY_RUN_KEY),
            )
            if stands_in
        ]
        if missing and not dry_run:
            raise ConfigurationError(missing[0])
        if missing and ledger:
            raise ConfigurationError(
                f"{missing[0]}: a dry run with a ledger needs the base URL and key of the real "
                "run (the ledger's records are scoped to them)"
            )

    def with_options(self, **options: Unpack[ClientOptions]) -> ClientConfig:
        """A copy with these fields changed (``timeouts``: the four), checked again."""
        try:
            return replace(self, **flat_timeouts(options))
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from None
