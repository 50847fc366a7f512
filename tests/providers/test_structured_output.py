"""Structured output per provider kind: how each encoder asks for it, and how the decoders hand
the answer back (an Anthropic forced tool's input as text, refusals as refusal blocks)."""

from __future__ import annotations

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.providers.anthropic.schema import anthropic_output_schema
from gateway.providers.base import EncodeError
from gateway.providers.structured import output_tool_name
from gateway.transcript.assembler import fold
from gateway.transcript.events import BlockKind, BlockStart
from gateway.transcript.model import (
    Message,
    Request,
    ResponseFormat,
    Role,
    StopReason,
    Text,
    ToolChoice,
    ToolChoiceMode,
    ToolSpec,
    replace,
)
from gateway.transcript.target import OutputMode, Target

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 2}, "n": {"type": "integer", "minimum": 1}},
    "required": ["city", "n"],
}
FMT = ResponseFormat("json_schema", "Weather", SCHEMA, True, "The weather")
ASK = Request("g", (Message(Role.USER, (Text("Weather in Paris, as JSON?"),)),), response_format=FMT)


def target(kind: str, model: str) -> Target:
    return Target(kind, kind, model, "http://x")


def body(kind: str, model: str, request: Request = ASK) -> dict:
    return orjson.loads(get_adapter(kind).encode_request(request, target(kind, model), "k").body)


@pytest.mark.parametrize(
    "kind,model,mode",
    [
        ("anthropic", "claude-sonnet-4-5", OutputMode.SCHEMA),
        ("anthropic", "claude-opus-4-6-20260101", OutputMode.SCHEMA),
        ("anthropic", "claude-haiku-4-5-20251001", OutputMode.SCHEMA),
        ("anthropic", "claude-sonnet-4-20250514", OutputMode.FORCED_TOOL),
        ("anthropic", "claude-opus-4-1", OutputMode.FORCED_TOOL),
        ("anthropic", "claude-3-5-haiku-latest", OutputMode.FORCED_TOOL),
        ("kimi", "kimi-k2.5", OutputMode.SCHEMA),
        ("kimi", "kimi-k2-thinking", OutputMode.JSON_OBJECT),
        ("deepseek", "deepseek-chat", OutputMode.JSON_OBJECT),
        ("openai_chat", "gpt-4.1", OutputMode.SCHEMA),
        ("mistral", "mistral-large-latest", OutputMode.SCHEMA),
        ("gemini", "gemini-2.5-flash", OutputMode.SCHEMA),
    ],
)
def test_each_provider_declares_how_it_answers_a_schema(kind, model, mode):
    assert get_adapter(kind).capabilities.structured_output.mode(model, True) is mode


def test_openai_style_providers_get_the_schema_natively():
    for kind, model in (
        ("openai_chat", "gpt-4.1"),
        ("mistral", "mistral-large-latest"),
        ("kimi", "kimi-k2.5"),
    ):
        fmt = body(kind, model)["response_format"]
        assert fmt == {
            "type": "json_schema",
            "json_schema": {
                "name": "Weather",
                "description": "The weather",
                "schema": SCHEMA,
                "strict": True,
            },
        }
    assert body("openai_responses", "gpt-5.1")["text"]["format"] == {
        "type": "json_schema",
        "name": "Weather",
        "schema": SCHEMA,
        "description": "The weather",
        "strict": True,
    }
    config = body("gemini", "gemini-3-pro-preview")["generationConfig"]
    assert config["responseMimeType"] == "application/json" and config["responseJsonSchema"] == SCHEMA


@pytest.mark.parametrize("kind,model", [("deepseek", "deepseek-chat"), ("kimi", "kimi-k2-thinking")])
def test_json_mode_providers_get_the_schema_in_the_instructions(kind, model):
    sent = body(kind, model, replace(ASK, system=(Text("Be brief."),)))
    assert sent["response_format"] == {"type": "json_object"}
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
    assert orjson.dumps(SCHEMA).decode() in system["content"] and "JSON" in system["content"]
    json_object = body(kind, model, replace(ASK, response_format=ResponseFormat("json_object")))
    assert json_object["response_format"] == {"type": "json_object"}
    assert json_object["messages"][0]["role"] == "user"  # no schema: nothing added


def test_anthropic_native_output_gets_the_schema_cut_to_what_it_enforces():
    sent = body("anthropic", "claude-sonnet-4-5")
    schema = sent["output_config"]["format"]["schema"]
    assert sent["output_config"]["format"]["type"] == "json_schema" and "tools" not in sent
    assert schema["additionalProperties"] is False
    assert schema["properties"]["city"] == {"type": "string", "description": "{minLength: 2}"}
    assert schema["properties"]["n"] == {"type": "integer", "description": "{minimum: 1}"}


def test_the_anthropic_schema_transform_closes_nested_objects_and_keeps_refs():
    schema = {
        "$defs": {
            "Place": {"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": True}
        },
        "type": "object",
        "properties": {
            "place": {"$ref": "#/$defs/Place"},
            "tags": {
                "type": "array",
                "items": {"type": "string", "format": "email"},
                "minItems": 1,
                "maxItems": 3,
            },
            "kind": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        },
    }
    out = anthropic_output_schema(schema)
    assert out["$defs"]["Place"]["additionalProperties"] is False
    assert out["properties"]["place"] == {"$ref": "#/$defs/Place"}
    assert out["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string", "format": "email"},
        "minItems": 1,
        "description": "{maxItems: 3}",
    }
    assert out["properties"]["kind"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    with pytest.raises(EncodeError):
        anthropic_output_schema([])  # type: ignore[arg-type]


def test_older_claude_models_answer_through_a_forced_tool_after_the_clients_tools():
    sent = body("anthropic", "claude-opus-4-1")
    assert sent["tools"] == [{"name": "Weather", "description": "The weather", "input_schema": SCHEMA}]
    assert sent["tool_choice"] == {"type": "tool", "name": "Weather"}
    tools = (ToolSpec("lookup"), ToolSpec("Weather"))
    with_tools = body("anthropic", "claude-opus-4-1", replace(ASK, tools=tools))
    # the client's tools stay callable and first; the answer tool's name does not collide
    assert [t["name"] for t in with_tools["tools"]] == ["lookup", "Weather", "Weather_2"]
    assert with_tools["tool_choice"] == {"type": "any"}
    none = body(
        "anthropic", "claude-opus-4-1", replace(ASK, tools=tools, tool_choice=ToolChoice(ToolChoiceMode.NONE))
    )
    assert none["tool_choice"] == {"type": "tool", "name": "Weather_2"}
    # the client forcing a tool of its own: this turn's answer is that call
    forced = body(
        "anthropic",
        "claude-opus-4-1",
        replace(ASK, tools=tools, tool_choice=ToolChoice(ToolChoiceMode.TOOL, "lookup")),
    )
    assert forced["tool_choice"] == {"type": "tool", "name": "lookup"} and len(forced["tools"]) == 2
    assert output_tool_name(replace(ASK, tools=tools)) == "Weather_2"


def sse(*events: dict) -> bytes:
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)


ANSWER_STREAM = sse(
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "claude-opus-4-1", "usage": {"input_tokens": 5}},
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": 'ris", "n": 2}'},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
)


def test_the_forced_tools_input_comes_back_as_text_that_ends_the_turn():
    adapter = get_adapter("anthropic")
    decoder = adapter.stream_decoder(target("anthropic", "claude-opus-4-1"), ASK)
    events = decoder.feed(ANSWER_STREAM) + decoder.finish()
    assert [e.kind for e in events if type(e) is BlockStart] == [BlockKind.TEXT]
    turn = fold(events)
    assert turn.blocks == [Text('{"city": "Paris", "n": 2}')] and turn.stop_reason is StopReason.END_TURN
    whole = {
        "type": "message",
        "id": "msg_1",
        "model": "claude-opus-4-1",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Weather", "input": {"city": "Paris", "n": 2}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 9},
    }
    folded = fold(adapter.decode_response(orjson.dumps(whole), target("anthropic", "claude-opus-4-1"), ASK))
    assert orjson.loads(folded.blocks[0].text) == {"city": "Paris", "n": 2}
    # without the structured request it is an ordinary tool call
    plain = adapter.stream_decoder(target("anthropic", "claude-opus-4-1"), replace(ASK, response_format=None))
    assert fold(plain.feed(ANSWER_STREAM) + plain.finish()).stop_reason is StopReason.TOOL_CALLS


def test_an_openai_refusal_is_a_refusal_block_and_a_refusal_stop():
    adapter = get_adapter("openai_chat")
    chunks = [
        {
            "id": "c",
            "model": "gpt-4.1",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {"id": "c", "choices": [{"index": 0, "delta": {"refusal": "I can't "}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"refusal": "help."}, "finish_reason": "stop"}]},
    ]
    raw = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    decoder = adapter.stream_decoder(target("openai_chat", "gpt-4.1"), ASK)
    turn = fold(decoder.feed(raw) + decoder.finish())
    assert turn.blocks == [Text("I can't help.", refusal=True)] and turn.stop_reason is StopReason.REFUSAL


def test_gemini_before_3_cannot_combine_tools_with_json_output():
    request = replace(ASK, tools=(ToolSpec("lookup"),))
    with pytest.raises(EncodeError, match="cannot combine function calling"):
        body("gemini", "gemini-2.5-flash", request)
    assert body("gemini", "gemini-3-pro-preview", request)["generationConfig"]["responseMimeType"]
