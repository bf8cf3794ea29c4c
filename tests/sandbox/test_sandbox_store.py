"""The store's unit of work: one request's writes are stored whole or not at all."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from churn_connector._sandbox._store import Store
from tests.sandbox.conftest import MakeEvent


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made = Store(None if request.param == "memory" else tmp_path / "sandbox.db")
    yield made
    made.close()


def test_a_batch_that_fails_midway_stores_none_of_its_events(
    store: Store, make_event: MakeEvent, now: datetime
) -> None:
    store.store_events("app", [make_event(1)], now)
    # NOT NULL refuses the second event inside the insert, after the first was written
    broken = [make_event(2), make_event(3, external_user_id=None)]
    with pytest.raises(sqlite3.IntegrityError):
        store.store_events("app", broken, now)
    assert [e["context"]["$message_id"] for e in store.events("app")] == ["msg-1"]
    outcome = store.store_events("app", [make_event(2)], now)
    assert (outcome.accepted, outcome.duplicates, outcome.conflicts) == (1, 0, 0)
    assert [e["context"]["$message_id"] for e in store.events("app")] == ["msg-1", "msg-2"]
