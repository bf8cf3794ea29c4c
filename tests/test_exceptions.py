"""Exceptions: one root, and every one survives pickling (Airflow and Spark move them)."""

from __future__ import annotations

import pickle

import pytest

import churn_connector as cc

ALL = [
    cc.ConfigurationError,
    cc.InputError,
    cc.DataValidationError,
    cc.TransportError,
    cc.AuthenticationError,
    cc.DeliveryError,
]


@pytest.mark.parametrize("cls", ALL)
def test_every_exception_derives_from_the_root(cls: type[Exception]) -> None:
    assert issubclass(cls, cc.ChurnConnectorError)


@pytest.mark.parametrize("cls", ALL)
def test_exceptions_pickle_with_message_and_details(cls: type[cc.ChurnConnectorError]) -> None:
    exc = cls("went wrong", counts={"failed": 3}, status=401)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == "went wrong"
    assert back.counts == {"failed": 3}
    assert back.status == 401


def test_authentication_error_is_a_transport_error() -> None:
    assert issubclass(cc.AuthenticationError, cc.TransportError)
