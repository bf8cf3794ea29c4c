"""Base URLs and proxy URLs, checked: every way a URL can be unusable is a
``ConfigurationError`` when the client is made, never a traceback or eight retries later,
and no message echoes a user name or password written into one."""

from __future__ import annotations

import importlib.util
import ipaddress
import re
from typing import NamedTuple
from urllib.parse import urlsplit

from .exceptions import ConfigurationError
from .words import named


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Endpoint(NamedTuple):
    """A base URL taken apart: ``host`` without brackets, ``port`` always set."""

    scheme: str
    host: str
    port: int
    path: str


_NO_USERINFO = (
    "{what} holds a user name or password (user:password@host): it would travel in logs, "
    "reprs and result files; {fix}"
)


def shown_url(url: str) -> str:
    """``url`` as a message may show it: without the user name and password, nor the
    values of a query or fragment (``?key=...`` is where a key is pasted by mistake)."""
    url = _QUERY_VALUE.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}://{authority}{slash}{path}"


# after ? # & or ; and a name with its =, the value up to the next separator
_QUERY_VALUE = re.compile(r"([?#&;](?:[^=?#&;]*=)?)[^?#&;]+")


def endpoint_of(url: str, what: str = "base_url") -> Endpoint:
    """Take an http(s) URL apart, or refuse it with ConfigurationError naming the fault:
    no scheme or host, a user name or password (never echoed), a port that is not a number
    from 1 to 65535, white space or control characters, a query or fragment."""
    name = named(what) if what == "base_url" else what
    bad = f"{name} must be an http(s) URL like https://api.example.com, got {shown_url(url)!r}"
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise ConfigurationError(
            f"{name} holds white space or control characters; percent-encode them (%20) or "
            "remove them (a stray space or newline from a copied URL?)"
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:  # "Port out of range", "Invalid IPv6 URL", a port "80a"
        raise ConfigurationError(f"{bad} ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigurationError(bad)
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            _NO_USERINFO.format(
                what=name, fix="remove it (the API key goes in CHURN_API_KEY / api_key=)"
            )
        )
    if port == 0:
        raise ConfigurationError(f"{bad} (port 0: use a port from 1 to 65535)")
    if parts.query or parts.fragment:
        raise ConfigurationError(
            f"{bad} (a query or fragment cannot be part of a base URL: remove it)"
        )
    return Endpoint(
        parts.scheme, host, port or (443 if parts.scheme == "https" else 80), parts.path
    )


def check_proxy(proxy: str, base_url: str, *, source: str = "proxy") -> None:
    """Refuse a proxy that could see the key (only CONNECT tunnels to https base URLs), or
    that cannot be dialled (``host:port`` without a scheme; ``socks5://``): ``source`` says
    where it came from (``proxy=``, ``HTTPS_PROXY``)."""
    want = (
        f"{source} must be an http://[user:password@]host:port URL (the CONNECT tunnel "
        "carries TLS from us to the API end to end)"
    )
    scheme, sep, _ = proxy.partition("://")
    if not sep:
        raise ConfigurationError(f"{want}; it has no scheme: write http://{shown_url(proxy)}")
    if scheme.lower() != "http":
        raise ConfigurationError(
            f"{want}; {scheme}:// proxies are not supported ({source} is {shown_url(proxy)!r})"
        )
    try:
        parts = urlsplit(proxy)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ConfigurationError(f"{want}; {shown_url(proxy)!r} is not one ({exc})") from None
    if not host or port == 0:
        raise ConfigurationError(f"{want}; {shown_url(proxy)!r} is not one")
    if urlsplit(base_url).scheme != "https":
        raise ConfigurationError(
            "a proxy is only used for an https:// base URL: over plain http the proxy "
            "would read the key in every request"
        )


def budget_name_of(budget: str) -> str | None:
    """The budget's name a ``#name`` at the end of its URL gives (None: not given)."""
    _, sep, fragment = budget.partition("#")
    return fragment if sep and fragment else None


def check_budget(budget: object, rate: float | None) -> None:
    """Refuse a ``budget`` that cannot be one: not a ``postgresql://`` URL or ``"ledger"``,
    a password written into it (never echoed: it would travel in reprs, process lists and
    shell history; libpq reads ``PGPASSWORD`` and ``~/.pgpass``), or no
    ``max_requests_per_second`` to share."""
    if budget is None:
        return
    if not isinstance(budget, str):
        raise ConfigurationError(
            f"{named('budget')} must be a postgresql:// URL or 'ledger', "
            f"not {type(budget).__name__}"
        )
    if budget != "ledger":
        scheme = budget.partition("://")[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise ConfigurationError(
                f"{named('budget')} must be a postgresql:// URL or 'ledger', got "
                f"{shown_url(budget)!r}"
            )
        try:
            parts = urlsplit(budget)
            password = parts.password
        except ValueError as exc:
            raise ConfigurationError(
                f"{named('budget')} {shown_url(budget)!r} is not a URL ({exc})"
            ) from None
        query = parts.query.lower()
        if password or "password=" in query:
            raise ConfigurationError(
                f"{named('budget')} holds a password: give it through PGPASSWORD or "
                "~/.pgpass (libpq reads both), never in the URL"
            )
    if rate is None:
        raise ConfigurationError(
            f"{named('budget')} shares {named('max_requests_per_second')}: give it too "
            "(the rate every process sharing the budget sends at together)"
        )


def check_ca_store(store: object) -> None:
    """Refuse a ``ca_store`` that is none, or ``"system"`` without truststore installed."""
    if store not in ("certifi", "system"):
        raise ConfigurationError(f"ca_store must be 'certifi' or 'system', got {store!r}")
    if store == "system" and importlib.util.find_spec("truststore") is None:
        raise ConfigurationError(
            "ca_store='system' reads the operating system's store through truststore, which "
            "is not installed: pip install 'churn_connector[truststore]'"
        )
