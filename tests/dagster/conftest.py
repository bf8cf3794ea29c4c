"""Real Dagster, in process (``materialize``, an ephemeral instance), against the sandbox.

A pytest process of its own (``pytest tests/dagster``; ``make pytest`` runs every suite):
Dagster sets up its logging and reads ``DAGSTER_HOME`` for the whole process, and its
import costs the main suite nothing then.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
# no instance of the machine's: an empty home for anything Dagster would keep
os.environ["DAGSTER_HOME"] = tempfile.mkdtemp(prefix="churn-dagster-home-")
(Path(os.environ["DAGSTER_HOME"]) / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")

import churn_connector as cc  # noqa: E402

GOOD_KEY = "sk_test_CANARY_dagster_5e1b7c90d4"
BAD_KEY = "sk_test_CANARY_dagster_bad_28a6f3"
KEY_ENV = "CHURN_TEST_DAGSTER_KEY"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mixed = [item.nodeid for item in items if not item.path.is_relative_to(HERE)]
    if mixed:
        raise pytest.UsageError(
            f"tests/dagster runs in a pytest process of its own, not with {mixed[0]} "
            "(make pytest runs every suite)"
        )


@pytest.fixture
def sandbox() -> Iterator[cc.Sandbox]:
    with cc.Sandbox(api_keys=[GOOD_KEY]) as sb:
        yield sb
