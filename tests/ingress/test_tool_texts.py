"""A Chat, Messages, Responses or Gemini body read in parts has its `tools` text looked up as sent (gateway/ingress/tool_lists.py
`ToolLists.read`): a list seen before stands unparsed in the body (`KnownList`), and the request
decodes to the same Request, or is refused with the same error (validation, depth, blocks), as the
same body parsed whole and decoded without the memo, on its first sight and on every later turn."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import ServerConfig
from gateway.ingress.admission import check_parts
from gateway.ingress.budget import KnownList, raw_parts
from gateway.ingress.chat.codec import CODEC
from gateway.ingress.chat.decode import _TOOL_LISTS
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.ingress.gemini.codec import GENERATE
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.messages.codec import CODEC as MESSAGES
from gateway.ingress.responses.codec import CODEC as RESPONSES
from gateway.ingress.responses.codec import COMPACT_CODEC
from gateway.ingress.responses.decode import _TOOL_LISTS as RESPONSES_TOOL_LISTS
from gateway.ingress.split import parse_shared
from gateway.transcript.seal import Sealer
from tests.ingress.test_tool_lists import (
    choices,
    gemini_tools,
    messages_choices,
    messages_lists,
    responses_choices,
    responses_inputs,
    responses_lists,
    tool_lists,
)

SEALER = Sealer(b"t" * 32)
_DEEP = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
_VALID = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 40, "parameters": _DEEP}}
    for i in range(4)
]
_LIMITS = st.sampled_from(
    [
        ServerConfig(),
        ServerConfig(max_json_depth=8),
        ServerConfig(max_tools=2),
        ServerConfig(max_json_depth=12),
    ]
)


def _dumps(body: dict[str, Any], style: int) -> bytes:
    """The body as different clients write it: the same values, other bytes."""
    if style == 0:
        return orjson.dumps(body)
    if style == 1:
        return json.dumps(body).encode()
    return json.dumps(body, indent=1, ensure_ascii=False).encode()


def _messages(turn: int) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": "You are an agent. " * 20}, {"role": "user", "content": "go"}]
    for i in range(turn):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "tool_0", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "out " * 20})
    return messages


def _outcome(
    raw: bytes, limits: ServerConfig, memo: DecodeMemo | None, codec: Any = CODEC, field: str = "messages"
) -> Any:
    """What the exchange makes of `raw` (gateway/exchange.py `_parse` and the codec's decode), or
    with no memo the body parsed whole and decoded as without one: the Request, and for
    Responses what its answers echo of the request, as they write it."""
    try:
        if memo is None:
            body, items = parse_json_body(raw, limits.max_json_depth), None
            check_parts(body, limits)
        else:
            parsed = parse_shared(raw, field, memo, "scope", limits, None, False, codec.typed_items)
            assert parsed is not None
            body, items = parsed
        inbound = codec.decode(body, {}, SEALER, items, params={"model": "m"})
        if codec is RESPONSES or codec is COMPACT_CODEC:
            return inbound.request, inbound.context, orjson.dumps(inbound.context.shell)
        return inbound.request
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param, exc.code)
    finally:
        if memo is not None:
            memo.settle()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(tool_lists, st.just(_VALID)),
    choices,
    _LIMITS,
    st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_a_body_decodes_the_same_with_its_tools_read_by_their_text(
    tools: Any, choice: Any, limits: ServerConfig, styles: list[int]
) -> None:
    memo = DecodeMemo(1 << 20)
    for turn, style in enumerate(styles):
        body: dict[str, Any] = {"model": "m", "messages": _messages(turn), "tools": tools}
        if choice is not None:
            body["tool_choice"] = choice
        raw = _dumps(body, style)
        assert _outcome(raw, limits, memo) == _outcome(raw, limits, None)


_MESSAGES_TOOLS = [
    {"name": f"tool_{i}", "description": "d" * 40, "input_schema": {"type": "object", "properties": _DEEP}}
    for i in range(4)
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(messages_lists, st.just(_MESSAGES_TOOLS)),
    messages_choices,
    _LIMITS,
    st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_a_messages_body_decodes_the_same_with_its_tools_read_by_their_text(
    tools: Any, choice: Any, limits: ServerConfig, styles: list[int]
) -> None:
    memo = DecodeMemo(1 << 20)
    for turn, style in enumerate(styles):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the tests. " * 30}]
        for i in range(turn):
            messages += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": "go on"}]
        body: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": messages, "tools": tools}
        if choice is not None:
            body["tool_choice"] = choice
        raw = _dumps(body, style)
        assert _outcome(raw, limits, memo, MESSAGES) == _outcome(raw, limits, None, MESSAGES)


_RESPONSES_TOOLS = [
    {"type": "function", "name": f"tool_{i}", "description": "d" * 40, "parameters": _DEEP} for i in range(4)
] + [
    {"type": "namespace", "name": "fs", "tools": [{"type": "custom", "name": "grep"}]},
    {"type": "web_search"},
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(responses_lists, st.just(_RESPONSES_TOOLS)),
    responses_choices,
    responses_inputs,
    _LIMITS,
    # the memo reads a Responses body in parts from its third turn (no typed reading before)
    st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=3, max_size=5),
)
def test_a_responses_body_decodes_and_echoes_the_same_with_its_tools_read_by_their_text(
    tools: Any, choice: Any, items: list[Any], limits: ServerConfig, turns: list[tuple[int, bool]]
) -> None:
    memo = DecodeMemo(1 << 20)
    for turn, (style, compact) in enumerate(turns):
        opening: list[Any] = [{"role": "user", "content": "Fix the tests. " * 30}]
        for i in range(turn):
            opening += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": "go on"}]
        body: dict[str, Any] = {"model": "m", "input": [*opening, *items], "tools": tools}
        if choice is not None:
            body["tool_choice"] = choice
        raw = _dumps(body, style)
        codec = COMPACT_CODEC if compact else RESPONSES
        assert _outcome(raw, limits, memo, codec, "input") == _outcome(raw, limits, None, codec)


_DECLARATIONS = [
    {
        "functionDeclarations": [
            {"name": f"tool_{i}", "description": "d" * 40, "parameters": _DEEP} for i in range(4)
        ]
    }
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(gemini_tools, st.just(_DECLARATIONS)),
    _LIMITS,
    st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_a_gemini_body_decodes_the_same_with_its_tools_read_by_their_text(
    tools: Any, limits: ServerConfig, styles: list[int]
) -> None:
    memo = DecodeMemo(1 << 20)
    for turn, style in enumerate(styles):
        contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Fix the tests. " * 30}]}]
        for i in range(turn):
            contents += [
                {"role": "model", "parts": [{"text": f"step {i}"}]},
                {"role": "user", "parts": [{"text": "go on"}]},
            ]
        raw = _dumps({"contents": contents, "tools": tools}, style)
        assert _outcome(raw, limits, memo, GENERATE, "contents") == _outcome(raw, limits, None, GENERATE)


def test_a_list_seen_before_is_neither_parsed_nor_decoded_again() -> None:
    memo = DecodeMemo(1 << 20)
    tools = [{**t, "function": {**t["function"], "name": t["function"]["name"] + "_seen"}} for t in _VALID]
    raws = [_dumps({"model": "m", "messages": _messages(turn), "tools": tools}, 2) for turn in range(3)]
    read: list[Any] = []
    for raw in raws:
        parsed = parse_shared(raw, "messages", memo, "chat\0", ServerConfig(), None, False, CODEC.typed_items)
        assert parsed is not None
        read.append(parsed[0]["tools"])
        memo.settle()
    assert all(type(r) is KnownList for r in read)
    assert read[0] is read[1] is read[2] and orjson.loads(read[0].text) == tools
    assert raw_parts({"tools": read[0]}) == raw_parts({"tools": tools}) == 4
    assert read[0].value == _TOOL_LISTS.decoded(tools)


def test_a_list_that_does_not_decode_is_parsed_every_time() -> None:
    memo = DecodeMemo(1 << 20)
    tools = [{"type": "function", "function": {"name": "bad name"}}]
    raw = _dumps({"model": "m", "messages": _messages(1), "tools": tools}, 0)
    for _ in range(2):
        parsed = parse_shared(raw, "messages", memo, "chat\0", ServerConfig(), None, False, CODEC.typed_items)
        assert parsed is not None and parsed[0]["tools"] == tools
        memo.settle()
    assert _outcome(raw, ServerConfig(), memo) == _outcome(raw, ServerConfig(), None)
    assert _outcome(raw, ServerConfig(), None)[0] == "error"


def test_a_responses_list_seen_before_stands_unparsed_and_is_echoed_as_sent() -> None:
    memo = DecodeMemo(1 << 20)
    tools = [{**t, "name": t["name"] + "_seen"} if "name" in t else t for t in _RESPONSES_TOOLS]
    opening = [{"role": "user", "content": "Fix the tests. " * 30}]
    raws = [
        _dumps(
            {"model": "m", "input": opening + [{"role": "user", "content": "go"}] * turn, "tools": tools}, 2
        )
        for turn in range(4)
    ]
    read: list[Any] = []
    for raw in raws:
        parsed = parse_shared(
            raw, "input", memo, "responses\0", ServerConfig(), None, False, RESPONSES.typed_items
        )
        assert parsed is not None
        read.append(parsed[0]["tools"])
        inbound = RESPONSES.decode(parsed[0], {}, SEALER, parsed[1])
        assert orjson.dumps(inbound.context.shell["tools"]) == orjson.dumps(tools)
        memo.settle()
    # parsed whole (no typed reading of the items) until the memo admits the conversation, then
    # read in parts
    assert read[0] == tools and type(read[-2]) is KnownList and read[-2] is read[-1]
    assert read[-1].value == RESPONSES_TOOL_LISTS.decoded(tools)
