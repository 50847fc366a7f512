"""Plain Chat messages decoded from the parsed JSON (gateway/ingress/chat/plain.py) decode as
their validated wire models do: the same request, the same ignored-token count, the same error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.chat import decode as chat_decode
from gateway.ingress.chat.decode import DecodeStats, decode_request
from gateway.ingress.chat.plain import plain
from gateway.ingress.errors import ClientError
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"test-secret")

_texts = st.sampled_from(["", "hi", " ", "Step 1: look at a file"])
_odd = st.sampled_from([None, 5, True, [], {}, [{"type": "text", "text": "part"}]])
_ids = st.sampled_from(["call_1", "call_2", "", 7])
_args = st.sampled_from(['{"path": "a.py"}', "", "  ", "{not json", "[1]", 5])
# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_names = st.sampled_from(["tool_01", "read", 3])
_call_types = st.sampled_from(["function", "custom", 1])
_roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "robot", 1])
_contents = st.one_of(_texts, _odd)
_optional = st.one_of(_texts, st.sampled_from([None, 3]))
_unread_keys = st.sampled_from(["name", "cache_control", "thinking_blocks", "audio"])
_not_messages = st.sampled_from(["text", 3, None, []])
# a value of one of these is 0 at one draw in 3, 6, 10, 20 or 30
_one_in_3 = st.integers(0, 2)
_one_in_6 = st.integers(0, 5)
_one_in_10 = st.integers(0, 9)
_one_in_20 = st.integers(0, 19)
_one_in_30 = st.integers(0, 29)


@st.composite
def _call(draw: st.DrawFn) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if draw(st.booleans()):
        function["name"] = draw(_names)
    if draw(st.booleans()):
        function["arguments"] = draw(_args)
    if draw(_one_in_10) == 0:
        function["strict"] = True
    call: dict[str, Any] = {"id": draw(_ids), "function": function}
    if draw(st.booleans()):
        call["type"] = draw(_call_types)
    if draw(_one_in_10) == 0:
        call["extra_content"] = {"google": {"thought_signature": "sig"}}
    if draw(_one_in_20) == 0:
        del call["function"]
    return call


_calls = st.one_of(st.lists(_call(), max_size=3), _odd)


@st.composite
def _message(draw: st.DrawFn) -> Any:
    role = draw(_roles)
    message: dict[str, Any] = {"role": role}
    if draw(_one_in_6) > 0:
        message["content"] = draw(_contents)
    if role == "tool" or draw(_one_in_10) == 0:
        message["tool_call_id"] = draw(_ids)
    if role == "assistant":
        if draw(st.booleans()):
            message["tool_calls"] = draw(_calls)
        for name in ("refusal", "reasoning_content"):
            if draw(_one_in_3) == 0:
                message[name] = draw(_optional)
    if draw(_one_in_10) == 0:
        message[draw(_unread_keys)] = None
    if draw(_one_in_30) == 0:
        return draw(_not_messages)
    return message


def _outcome(body: dict[str, Any]) -> Any:
    stats = DecodeStats()
    try:
        request = decode_request(body, SEALER, stats)
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param, exc.code)
    return request, stats.ignored_tokens


@settings(max_examples=400, deadline=None)
@given(st.lists(_message(), min_size=1, max_size=6))
def test_a_request_decodes_the_same_with_and_without_the_plain_path(messages: list[Any]) -> None:
    body = {"model": "m", "messages": messages}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chat_decode, "plain", lambda raw: False)
        validated = _outcome(body)
    assert _outcome(body) == validated


def test_the_plain_shapes_an_agent_sends_are_recognised_and_others_are_not() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    assert plain({"role": "system", "content": "sys"})
    assert plain({"role": "user", "content": "go"})
    assert plain({"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [call]})
    assert plain({"role": "tool", "tool_call_id": "c1", "content": "out"})
    assert not plain({"role": "user", "content": [{"type": "text", "text": "go"}]})
    assert not plain({"role": "user", "content": "go", "cache_control": {"type": "ephemeral"}})
    assert not plain({"role": "assistant", "tool_calls": [{**call, "extra_content": {}}]})
    assert not plain({"role": "tool", "tool_call_id": "", "content": "out"})
