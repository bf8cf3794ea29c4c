"""Exceptions: one root, typed keyword-only attributes, and every one survives pickling
(Airflow and Spark move them between processes)."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import churn_connector as cc

FRAME = pd.DataFrame({"row": [0, 1], "status": ["sent", "failed"]})
EXAMPLES: list[cc.ChurnConnectorError] = [
    cc.ChurnConnectorError("root"),
    cc.ConfigurationError("bad option"),
    cc.InputError("broken file", path="/data/x.csv", line=12),
    cc.DataValidationError("2 invalid", n_invalid=2, n_rows=10),
    cc.TransportError("stopped", status=404, attempts=1, counts={"failed": 3}, rows=FRAME),
    cc.AuthenticationError("refused", status=401, attempts=1, counts={"failed": 2}),
    cc.DeliveryError("not delivered", counts={"failed": 3}, rows=FRAME, chunks=FRAME),
]


@pytest.mark.parametrize("exc", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_exception_derives_from_the_root(exc: Exception) -> None:
    assert isinstance(exc, cc.ChurnConnectorError)


@pytest.mark.parametrize("exc", EXAMPLES, ids=lambda e: type(e).__name__)
def test_exceptions_pickle_with_message_and_typed_attributes(exc: cc.ChurnConnectorError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    for name, value in vars(exc).items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(getattr(back, name), value)
        else:
            assert getattr(back, name) == value


def test_attributes_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        cc.TransportError("stopped", 401)  # type: ignore[call-arg]


def test_a_transport_error_carries_the_results_of_the_stopped_run() -> None:
    exc = cc.AuthenticationError("refused", status=403, attempts=2)
    full = exc.with_results({"sent": 1}, FRAME, FRAME)
    assert type(full) is cc.AuthenticationError
    assert (full.status, full.attempts, full.counts) == (403, 2, {"sent": 1})


def test_authentication_error_is_a_transport_error() -> None:
    assert issubclass(cc.AuthenticationError, cc.TransportError)
