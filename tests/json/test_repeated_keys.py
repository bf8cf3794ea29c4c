"""JSON text that names a key twice in one object is found, at any depth and in any spelling
of the key, by every reader of JSON object text (``_json.values``, ``_json.flat_text``,
``_validate.columns.text_objects``); text whose keys are distinct reads as before."""

from __future__ import annotations

from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from churn_connector._json.repeats import names_per_line, names_written, repeat_in
from churn_connector._json.values import (
    RepeatedKeyError,
    ValueRules,
    check_json_string,
)
from churn_connector._options.events import EventOptions
from churn_connector._validate.columns import text_objects

ARROW_STR = pd.ArrowDtype(pa.string())
RULES = ValueRules()


@pytest.mark.parametrize(
    ("text", "where", "key"),
    [
        ('{"plan":"a","plan":"b"}', "", "plan"),
        ('{"plan":"a","plan":"a"}', "", "plan"),  # the same value: still two members
        ('{"plan":"a","pl\\u0061n":"b"}', "", "plan"),  # one key once decoded
        ('{"a":{"x":1,"y":{"z":[{"k":1,"k":null}]}}}', ".a.y.z[0]", "k"),
        ('{"a":[1,{"b":2}],"c":{"d":true,"d":false}}', ".c", "d"),
        ('{"t":"10:00:00","t":"11:00:00"}', "", "t"),  # colons in the values
    ],
)
def test_a_key_named_twice_is_found_with_its_place(text: str, where: str, key: str) -> None:
    found = repeat_in(text, orjson.loads(text))
    assert found is not None and (found.where, found.key) == (where, key)
    with pytest.raises(RepeatedKeyError) as caught:
        check_json_string(text, "properties", RULES)
    assert caught.value.key == key
    assert f"names the key {key!r} twice" in str(caught.value)
    assert str(caught.value).startswith("properties: ")


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"x\\":1","b":2}',  # a string holding '":' counts as a name's end, and is none
        '{"a":"12:30","b":{"c":"d:e"}}',
        '{"a":1,"A":2}',  # keys are case-sensitive: two keys
        '{"a":{"k":1},"b":{"k":2}}',  # one key in two objects: not a repeat
    ],
)
def test_distinct_keys_are_not_a_repeat(text: str) -> None:
    assert repeat_in(text, orjson.loads(text)) is None
    assert check_json_string(text, "properties", RULES) == orjson.loads(text)


def verdicts(texts: list[str | None], dtype: Any) -> tuple[list[bool], list[bool]]:
    s = pd.Series(texts, dtype=dtype)
    found = text_objects(s, "properties", EventOptions().rules, hand_over=True)
    assert found is not None
    return found.ok.tolist(), found.repeated.tolist()


# "string": pandas' own string dtype under pandas 2 and 3 ("str" is object under pandas 2)
@pytest.mark.parametrize("dtype", [ARROW_STR, "string"], ids=["arrow strings", "pandas strings"])
def test_the_plain_fast_path_refuses_a_repeat_and_keeps_the_other_rows(dtype: Any) -> None:
    # every text is plain (Arrow's JSON reader would read them), one repeats a key: Arrow
    # refuses the whole column, and only that text is found to repeat
    texts: list[str | None] = ['{"plan":"a"}', '{"plan":"a","plan":"b"}', None, '{"b":true}']
    assert verdicts(texts, dtype) == ([True] * 4, [False, True, False, False])


def test_a_repeated_text_hands_no_members_to_the_wire_step() -> None:
    texts = ['{"plan":"a"}', '{"plan":"a", "plan":"b"}', '{"n":1.5,"n":2.5}', '{"n":1.5}']
    s = pd.Series(texts, dtype=ARROW_STR)
    found = text_objects(s, "properties", EventOptions().rules, hand_over=True)
    assert found is not None and found.repeated.tolist() == [False, True, True, False]
    members = found.members
    assert members is not None
    assert members.to_pylist() == [b'"plan":"a"', None, None, b'"n":1.5']


KEYS = st.text(max_size=4)
LEAVES = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=5)
SPACE = st.sampled_from(["", " ", "\n", "\t "])


def spelled(value: Any, space: str, *, escaped: bool) -> str:
    """JSON text of ``value`` with ``space`` around its tokens, keys ASCII-escaped or not."""
    if isinstance(value, dict):
        members = [
            f"{spelled(k, space, escaped=escaped)}{space}:{spelled(v, space, escaped=escaped)}"
            for k, v in value.items()
        ]
        return "{" + space + f",{space}".join(members) + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(spelled(v, space, escaped=escaped) for v in value) + "]"
    if isinstance(value, str) and escaped:
        return "".join(['"', *(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in value), '"'])
    return orjson.dumps(value).decode()


@settings(max_examples=100, deadline=None)
@given(objects=st.lists(OBJECTS, min_size=1, max_size=5), space=SPACE, escaped=st.booleans())
def test_texts_with_distinct_keys_read_as_before(
    *, objects: list[dict[str, Any]], space: str, escaped: bool
) -> None:
    # nothing changes for a text whose objects name each key once: same verdict, same
    # sorted members (the wire's bytes) as orjson's own parse gives
    texts = [spelled(o, space, escaped=escaped) for o in objects]
    for text, obj in zip(texts, objects, strict=True):
        assert repeat_in(text, orjson.loads(text)) is None
        assert check_json_string(text, "properties", RULES) == obj
    s = pd.Series(texts, dtype=ARROW_STR)
    found = text_objects(s, "properties", EventOptions().rules, hand_over=True)
    assert found is not None and found.ok.all() and not found.repeated.any()
    members = found.members
    assert members is not None
    assert members.to_pylist() == [
        orjson.dumps(orjson.loads(t), option=orjson.OPT_SORT_KEYS)[1:-1] for t in texts
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(OBJECTS, min_size=1, max_size=4), st.data(), SPACE)
def test_a_key_repeated_anywhere_is_always_refused(
    objects: list[dict[str, Any]], data: st.DataObject, space: str
) -> None:
    # one text gets one object that names a key twice, at some depth; the others stay
    at = data.draw(st.integers(0, len(objects) - 1))
    key = data.draw(KEYS)
    value = data.draw(LEAVES)
    twice = "{" + f"{orjson.dumps(key).decode()}:{orjson.dumps(value).decode()}," * 2
    inner = twice + f'"z":1{space}}}'
    depth = data.draw(st.integers(0, 2))
    text = inner
    for _ in range(depth):
        text = f'{{"a":[{text}]}}'
    texts = [spelled(o, space, escaped=False) for o in objects]
    texts[at] = text
    found = text_objects(pd.Series(texts, dtype=ARROW_STR), "properties", EventOptions().rules)
    assert found is not None
    assert found.repeated.tolist() == [i == at for i in range(len(texts))]
    assert found.ok.all()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(OBJECTS, SPACE), min_size=1, max_size=5))
def test_names_counted_for_many_lines_at_once_are_each_lines_count(
    objects: list[tuple[dict[str, Any], str]],
) -> None:
    # NDJSON counts the names of a whole slice's lines in one pass (numpy)
    lines = [(spelled(o, space, escaped=False) + "\n").encode() for o, space in objects]
    assert names_per_line(lines).tolist() == [names_written(line) for line in lines]


def test_an_ndjson_line_spacing_its_names_still_shows_its_repeat() -> None:
    lines = [b'{"a" :1}\n', b'{ "a"  :1 , "a"\t: 2}\n', b'{"t":"10:00"}\n']
    assert names_per_line(lines).tolist() == [1, 2, 1]
