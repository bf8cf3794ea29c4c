"""An option given as JSON text (an Airflow template, a Spark ``.option``) that names a key
twice is refused: which of the two values was meant would be a guess."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

import churn_connector as cc
from churn_connector._core.text_options import from_text

HINT = Mapping[str, str] | None


def test_a_mapping_option_naming_a_key_twice_is_refused_with_the_key() -> None:
    with pytest.raises(cc.ConfigurationError) as caught:
        from_text("dtypes", '{"amount": "int64", "amount": "str"}', HINT, "option")
    assert "option 'dtypes': repeated_key:" in str(caught.value)
    assert "names the key 'amount' twice" in str(caught.value)


def test_a_mapping_option_with_distinct_keys_reads_as_written() -> None:
    text = '{"amount": "int64", "plan": "str"}'
    assert from_text("dtypes", text, HINT, "option") == {"amount": "int64", "plan": "str"}
