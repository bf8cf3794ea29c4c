"""ClientConfig: immutable, explicit timeouts, validated options, environment defaults."""

from __future__ import annotations

import dataclasses

import pytest

import churn_connector as cc


def test_config_is_immutable() -> None:
    config = cc.ClientConfig.create("https://api.example.com", "k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_size = 10  # type: ignore[misc]


def test_timeouts_are_explicit_and_positive() -> None:
    config = cc.ClientConfig.create("https://api.example.com", "k")
    assert (config.connect_timeout, config.read_timeout) == (5.0, 30.0)
    with pytest.raises(cc.ConfigurationError, match="timeouts"):
        cc.ClientConfig.create("https://api.example.com", "k", read_timeout=0)


def test_missing_base_url_or_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHURN_BASE_URL", raising=False)
    monkeypatch.delenv("CHURN_API_KEY", raising=False)
    with pytest.raises(cc.ConfigurationError, match="CHURN_BASE_URL"):
        cc.Client()
    with pytest.raises(cc.ConfigurationError, match="CHURN_API_KEY"):
        cc.Client("https://api.example.com")


def test_unknown_option_is_a_configuration_error() -> None:
    with pytest.raises(cc.ConfigurationError, match="batch_sise"):
        cc.Client("https://api.example.com", "k", batch_sise=10)  # type: ignore[call-arg]


def test_insecure_http_needs_an_explicit_opt_in() -> None:
    config = cc.ClientConfig.create("http://10.1.2.3", "k", allow_insecure_http=True)
    assert config.base_url == "http://10.1.2.3"
