"""Base URLs and proxies that cannot work are a ConfigurationError when the client is made
(or, for an environment proxy, when the first send opens its pool): never a raw ValueError,
never retries against a port that cannot exist, never an echoed password."""

from __future__ import annotations

import pandas as pd
import pytest

import churn_connector as cc

PASSWORD = "pa55-CANARY-word"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:99999", "Port out of range"),
        ("http://127.0.0.1:80a", "could not be cast to integer"),
        ("http://127.0.0.1:0", "port 0: use a port from 1 to 65535"),
        ("http://[::1:9", "Invalid IPv6 URL"),
        ("http://127.0.0.1/a b", "white space or control characters"),
        ("http://127.0.0.1/v1\n", "white space or control characters"),
        ("http://127.0.0.1/v1?x=1", "a query or fragment cannot be part of a base URL"),
        ("ftp://127.0.0.1", "must be an http(s) URL"),
    ],
)
def test_a_malformed_base_url_is_a_configuration_error_naming_the_fault(
    url: str, said: str
) -> None:
    with pytest.raises(cc.ConfigurationError) as info:
        cc.Client(url, "sk_test_urls")
    assert said in str(info.value)
    # no ValueError traceback behind it: neither a cause nor a context left to print
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_a_password_in_the_base_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(cc.ConfigurationError, match="user name or password") as info:
        cc.Client(f"https://ops:{PASSWORD}@api.example.com", "sk_test_urls")
    assert PASSWORD not in str(info.value) and "ops" not in str(info.value)


@pytest.mark.parametrize("tail", [f"?key={PASSWORD}", f"?a=1&token={PASSWORD}", f"#{PASSWORD}"])
def test_a_key_pasted_into_the_base_urls_query_is_refused_without_echoing_it(tail: str) -> None:
    with pytest.raises(cc.ConfigurationError, match="query or fragment") as info:
        cc.Client(f"https://api.example.com/{tail}", "sk_test_urls")
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("proxy", "said"),
    [
        ("proxy.internal:3128", "it has no scheme: write http://proxy.internal:3128"),
        ("socks5://proxy.internal:1080", "socks5:// proxies are not supported"),
        (f"socks5://ops:{PASSWORD}@proxy.internal:1080", "socks5:// proxies are not supported"),
    ],
)
def test_an_environment_proxy_that_cannot_be_dialled_is_refused_clearly(
    proxy: str, said: str, monkeypatch: pytest.MonkeyPatch, now: pd.Timestamp
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    client = cc.Client("https://api.example.com", "sk_test_urls", trust_env=True)
    events = pd.DataFrame(
        {"external_user_id": ["u1"], "event_type": ["login"], "occurred_at": [now]}
    )
    with pytest.raises(cc.ConfigurationError) as info:
        client.send_events(events, now=now)
    assert str(info.value).startswith("HTTPS_PROXY (the environment) must be an http://")
    assert said in str(info.value)
    assert PASSWORD not in str(info.value)
