"""The bounds that let a small body skip work: `parse_json_body` skips the depth walk when the
body has no more opening brackets than the limit (it must refuse exactly what the full walk
refuses, however many brackets sit inside strings), and `parse_within_budget` skips counting the
parts when the brackets and commas are within the caps (the parts never exceed them)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.budget import raw_parts, value_bound
from gateway.ingress.errors import ClientError, check_depth, parse_json_body

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(alphabet='ab[]{}"\\', max_size=6))
_json = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(alphabet="k[{", max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


def _refused(check: Any) -> bool:
    try:
        check()
    except ClientError:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(_json, st.integers(1, 8), st.sampled_from([None, "messages"]))
def test_the_bracket_bound_refuses_exactly_what_the_walk_refuses(value, limit, skip):
    if skip is not None:
        value = {"model": "m", skip: value if isinstance(value, list) else [value]}
    raw = orjson.dumps(value)
    walked = _refused(lambda: check_depth(orjson.loads(raw), limit, skip))
    assert _refused(lambda: parse_json_body(raw, limit, skip)) == walked


@settings(max_examples=100, deadline=None)
@given(_json, st.integers(1, 8), st.sampled_from([None, "messages"]))
def test_a_large_body_is_walked_without_its_brackets_counted_and_refuses_what_the_walk_refuses(
    value, limit, skip
):
    body = {"model": "m", "pad": "{[" * 9000, "value": value}  # past the counted size
    if skip is not None:
        body[skip] = value if isinstance(value, list) else [value]
    raw = orjson.dumps(body)
    walked = _refused(lambda: check_depth(orjson.loads(raw), limit, skip))
    assert _refused(lambda: parse_json_body(raw, limit, skip)) == walked


def test_a_body_at_the_limit_is_taken_and_one_past_it_refused():
    for depth, refused in ((4, False), (5, True)):
        raw = b"[" * depth + b"]" * depth
        if refused:
            with pytest.raises(ClientError, match="nesting deeper than 4"):
                parse_json_body(raw, 4)
        else:
            assert parse_json_body(raw, 4) == orjson.loads(raw)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["messages", "tools", "contents", "x"]), _json, max_size=4))
def test_the_parts_counted_never_exceed_the_value_bound(body):
    # `parse_within_budget` skips `raw_parts` when the bound is within the caps
    raw = orjson.dumps(body)
    assert raw_parts(orjson.loads(raw)) <= value_bound(raw, 0, len(raw))


def test_the_parts_of_a_message_list_are_counted_against_the_bound():
    body = {"messages": [{"role": "user", "content": [{"type": "text"}, {"type": "text"}]}, {"role": "x"}]}
    raw = orjson.dumps(body)
    assert raw_parts(body) == 3 <= value_bound(raw, 0, len(raw))


@settings(max_examples=300)
@given(st.binary(max_size=300), st.integers(0, 320), st.integers(0, 320))
def test_the_value_bound_counts_the_opening_brackets_and_commas_of_its_range(raw, start, end):
    expected = raw.count(b"{", start, end) + raw.count(b"[", start, end) + raw.count(b",", start, end)
    assert value_bound(raw, start, end) == expected
