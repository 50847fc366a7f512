"""Prompt caches key on the bytes of a request's prefix. For every provider kind: the encoded
request of a conversation's turn N extends the request of its turn N-1 byte for byte - the same
system, tools and options, and each earlier wire message serialized exactly as before - whenever
repair did not change something differently between the two turns."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import (
    CacheControl,
    Message,
    Request,
    ResponseFormat,
    Role,
    Text,
    ToolSpec,
    replace,
)
from gateway.transcript.target import Target
from tests.property.transcripts import KINDS, MODELS, MORE_MODELS, state_for, target_for, valid_requests

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# the key of each wire format's conversation array
CONVERSATION = {"anthropic": "messages", "openai_responses": "input", "gemini": "contents"}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
FORMATS = (None, ResponseFormat("json_schema", "Weather", SCHEMA, True), ResponseFormat("json_object"))
SYSTEM = (
    Text("You are a weather assistant. " * 20, cache=CacheControl()),
    Text("Answer in JSON when asked."),
)


def encoded(request: Request, kind: str, target: Target) -> tuple[dict[str, Any], list[bytes], Counter]:
    """(the body without its conversation, each conversation item's bytes, repairs); the body
    also passes the provider's strict simulator (structured output and breakpoints included)."""
    prepared = prepare(request, target, get_adapter(kind).capabilities)
    body = orjson.loads(get_adapter(kind).encode_request(prepared.request, target, "key").body)
    rejection = VALIDATORS[kind](state_for(kind), body, target.model)
    assert rejection is None, f"{rejection.message}\nbody: {body}"
    # chat family: the opening system message is the conversation's first element
    conversation = body.pop(CONVERSATION.get(kind, "messages"))
    repairs = Counter(r.kind for r in prepared.repairs if r.kind != "tool_id_projected")
    return body, [orjson.dumps(item) for item in conversation], repairs


def request_points(messages) -> list[int]:
    """Where a client could have sent a request: after the user side of a turn (its question, or
    all the results of a tool step), right before the assistant answered."""
    return [
        n + 1
        for n, m in enumerate(messages)
        if m.role in (Role.USER, Role.TOOL)
        and (n + 1 == len(messages) or messages[n + 1].role is Role.ASSISTANT)
    ]


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_turn_n_extends_turn_n_minus_1_byte_for_byte(kind, data):
    caps = get_adapter(kind).capabilities
    thinking = data.draw(st.booleans(), label="thinking")
    model = data.draw(st.sampled_from([MODELS[kind], *MORE_MODELS.get(kind, ())]), label="model")
    target = target_for(kind, thinking, "drop", model)
    needs_reasoning = caps.reasoning_content_on_tool_turns or (
        caps.signed_thinking_for_tool_loop and thinking
    )
    conversation = data.draw(
        valid_requests(target, needs_reasoning, caps.reasoning_replay), label="conversation"
    )
    points = request_points(conversation.messages)
    assume(len(points) >= 2)
    earlier, later = sorted(data.draw(st.lists(st.sampled_from(points), min_size=2, max_size=2, unique=True)))
    fmt = data.draw(st.sampled_from(FORMATS), label="response_format")
    last = len(conversation.tools) - 1
    tools = tuple(
        replace(t, cache=CacheControl()) if n == last else t for n, t in enumerate(conversation.tools)
    )
    base = replace(conversation, system=SYSTEM, tools=tools, response_format=fmt)
    if fmt is not None and kind == "gemini" and "gemini-3" not in model:
        base = replace(base, tools=())  # Gemini 2.5 takes no tools with a JSON response
    before = replace(base, messages=conversation.messages[:earlier])
    after = replace(base, messages=conversation.messages[:later])

    body_before, wire_before, repairs_before = encoded(before, kind, target)
    body_after, wire_after, repairs_after = encoded(after, kind, target)
    assume(repairs_before == repairs_after)  # a turn repaired differently may differ

    assert orjson.dumps(body_after) == orjson.dumps(body_before), "system, tools or options changed"
    assert len(wire_after) > len(wire_before)
    assert wire_after[: len(wire_before)] == wire_before, "an earlier message was re-serialized"


def test_the_schema_instructions_of_json_mode_are_the_same_every_turn():
    # DeepSeek answers JSON-schema requests in JSON mode with the schema in the system message:
    # that text is part of the cached prefix, so it must not vary between turns
    target = target_for("deepseek")
    fmt = ResponseFormat("json_schema", "Weather", SCHEMA, True)
    one = replace(valid_request(), response_format=fmt)
    body, _, _ = encoded(one, "deepseek", target)
    again, _, _ = encoded(one, "deepseek", target)
    assert body == again and body["response_format"] == {"type": "json_object"}


def valid_request() -> Request:
    return Request(
        "group",
        (Message(Role.USER, (Text("Weather in Paris?"),)),),
        system=SYSTEM,
        tools=(ToolSpec("get_weather"),),
    )
