"""The closed vocabulary of check names: schemas declare only registered names, validation
emits only registered names (the docs' table is the registry's: tests/docs/test_docs_reference.py)."""

from __future__ import annotations

import pandas as pd
import pytest

import churn_connector as cc
from churn_connector._validate.checks import CHECKS, require
from churn_connector._validate.failure_log import failure_record
from churn_connector._validate.pandera import pa


def declared(schema: pa.DataFrameSchema) -> set[str]:
    names = {c.name for c in schema.checks}
    for column in schema.columns.values():
        names |= {c.name for c in column.checks}
    return names


@pytest.mark.parametrize(
    "schema", [cc.events_schema(), cc.identities_schema()], ids=["events", "identities"]
)
def test_every_check_a_schema_declares_is_registered(schema: pa.DataFrameSchema) -> None:
    assert declared(schema) <= set(CHECKS)


def test_an_unregistered_name_cannot_become_a_failure() -> None:
    with pytest.raises(AssertionError, match="not registered"):
        failure_record(0, 0, "x", "made_up_check", 1, "message")
    assert require("event_type_pattern") == "event_type_pattern"


def test_validation_of_messy_tables_emits_registered_names_only(now: pd.Timestamp) -> None:
    events = pd.DataFrame(
        {
            "external_user_id": [1.5, " ", "u"],
            "event_type": ["Bad", "ok", 3],
            "occurred_at": ["2020-01-01T00:00:00Z", "2026-01-01", 12],
            "properties": ["[1]", {"a": float("nan")}, None],
            "junk": [1, 2, 3],
        }
    )
    users = pd.DataFrame(
        {
            "external_user_id": ["a", "a", None],
            "email": ["x", None, "a@b.co"],
            "phone": ["123", None, None],
            "preferred_channel": ["fax", None, None],
            "channels": [[{"type": "email", "address": "a@b.co"}], "no", None],
            "sms_verified": [None, "yes", None],
        }
    )
    emitted = set(cc.validate_events(events, now=now).failures["check"])
    emitted |= set(cc.validate_identities(users).failures["check"])
    assert len(emitted) > 10
    assert emitted <= set(CHECKS)
