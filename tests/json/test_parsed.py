"""Validation's parse of JSON-object texts handed to the wire step (``_json.parsed``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from churn_connector._json import parsed
from churn_connector._json.arrow import contiguous
from churn_connector._options.events import EventOptions
from churn_connector._validate.columns import text_objects_ok

ARROW_STR = pd.ArrowDtype(pa.string())


def test_kept_members_are_found_for_the_same_buffers_only_and_once() -> None:
    arr = pa.array(['{"b":1,"a":2}'])
    members = pa.array([b'"a":2,"b":1'])
    parsed.keep_parsed(arr, members)
    assert parsed.take_parsed(pa.array(['{"b":1,"a":2}'])) is None  # equal text, other buffers
    assert parsed.take_parsed(arr) is members
    assert parsed.take_parsed(arr) is None


def test_validation_leaves_each_valid_objects_sorted_members() -> None:
    texts = ['{"b": 1, "a": [2, {"d": 3, "c": 4}]}', '{"z": true, "y": null}', "[1]", None]
    s = pd.Series(texts, dtype=ARROW_STR)
    ok = text_objects_ok(s, "properties", EventOptions().rules, hand_over=True)
    assert ok is not None and ok.tolist() == [True, True, False, True]
    members = parsed.take_parsed(contiguous(s))
    assert members is not None
    assert members.to_pylist() == [b'"a":[2,{"c":4,"d":3}],"b":1', b'"y":null,"z":true', None, None]


def test_the_members_follow_a_slices_valid_rows() -> None:
    df = pd.DataFrame(
        {"n": [1, 2, 3], "properties": pd.Series(['{"a":1}', "5", '{"c":3}'], dtype=ARROW_STR)}
    )
    ok = text_objects_ok(df["properties"], "properties", EventOptions().rules, hand_over=True)
    assert ok is not None
    rows = np.flatnonzero(ok)
    work = df.iloc[rows].reset_index(drop=True)
    parsed.carry_parsed(df, work, rows)
    members = parsed.take_parsed(contiguous(work["properties"]))
    assert members is not None and members.to_pylist() == [b'"a":1', b'"c":3']
