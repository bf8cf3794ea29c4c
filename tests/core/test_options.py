"""Options are values validated at the boundary: a bad one fails at once, never silently."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._client import IdentifyOptions, SendEventsOptions
from churn_connector._core.config import ClientOptions

DF = pd.DataFrame({"external_user_id": ["u"], "event_type": ["login"]})


@pytest.mark.parametrize(
    "call",
    [cc.validate_events, cc.events_to_wire, cc.validate_identities, cc.identities_to_wire],
    ids=lambda f: f.__name__,
)
def test_a_typo_in_extra_columns_is_refused_instead_of_turning_strictness_off(
    call: Callable[..., Any],
) -> None:
    with pytest.raises(cc.ConfigurationError, match="extra_columns"):
        call(DF, extra_columns="errors")


def test_a_typo_in_extra_columns_is_refused_before_sending(client: cc.Client) -> None:
    with pytest.raises(cc.ConfigurationError, match="extra_columns"):
        client.send_events(DF, extra_columns="Ignore")  # type: ignore[arg-type]


def test_a_naive_now_is_a_configuration_error() -> None:
    with pytest.raises(cc.ConfigurationError, match="timezone-aware"):
        cc.validate_events(DF, now=pd.Timestamp("2026-11-22 12:00"))


def test_an_unknown_id_column_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="id_columns"):
        cc.events_to_wire(DF, id_columns=["user"])


@pytest.mark.parametrize("rows", [0, -5, 2.5, True])
def test_slice_rows_must_be_a_positive_integer(rows: Any) -> None:
    with pytest.raises(cc.ConfigurationError, match="slice_rows"):
        cc.validate_events(DF, slice_rows=rows)


def test_a_typo_in_duplicates_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="duplicates"):
        cc.validate_identities(DF, duplicates="keep-last")  # type: ignore[arg-type]


def test_an_unknown_zone_is_refused() -> None:
    with pytest.raises(cc.ConfigurationError, match="IANA"):
        cc.validate_events(DF, naive_timezone="Mars/Olympus")


def test_a_bad_retry_policy_is_a_configuration_error() -> None:
    with pytest.raises(cc.ConfigurationError, match="delays"):
        cc.RetryPolicy(initial_delay=-1)


def test_client_options_typed_dict_matches_the_config_fields() -> None:
    fields = set(cc.ClientConfig.__dataclass_fields__) - {"base_url", "api_key"}
    assert set(ClientOptions.__annotations__) == fields


@pytest.mark.parametrize(
    ("options", "method"),
    [(SendEventsOptions, cc.Client.send_events), (IdentifyOptions, cc.Client.identify)],
)
def test_one_call_keywords_match_the_client_methods(options: type, method: Any) -> None:
    params = set(inspect.signature(method).parameters) - {"self", "data"}
    assert set(options.__annotations__) == params
