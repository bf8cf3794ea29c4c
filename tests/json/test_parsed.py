"""Validation's parse of JSON-object texts handed to the wire step as a value beside the slice
(``_json.parsed``), never through a module-global cache."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from churn_connector._events.schema import build_schema, events_schema
from churn_connector._events.stream import EventStream
from churn_connector._json import parsed
from churn_connector._json.arrow import contiguous
from churn_connector._options.events import EventOptions
from churn_connector._validate.columns import TextObjects, text_objects
from churn_connector._validate.failure_log import run_schema
from churn_connector._validate.schema import text_parses
from churn_connector._wire import column_wise

ARROW_STR = pd.ArrowDtype(pa.string())
NOW = pd.Timestamp("2026-11-20T12:00:00Z")


def _parse(found: TextObjects | None, column: str = "properties") -> parsed.ParsedTexts:
    assert found is not None and found.texts is not None and found.members is not None
    return parsed.ParsedTexts({column: (found.texts, found.members)})


def test_the_members_answer_for_their_own_buffers_and_column_only() -> None:
    arr = pa.array(['{"b":1,"a":2}'])
    members = pa.array([b'"a":2,"b":1'])
    kept = parsed.ParsedTexts({"properties": (arr, members)})
    assert kept.members("properties", pa.array(['{"b":1,"a":2}'])) is None  # other buffers
    assert kept.members("context", arr) is None
    assert kept.members("properties", arr) is members
    assert not parsed.NO_PARSES and parsed.NO_PARSES.members("properties", arr) is None


def test_validation_gives_each_valid_objects_sorted_members() -> None:
    texts = ['{"b": 1, "a": [2, {"d": 3, "c": 4}]}', '{"z": true, "y": null}', "[1]", None]
    s = pd.Series(texts, dtype=ARROW_STR)
    found = text_objects(s, "properties", EventOptions().rules, hand_over=True)
    assert found is not None and found.ok.tolist() == [True, True, False, True]
    members = _parse(found).members("properties", contiguous(s))
    assert members is not None
    assert members.to_pylist() == [b'"a":[2,{"c":4,"d":3}],"b":1', b'"y":null,"z":true', None, None]


def test_the_members_follow_a_slices_valid_rows() -> None:
    df = pd.DataFrame(
        {"n": [1, 2, 3], "properties": pd.Series(['{"a":1}', "5", '{"c":3}'], dtype=ARROW_STR)}
    )
    found = text_objects(df["properties"], "properties", EventOptions().rules, hand_over=True)
    assert found is not None
    rows = np.flatnonzero(found.ok)
    work = df.iloc[rows].reset_index(drop=True)
    members = (
        _parse(found).of_rows(df, work, rows).members("properties", contiguous(work["properties"]))
    )
    assert members is not None and members.to_pylist() == [b'"a":1', b'"c":3']
    other = pd.DataFrame({"properties": pd.Series(['{"a":1}', '{"c":3}'], dtype=ARROW_STR)})
    assert not _parse(found).of_rows(other, work, rows)  # not the texts it parsed: left out


def _events(properties: list[str | None]) -> pd.DataFrame:
    n = len(properties)
    return pd.DataFrame(
        {
            "external_user_id": [f"u{i}" for i in range(n)],
            "event_type": ["login"] * n,
            "occurred_at": [NOW] * n,
            "properties": pd.Series(properties, dtype=ARROW_STR),
        }
    )


def test_a_schema_run_returns_its_parse_and_a_schema_alone_keeps_none() -> None:
    df = _events(['{"b":1,"a":2}', "[1]", '{"c":true}'])
    schema = build_schema(EventOptions(now=NOW))
    result = run_schema(df, schema, 0, df.index)
    assert result.invalid.tolist() == [False, True, False]
    members = result.parsed.members("properties", contiguous(df["properties"]))
    assert members is not None and members.to_pylist() == [b'"a":2,"b":1', None, b'"c":true']
    # run by itself (pandera's own validate), the schema builds and keeps nothing
    parses = text_parses(schema)
    assert parses is not None and not parses.wanted
    events_schema(now=NOW).validate(df.iloc[[0, 2]], lazy=True)
    with parses.collecting() as found:
        pass
    assert found == {}


def test_the_stream_hands_validations_parse_to_the_wire_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[bool] = []
    members_of = column_wise._text_members

    def spy(arr: pa.Array, members: Any, *, v2: bool) -> pa.Array:
        handed.append(members is not None)
        return members_of(arr, members, v2=v2)

    monkeypatch.setattr(column_wise, "_text_members", spy)
    df = _events(['{"b":1,"a":2}', "[1]", '{"c":true}'])
    batch = EventStream(df, EventOptions(now=NOW)).process(df)
    assert handed == [True]  # the valid rows' members, from validation's one parse
    assert batch.positions == [0, 2]


def test_streams_on_two_threads_each_get_their_own_parse() -> None:
    # nothing is shared between runs: each slice's parse travels with it
    frames = [_events([f'{{"k":{i},"j":{j}}}' for j in range(500)]) for i in range(2)]
    out: dict[int, list[bytes]] = {}

    def run(i: int) -> None:
        stream = EventStream(frames[i], EventOptions(now=NOW))
        batch = stream.process(frames[i])
        out[i] = list(
            batch.bodies.to_pylist() if isinstance(batch.bodies, pa.Array) else batch.bodies
        )

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert all(
            f'"properties":{{"j":{j},"k":{i}}}'.encode() in body for j, body in enumerate(out[i])
        )
