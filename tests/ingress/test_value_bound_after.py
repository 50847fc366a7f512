"""A body's value bound counted from a held body it opens with (gateway/ingress/budget.py
`value_bound_after`, gateway/ingress/memo.py `held_bound`): the same count as the whole body's."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.workloads import agent_messages, next_turn
from gateway.ingress import memo as memo_module
from gateway.ingress.budget import Shared, common_prefix, known, knowns, value_bound, value_bound_after
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.split import parse_transcript
from tests.ingress.test_memo import LIMITS, TOOLS

# bytes rich in what the bound counts, so that shared and differing parts both hold some
_BYTES = st.binary(max_size=300) | st.lists(st.sampled_from(b'{[,]}" ax'), max_size=300).map(bytes)


def _naive_prefix(a: bytes, b: bytes) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=300)
@given(_BYTES, _BYTES, _BYTES)
def test_the_count_from_a_held_body_is_the_whole_count(shared, held_tail, tail):
    held, raw = shared + held_tail, shared + tail
    assert common_prefix(raw, held) == _naive_prefix(raw, held)
    shared = Shared(held, value_bound(held, 0, len(held)), common_prefix(raw, held), None, None)
    assert value_bound_after(raw, shared, 1 << 20) == value_bound(raw, 0, len(raw))


@given(_BYTES, _BYTES)
def test_too_little_shared_is_counted_whole_by_the_caller(held, raw):
    shared = _naive_prefix(raw, held)
    most = len(held) + len(raw) - 2 * shared - 1
    if most >= 0:
        shared = Shared(held, value_bound(held, 0, len(held)), shared, None, None)
        assert value_bound_after(raw, shared, most) is None


def _body(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": "m", "messages": messages, "tools": TOOLS})


def _parsed(memo: DecodeMemo, raw: bytes, scope: str = "s") -> None:
    parse_transcript(raw, "messages", memo, scope, LIMITS, value_bound(raw, 0, len(raw)))


def test_each_turn_is_counted_from_the_last_ones_body():
    """A long first sight, then turns that go on from it: each finds the body before it, whose
    count gives its own; another tenant's scope finds nothing (no timing learned across them)."""
    messages = agent_messages(memo_module._LONG_TRANSCRIPT + 10, "held-bound")
    memo = DecodeMemo(8 << 20)
    raw = _body(messages)
    assert memo.held_bound("s", raw, "messages") is None  # never seen
    _parsed(memo, raw)
    for step in range(3):
        answer = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{step}", "type": "function", "function": {"name": "tool_01", "arguments": "{}"}}
            ],
        }
        messages = next_turn(messages, answer, "held-bound")
        previous, raw = raw, _body(messages)
        held = memo.held_bound("s", raw, "messages")
        assert held is not None and held.held == previous
        assert held.values == value_bound(previous, 0, len(previous))
        assert value_bound_after(raw, held, 1 << 20) == value_bound(raw, 0, len(raw))
        assert memo.held_bound("other tenant", raw, "messages") is None
        _parsed(memo, raw)


def test_a_body_counted_in_steps_past_the_cap_is_held_without_a_count():
    """`values` None (the body was counted exactly, past the bound): nothing to count from."""
    messages = agent_messages(memo_module._LONG_TRANSCRIPT + 10, "uncounted")
    memo = DecodeMemo(8 << 20)
    raw = _body(messages)
    parse_transcript(raw, "messages", memo, "s", LIMITS, None)
    parse_transcript(raw, "messages", memo, "s", LIMITS, None)
    assert memo.held_bound("s", _body([*messages, {"role": "user", "content": "Next."}]), "messages") is None


@given(st.lists(st.integers(0, 70)))
def test_knowns_are_the_known_of_each_count(parts):
    assert [k.parts for k in knowns(parts)] == parts
    assert all(a is b for a, b in zip(knowns(parts), map(known, parts), strict=True) if a.parts < 64)


async def test_a_body_is_counted_whole_or_in_steps_to_the_same_count():
    # up to _WHOLE_BOUND in one step (no slice copied), a longer body a step of bytes at a time
    from gateway.config import ServerConfig
    from gateway.ingress.admission import _BOUND_STEP, _WHOLE_BOUND, values_within_budget

    filler = b'{"a": [1, "x,{[y", {"b": 2}]},' * 1000
    for size in (_BOUND_STEP - 7, _BOUND_STEP + 7, _WHOLE_BOUND, _WHOLE_BOUND + 7, 2 * _WHOLE_BOUND + 3):
        raw = b"[" + (filler * (size // len(filler) + 1))[: size - 2] + b"]"
        assert await values_within_budget(raw, ServerConfig(max_json_values=10**7)) == value_bound(
            raw, 0, len(raw)
        )
