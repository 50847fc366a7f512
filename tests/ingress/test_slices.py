"""A list text going on from another (gateway/ingress/slices.py `continued`, `went_on`): what the
decode memo's chained turns rely on to take a held list's items for a new list's first ones
without reading them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.slices import ITEMS, continued, last_item_end, went_on

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
_SPACE = st.sampled_from(["", "", " ", "\n  ", "\t"])


@st.composite
def _list_text(draw: Any, items: list[Any]) -> bytes:
    """`items` as a JSON list text, with spaces drawn around every item."""
    parts = [draw(_SPACE) + orjson.dumps(item).decode() + draw(_SPACE) for item in items]
    return ("[" + ",".join(parts) + "]").encode() if parts else b"[" + draw(_SPACE).encode() + b"]"


@st.composite
def _pairs(draw: Any) -> tuple[bytes, bytes]:
    """A held list text and a new one: the held list's text with items after it, or one of a
    list that shares some items, or an unrelated one (byte edits included)."""
    held_items = draw(st.lists(_JSON, max_size=5))
    held = draw(_list_text(held_items))
    kind = draw(st.sampled_from(["after", "same", "edited", "other"]))
    if kind == "other":
        return held, draw(_list_text(draw(st.lists(_JSON, max_size=6))))
    if kind == "same":
        return held, held
    more = draw(st.lists(_JSON, min_size=1, max_size=3))
    tail = draw(_list_text(more))
    end = last_item_end(held)
    text = held[:end] + b"," + tail[1:] if held_items else tail
    if kind == "edited" and len(text) > 2:
        at = draw(st.integers(1, len(text) - 2))
        text = text[:at] + bytes([draw(st.sampled_from(b'0 ,"]}[{a'))]) + text[at + 1 :]
    return held, text


def _parsed(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


@settings(max_examples=400, deadline=None)
@given(_pairs())
def test_a_list_goes_on_from_a_held_one_only_when_its_first_items_are_the_held_ones(pair):
    held, text = pair
    whole = _parsed(text)
    tail = continued(text, held, last_item_end(held))
    if tail is None:
        return
    held_values = orjson.loads(held)
    assert held_values  # a list of no items is never gone on from
    if whole is not None:  # (the gateway compares only lists msgspec read as JSON)
        first = [bytes(t) for t in ITEMS.decode(held)]
        assert [bytes(t) for t in ITEMS.decode(text)][: len(first)] == first
        assert whole[: len(held_values)] == held_values
        assert orjson.loads(tail) == whole[len(held_values) :]


@pytest.mark.parametrize(
    ("held", "text", "tail"),
    [
        (b"[1,2]", b"[1,2,3]", b"[3]"),
        (b"[1,2]", b"[1,23]", None),  # the held last number goes on: not its item
        (b"[1]", b"[1.5,2]", None),
        (b"[1]", b"[1e5]", None),
        (b'["a"]', b'["a" , "b"]', b'[ "b"]'),
        (b"[1 ]", b"[1,2]", b"[2]"),
        (b"[ 1\n]", b"[ 1\n, 2]", b"[ 2]"),
        (b"[1,2]", b"[1,2 ]", b"[]"),
        (b"[]", b"[1]", None),  # nothing held: nothing to take
        (b"[1,2]", b"[1]", None),
        (b"[1,2]", b"[1,2", None),
    ],
)
def test_continued(held: bytes, text: bytes, tail: bytes | None):
    assert continued(text, held, last_item_end(held)) == tail


def test_went_on_reads_the_held_list_from_its_body_and_parses_only_the_new_items():
    body = orjson.dumps({"model": "m", "messages": [{"a": 1}, {"b": [2]}], "tools": []})
    assert went_on(body, "messages", 0, b'[{"a":1},{"b":[2]},{"c":3}]') == (
        b'[{"a":1},{"b":[2]},{"c":3}]',
        [{"c": 3}],
    )
    assert went_on(body, "messages", 0, b'[{"a":1},{"b":[3]}]') is None
    assert went_on(body, "other", 0, b'[{"a":1}]') is None  # no such field: not held
    assert went_on(b"[1,2]", None, last_item_end(b"[1,2]"), b"[1,2,x]") is None  # not JSON: read whole
    assert went_on(b"[1,2]", None, 4, ITEMS.decode(b"[[1,2,3]]")[0]) == (b"[1,2,3]", [3])
