"""Same meaning everywhere: one list of scenarios, run against every backend, gives the
same answers (so the same skips) as a plain dictionary does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import churn_connector as cc
from tests.ledger.conftest import BACKENDS, location

SCOPES = ["https://api.example.com#aaaa", "https://staging.example.com#bbbb"]
KINDS = ["events", "identities"]
KEYS = ["k1", "k2", "k3", "k4"]
DIGESTS = ["d1", "d2", "d3"]

Op = tuple[Any, ...]
where = st.tuples(st.sampled_from(SCOPES), st.sampled_from(KINDS))
record = st.tuples(
    st.just("record"),
    where,
    st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(DIGESTS)), min_size=1, max_size=4),
)
forget = st.tuples(st.just("forget"), where, st.lists(st.sampled_from(KEYS), max_size=3))
reopen = st.tuples(st.just("reopen"))  # what one run left, as the next run finds it
compact = st.tuples(st.just("compact"))
scenarios = st.lists(st.one_of(record, record, forget, reopen, compact), max_size=10)


def answers(ledger: cc.Ledger) -> dict[tuple[str, str], dict[str, str]]:
    """What the ledger knows of every key, in every scope and kind."""
    return {(s, k): ledger.known(s, k, KEYS) for s in SCOPES for k in KINDS}


def play(url: str, scenario: list[Op]) -> list[dict[tuple[str, str], dict[str, str]]]:
    """The ledger's answers after each step of ``scenario``."""
    seen = []
    ledger = cc.Ledger(url)
    try:
        for op in scenario:
            if op[0] == "record":
                (scope, kind), entries = op[1], op[2]
                ledger.record(scope, kind, entries)
            elif op[0] == "forget":
                (scope, kind), keys = op[1], op[2]
                ledger.forget(scope, kind, keys)
            elif op[0] == "reopen":
                ledger.close()
                ledger = cc.Ledger(url)
            else:
                ledger.compact()
            seen.append(answers(ledger))
    finally:
        ledger.close()
    return seen


def model(scenario: list[Op]) -> list[dict[tuple[str, str], dict[str, str]]]:
    """The same scenario on a dictionary: what every backend must answer."""
    state: dict[tuple[str, str], dict[str, str]] = {(s, k): {} for s in SCOPES for k in KINDS}
    seen = []
    for op in scenario:
        if op[0] == "record":
            for key, digest in op[2]:
                state[op[1]][key] = digest
        elif op[0] == "forget":
            for key in op[2]:
                state[op[1]].pop(key, None)
        seen.append({where: dict(known) for where, known in state.items()})
    return seen


@pytest.mark.e2e
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_every_backend_answers_a_scenario_as_a_dictionary_does(
    scenario: list[Op], request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    expected = model(scenario)
    for backend in BACKENDS:
        folder: Path = tmp_path_factory.mktemp(backend)
        assert play(location(backend, request, folder), scenario) == expected, backend
