"""The scalar engine of one-off events against the batch path: one set of rules, two engines.

For generated rows, valid and invalid, ``_track.scalar`` must give the verdict and the check
names the pandera schema gives a one-row table of the same values, and for valid rows the
same wire bytes and message id as the batch path's transform.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import churn_connector as cc
from churn_connector._events.stream import EventStream
from churn_connector._options.events import EventOptions
from churn_connector._slices import batches
from churn_connector._track.scalar import Window, event_of, options_for, problems
from churn_connector._wire.ids import FEW, PREFIXES, digests, format_uuids, quoted_ids

NOW = pd.Timestamp("2026-11-21T12:00:00.123456Z")
ABSENT: Any = object()  # message_id not given at all

ZONES = ["UTC", "Europe/Paris", "America/Los_Angeles", "Asia/Kathmandu"]

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
objects = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    st.dictionaries(st.sampled_from(["$message_id", "page"]), json_values, max_size=2),
    st.dictionaries(st.text(max_size=5), json_values, max_size=3).map(lambda d: json.dumps(d)),
    st.sampled_from(['{"a": NaN}', "[1, 2]", "not json", '{"n": 123456789012345678901}', "", "{}"]),
    st.lists(st.integers(), max_size=2),
    st.integers(),
)
texts = st.text(
    alphabet=st.characters(codec="utf-8") | st.sampled_from([" ", "\t", "\n", "\x1c", "\u3000"]),
    max_size=8,
)
user_ids = st.one_of(
    texts,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)
event_types = st.one_of(
    st.from_regex(r"[a-z0-9]{1,6}(_[a-z0-9]{1,6}){0,2}", fullmatch=True),
    st.from_regex(r"[a-z0-9]{1,6}(_[a-z0-9]{1,6}){0,2}", fullmatch=True).map(lambda t: t + "\n"),
    texts,
    st.integers(),
    st.none(),
)
offsets = st.integers(-31 * 86_400_000, 6 * 60_000)  # around the window's two edges


@st.composite
def instants(draw: st.DrawFn) -> Any:
    when = (
        NOW
        - pd.Timedelta(milliseconds=draw(offsets))
        - pd.Timedelta(microseconds=draw(st.integers(0, 999)))
    )
    zone = draw(st.sampled_from(ZONES))
    local = when.tz_convert(zone).to_pydatetime()
    form = draw(st.sampled_from(["aware", "naive", "timestamp", "text", "text_naive", "epoch"]))
    if form == "aware":
        return local
    if form == "naive":
        return local.replace(tzinfo=None)
    if form == "timestamp":
        return pd.Timestamp(local)
    if form == "epoch":
        return int(when.timestamp())
    sep = draw(st.sampled_from(["T", " ", "t"]))
    digits = draw(st.sampled_from([0, 1, 3, 6, 9]))
    frac = f".{local.microsecond:06d}000"[: digits + 1] if digits else ""
    text = local.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + frac
    if form == "text_naive":
        return text
    offset = local.strftime("%z")
    zone_text = draw(
        st.sampled_from(
            [offset, offset[:3] + ":" + offset[3:], " " + offset, "Z" if zone == "UTC" else offset]
        )
    )
    return text + zone_text


occurred = st.one_of(
    instants(),
    st.sampled_from(
        [
            "2026-11-20T09:30:00 EST",
            "2026-02-30T10:00:00Z",
            "2026-11-20T24:00:00Z",
            "2026-11-20T09:30:00+25:00",
            "2026-11-20",
            "1763631000",
            "yesterday",
            "2026-03-29T02:30:00",  # skipped in Europe/Paris
            "2026-10-25T02:30:00",  # repeated in Europe/Paris
        ]
    ),
    texts,
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)
message_ids_given = st.one_of(st.just(ABSENT), texts, st.integers(), st.none())


def batch_verdict(row: dict[str, Any], options: EventOptions) -> tuple[set[str], bytes | None]:
    """The batch path on a one-row table: the checks it fails, or the wire bytes."""
    columns = {k: [v] for k, v in row.items() if v is not ABSENT}
    df = pd.DataFrame(columns)
    report = cc.validate_events(df, options=options)
    if not report.ok:
        return set(report.failures["check"]), None
    (batch,) = list(batches(EventStream(df, options)))
    bodies = batch.bodies.to_pylist() if not isinstance(batch.bodies, list) else batch.bodies
    return set(), bytes(bodies[0])


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    user=user_ids,
    event_type=event_types,
    occurred_at=occurred,
    properties=objects,
    context=objects,
    message_id=message_ids_given,
    naive_timezone=st.sampled_from([None, "Europe/Paris"]),
    id_format=st.sampled_from(["v1", "v2"]),
    namespace=st.sampled_from([None, "shop"]),
)
def test_scalar_engine_agrees_with_the_pandera_schema_on_every_row(
    user: Any,
    event_type: Any,
    occurred_at: Any,
    properties: Any,
    context: Any,
    message_id: Any,
    naive_timezone: str | None,
    id_format: Any,
    namespace: str | None,
) -> None:
    row = {
        "external_user_id": user,
        "event_type": event_type,
        "occurred_at": occurred_at,
        "properties": properties,
        "context": context,
        "message_id": message_id,
    }
    options = EventOptions(
        now=NOW, naive_timezone=naive_timezone, id_format=id_format, namespace=namespace
    )
    found, event = problems(
        user,
        event_type,
        occurred_at,
        properties,
        context,
        None if message_id is ABSENT else message_id,
        options=options_for(naive_timezone, namespace, id_format),
        window=Window.at(NOW),
        given_id=message_id is not ABSENT,
    )
    checks, body = batch_verdict(row, options)
    assert set(found) == checks
    assert (event is None) == (body is None)
    if event is not None:
        assert event.body == body
        assert orjson.loads(body)["context"]["$message_id"] == event.message_id


@pytest.mark.parametrize("n", [1, 2, FEW - 1, FEW, 300])
def test_the_fast_path_for_a_few_rows_is_the_vectorised_one(n: int) -> None:
    # a one-off event is hashed and formatted row by row; a batch as arrays
    rows = [b'{"context":{},"event_type":"login"}', "é".encode() * 40, b"{}"] * 100
    rows = rows[:n]
    for id_format in ("v1", "v2"):
        for namespace in (None, "shop-eu"):
            few = digests(rows, namespace, PREFIXES[id_format])  # bytes: the fast path below FEW
            arrays = digests(pa.array(rows, pa.binary()), namespace, PREFIXES[id_format])
            assert few.tobytes() == arrays.tobytes()
            texts = [b'"' + u + b'"' for u in format_uuids(arrays).tolist()]
            assert quoted_ids(few) == texts


def test_an_invalid_event_names_each_check_with_the_batch_message() -> None:
    with pytest.raises(cc.DataValidationError) as caught:
        event_of(
            "u1",
            "Order Completed",
            occurred_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
            properties={"amount": float("nan")},
            now=NOW,
        )
    assert caught.value.checks == ("event_type_pattern", "occurred_at_window", "properties_json")
    assert "must be lowercase snake_case" in str(caught.value)
    assert "properties.amount: nan is not a JSON number" in str(caught.value)
