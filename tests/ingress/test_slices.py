"""A body going on from a held one (gateway/ingress/slices.py `list_span`, `went_on`): what the
decode memo's chained turns rely on to take a held list's items for a new list's first ones
without reading them, and to read only what follows them."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.budget import Shared, value_bound, value_bound_after
from gateway.ingress.slices import FIELDS, field_at, last_item_end, list_span, shared_with, went_on

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
_SPACE = st.sampled_from(["", "", " ", "\n  ", "\t"])
_KEYS = st.sampled_from(["model", "tools", "messages\u00e9", "n", "msgs"])
# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_STYLES = st.sampled_from(["compact", "spaced", "ascii"])
_OTHERS = st.lists(st.tuples(_KEYS, _JSON), max_size=3, unique_by=lambda kv: kv[0])
_HELD_ITEMS = st.lists(_JSON, min_size=1, max_size=5)
_TWICE_ITEMS = st.lists(_JSON, max_size=2)
_FIELD_ITEMS = st.lists(_JSON, max_size=3)
_OTHER_ITEMS = st.lists(_JSON, max_size=6)
_MORE_ITEMS = st.lists(_JSON, min_size=1, max_size=3)
_AT = st.integers(0, 3)
_KINDS = st.sampled_from(["after", "after", "same", "edited", "other", "twice"])
_EDIT_BYTES = st.sampled_from(b'0 ,"]}[{a.e')


def _text(value: Any, draw: Any) -> str:
    """`value` as JSON text, compact, spaced out or with its keys escaped."""
    style = draw(_STYLES)
    if style == "compact":
        return orjson.dumps(value).decode()
    if style == "spaced":
        return json.dumps(value, indent=1)
    return json.dumps(value, ensure_ascii=True)


@st.composite
def _list_text(draw: Any, items: list[Any]) -> str:
    """`items` as a JSON list text, with spaces drawn around every item."""
    parts = [draw(_SPACE) + _text(item, draw) + draw(_SPACE) for item in items]
    return "[" + ",".join(parts) + "]" if parts else "[" + draw(_SPACE) + "]"


@st.composite
def _body(draw: Any, listed: str, others: list[tuple[str, Any]], at: int, twice: bool) -> bytes:
    """A JSON object text: `others` as fields, the list text `listed` as `messages` at place
    `at` among them (and, `twice`, a second `messages` key after it)."""
    fields = [f'"{k}"{draw(_SPACE)}:{draw(_SPACE)}{_text(v, draw)}' for k, v in others]
    fields.insert(min(at, len(fields)), f'"messages"{draw(_SPACE)}:{draw(_SPACE)}{listed}')
    if twice:
        fields.append(f'"messages":{draw(_list_text(draw(_TWICE_ITEMS)))}')
    spaces = [draw(_SPACE) for _ in range(2)]
    return ("{" + spaces[0] + ("," + draw(_SPACE)).join(fields) + spaces[1] + "}").encode()


@st.composite
def _turns(draw: Any) -> tuple[bytes, bytes, list[Any], str]:
    """A held body and the next one: the held list's text with items after it, or the same list,
    or byte edits of it, or another list; the other fields the same or drawn again."""
    held_items = draw(_HELD_ITEMS)
    held_list = draw(_list_text(held_items))
    others = draw(_OTHERS)
    at = draw(_AT)
    held = draw(_body(held_list, others, at, False))
    kind = draw(_KINDS)
    if kind == "other":
        text = draw(_list_text(draw(_OTHER_ITEMS)))
    elif kind == "same":
        text = held_list
    else:
        more = draw(_list_text(draw(_MORE_ITEMS)))
        end = last_item_end(held_list.encode())
        text = held_list.encode()[:end].decode() + draw(_SPACE) + "," + more[1:]
    raw = draw(
        _body(
            text,
            others if draw(st.booleans()) else draw(_OTHERS),
            at,
            kind == "twice",
        )
    )
    if kind == "edited":
        cut = draw(st.integers(0, len(raw) - 1))
        raw = raw[:cut] + bytes([draw(_EDIT_BYTES)]) + raw[cut + 1 :]
    return held, raw, held_items, kind


def _parsed(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


@settings(max_examples=500, deadline=None)
@given(_turns())
def test_a_body_goes_on_from_a_held_one_only_when_it_reads_as_the_held_items_and_more(turn):
    held, raw, _, kind = turn
    held_items = orjson.loads(held)["messages"]
    span = list_span(held, "messages")
    assert span is not None  # written as `field_at` walks it, its list found
    found = went_on(raw, held, "messages", *span)
    whole = _parsed(raw)
    if kind in ("after", "same"):
        # what the fast path is for: taken, where the fields before the list are the same or
        # changed (Codex switching model moves the list: found by its key)
        assert found is not None and whole is not None
    if found is None:
        return
    fields, new, start, end = found
    assert whole is not None  # never a body the whole parse refuses
    read = {name: orjson.loads(memoryview(value)) for name, value in fields.items() if name != "messages"}
    assert {**read, "messages": held_items + new} == whole
    assert list_span(raw, "messages") == (start, end)


@settings(max_examples=300, deadline=None)
@given(_turns(), st.sampled_from(["span", "no span", "other held"]))
def test_a_body_goes_on_alike_and_counts_alike_from_what_counting_its_values_compared(turn, known):
    # the exchange counts a body's values from the held one's (`shared_with`, `value_bound_after`)
    # before it is read: `went_on` then takes the comparisons as made, handed on as data
    held, raw, _, _ = turn
    span = list_span(held, "messages")
    assert span is not None
    want = went_on(raw, held, "messages", *span)
    values = value_bound(held, 0, len(held))
    shared = shared_with(raw, held, values, span if known == "span" else None, "messages")
    assert value_bound_after(raw, shared, 1 << 30) == value_bound(raw, 0, len(raw))
    if known == "other held":  # another body's comparison (equal bytes, not the same): not taken
        shared = shared_with(raw, bytes(bytearray(held)), values, span, "messages")
    assert went_on(raw, held, "messages", *span, shared) == want


@given(_turns())
def test_a_comparison_made_says_where_the_held_list_is(turn):
    held, raw, _, _ = turn
    span = list_span(held, "messages")
    assert span is not None
    shared = shared_with(raw, held, value_bound(held, 0, len(held)), span, "messages")
    assert raw[: shared.prefix] == held[: shared.prefix]
    assert (
        shared.prefix == len(raw)
        or raw[shared.prefix : shared.prefix + 1] != held[shared.prefix : shared.prefix + 1]
    )
    if shared.at is not None:
        assert raw[shared.at : shared.at + span[1] - span[0]] == held[span[0] : span[1]]
    # a comparison that says nothing is shared is taken as made: nothing goes on from it
    nothing = Shared(held, 0, 0, span, None)
    assert went_on(raw, held, "messages", *span, nothing) is None


@given(st.data())
def test_a_fields_place_is_found_by_its_key_and_the_values_before_it(data):
    others = data.draw(_OTHERS)
    listed = data.draw(_list_text(data.draw(_FIELD_ITEMS)))
    twice = data.draw(st.booleans())
    raw = data.draw(_body(listed, others, data.draw(_AT), twice))
    at = field_at(raw, FIELDS.decode(raw), "messages")
    if twice:
        assert at is None  # a key given twice: the value read is not the first one's
    else:
        assert at is not None and raw[at:].startswith(listed.encode())


@pytest.mark.parametrize(
    ("held", "raw", "new"),
    [
        (b'{"m":[1,2]}', b'{"m":[1,2,3]}', [3]),
        (b'{"m":[1,2]}', b'{"m":[1,23]}', None),  # the held last number goes on: not its item
        (b'{"m":[1]}', b'{"m":[1.5,2]}', None),
        (b'{"m":[1]}', b'{"m":[1e5]}', None),
        (b'{"m":["a"]}', b'{"m":["a" , "b"]}', ["b"]),
        (b'{"m":[1 ]}', b'{"m":[1,2]}', [2]),
        (b'{"m":[1,2]}', b'{"m":[1,2 ]}', []),
        (b'{"m":[1,2]}', b'{"m":[1]}', None),
        (b'{"m":[1,2]}', b'{"m":[1,2', None),
        (b'{"m":[1,2]}', b'{"m":[1,2,x]}', None),  # not JSON: read whole, for its error
        (b'{"m":[1,2]}', b'{"m":[1,2,3],"m":[9]}', None),  # a second key: its list is the one read
        (b'{"m":[1,2],"t":1}', b'{"m":[1,2,{"c":3}],"t":[2]}', [{"c": 3}]),
    ],
)
def test_went_on(held: bytes, raw: bytes, new: list[Any] | None):
    span = list_span(held, "m")
    assert span is not None
    found = went_on(raw, held, "m", *span)
    assert (found and found[1]) == new if new is not None else found is None


@pytest.mark.parametrize("compared", [False, True])
def test_a_held_run_found_at_its_old_place_by_chance_is_looked_for_by_its_key(compared: bool):
    # the held list `[[]` (at 16, after a longer opening) reappears at 16 of the new body inside
    # its second item: that place does not read as the list, the list's key does (hypothesis's
    # find in test_a_body_goes_on_from_a_held_one_only_when_it_reads_as_the_held_items_and_more)
    held, raw = b'{\n  "messages": [[]]}', b'{"messages":[[],[[]]]}'
    span = list_span(held, "messages")
    assert span == (16, 19) and raw.startswith(held[16:19], 16)
    shared = shared_with(raw, held, value_bound(held, 0, len(held)), span, "messages") if compared else None
    found = went_on(raw, held, "messages", *span, shared)
    assert found is not None
    fields, new, start, end = found
    assert (new, start, end) == ([[[]]], 12, 20)
    assert list_span(raw, "messages") == (start, end)
