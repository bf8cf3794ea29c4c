"""Plain JSON-object texts checked by their form and written by Arrow's JSON reader
(``_json.flat_text``): the same verdict and the same sorted members as orjson's parse."""

from __future__ import annotations

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from churn_connector._json import flat_text
from churn_connector._json.arrow import contiguous
from churn_connector._options.events import EventOptions
from churn_connector._validate.columns import text_objects

ARROW_STR = pd.ArrowDtype(pa.string())
KEYS = st.text(min_size=0, max_size=4)
SPACE = st.sampled_from(["", " ", "\t", "  "])
# each key keeps one kind of value across rows, as an export's column does
KINDS = {
    "string": st.text(max_size=5),
    "int": st.integers(-(10**18) + 1, 10**18 - 1),
    "bool": st.booleans(),
}


def sorted_members(text: str) -> bytes:
    return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)[1:-1]


@st.composite
def columns(draw: st.DrawFn) -> list[str]:
    kinds = draw(st.dictionaries(KEYS, st.sampled_from(sorted(KINDS)), max_size=4))
    texts = []
    for _ in range(draw(st.integers(1, 6))):
        keys = draw(st.lists(st.sampled_from(sorted(kinds)), unique=True)) if kinds else []
        parts = []
        for key in keys:
            value = orjson.dumps(draw(KINDS[kinds[key]])).decode()
            a, b, c, d = (draw(SPACE) for _ in range(4))
            parts.append(f"{a}{orjson.dumps(key).decode()}{b}:{c}{value}{d}")
        texts.append(draw(SPACE) + "{" + ",".join(parts) + draw(SPACE) + "}" + draw(SPACE))
    return texts


@settings(max_examples=150, deadline=None)
@given(columns())
def test_plain_texts_are_orjsons_objects_with_orjsons_sorted_members(texts: list[str]) -> None:
    arr = pa.array(texts, pa.large_string())
    plain = flat_text.plain_texts(arr)
    members = flat_text.plain_members(arr.filter(pa.array(plain)))
    for text, is_plain in zip(texts, plain.tolist(), strict=True):
        assert type(orjson.loads(text)) is dict
        # a text is plain unless a string needs an escape
        assert is_plain == ("\\" not in text)
    if members is not None:
        shown = [t for t, p in zip(texts, plain.tolist(), strict=True) if p]
        assert members.to_pylist() == [sorted_members(t) for t in shown]


def test_texts_outside_the_form_are_not_plain() -> None:
    texts = [
        '{"a":1.5}',  # a float: Arrow would unify it with the key's integers
        '{"a":null}',  # a null: a struct cannot tell it from an absent key
        '{"a":[1]}',
        '{"a":{"b":1}}',
        '{"a":"x\\"y"}',  # an escape
        '{"a":01}',  # not JSON
        '{"a":1234567890123456789}',  # 19 digits: maybe beyond 64 bits
        '{"a":1}\n',  # a newline: not a line of NDJSON
        '{"a":1',
        "[]",
        None,
    ]
    assert not flat_text.plain_texts(pa.array(texts)).any()


def test_arrow_refusing_the_column_gives_no_members() -> None:
    # a repeated key (orjson keeps the last) and a key of two kinds: the per-text loop
    assert flat_text.plain_members(pa.array(['{"a":1,"a":2}'])) is None
    assert flat_text.plain_members(pa.array(['{"a":1}', '{"a":"1"}'])) is None


def test_date_like_strings_stay_the_strings_written() -> None:
    texts = ['{"d":"2024-01-02","t":"2024-01-02T03:04:05"}', '{"d":"x"}']
    members = flat_text.plain_members(pa.array(texts))
    assert members is not None
    assert members.to_pylist() == [sorted_members(t) for t in texts]


@pytest.mark.parametrize("repeated", [False, True])
def test_validation_hands_over_plain_and_other_texts_in_row_order(*, repeated: bool) -> None:
    # with a repeated key Arrow refuses the plain texts, and the loop parses them all: the
    # text that repeats a key is refused (check repeated_key), so no members of it go on
    texts = ['{"b":1,"a":"x"}', "5", None, '{"z":[1]}', '{ "c" : true }']
    texts += ['{"a":1,"a":2}'] if repeated else []
    s = pd.Series(texts, dtype=ARROW_STR)
    found = text_objects(s, "properties", EventOptions().rules, hand_over=True)
    assert found is not None
    ok = found.ok & ~found.repeated
    assert ok.tolist() == [True, False, True, True, True] + [False] * repeated
    members = found.members
    assert members is not None and found.texts is not None
    assert found.texts.equals(contiguous(s))  # parsed from the column's own buffers
    expected = [b'"a":"x","b":1', None, None, b'"z":[1]', b'"c":true']
    assert members.to_pylist() == expected + [None] * repeated
