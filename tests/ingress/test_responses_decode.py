"""Decoding Responses requests: items into canonical messages, tools, options, sessions, and the
400s with the JSON path of the problem."""

from __future__ import annotations

import pytest

from gateway.ingress.errors import ClientError
from gateway.ingress.responses.codec import CODEC, COMPACT_CODEC
from gateway.ingress.responses.decode import COMPACTION_PROMPT
from gateway.transcript.model import (
    Document,
    HostedTool,
    Image,
    Message,
    Reasoning,
    ResponseFormat,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolKind,
    ToolResult,
)
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"s" * 32)
FUNCTION = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}, "strict": False}


def decode(body: dict, headers: dict | None = None):
    return CODEC.decode({"model": "smart", **body}, headers or {}, SEALER)


def error(body: dict) -> ClientError:
    with pytest.raises(ClientError) as caught:
        decode(body)
    assert caught.value.status == 400
    return caught.value


def test_a_string_input_is_one_user_message():
    inbound = decode({"input": "hi", "instructions": "Be brief."})
    assert inbound.request.messages == (Message(Role.USER, (Text("hi"),)),)
    assert inbound.request.system == (Text("Be brief."),)
    assert inbound.keep and inbound.history is None


def test_items_group_into_turns_the_way_the_api_reads_them():
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Base prompt."}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Go."},
                {"type": "input_image", "image_url": "https://x/a.png", "detail": "low"},
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "exec_command",
            "arguments": '{"cmd": "ls"}',
        },
        {"type": "custom_tool_call", "call_id": "call_b", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "function_call_output", "call_id": "call_a", "output": "a.txt"},
        {
            "type": "custom_tool_call_output",
            "call_id": "call_b",
            "output": [{"type": "input_text", "text": "Done"}],
        },
        {"role": "system", "content": "Mind the budget."},
        {"role": "user", "content": [{"type": "input_file", "file_data": "JVBERi0=", "filename": "a.pdf"}]},
    ]
    request = decode({"input": items}).request
    assert request.system == (Text("Base prompt."),)
    assert request.messages == (
        Message(Role.USER, (Text("Go."), Image("https://x/a.png", "low"))),
        Message(
            Role.ASSISTANT,
            (
                Reasoning("Plan."),
                Text("Running."),
                ToolCall("call_a", "exec_command", '{"cmd": "ls"}'),
                ToolCall("call_b", "apply_patch", "*** Begin Patch", custom=True),
            ),
        ),
        Message(Role.TOOL, (ToolResult("call_a", "a.txt"), ToolResult("call_b", "Done"))),
        Message(Role.SYSTEM, (Text("Mind the budget."),)),
        Message(Role.USER, (Document("data:application/pdf;base64,JVBERi0=", "application/pdf", "a.pdf"),)),
    )


def test_tools_function_custom_namespace_and_hosted():
    tools = [
        FUNCTION,
        {
            "type": "custom",
            "name": "apply_patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": "x"},
        },
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "Sub-agents.",
            "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}],
        },
        {"type": "web_search", "external_web_access": True},
    ]
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "spawn_agent",
        "namespace": "multi_agent_v1",
        "arguments": "{}",
    }
    request = decode(
        {
            "input": [call],
            "tools": tools,
            "tool_choice": {"type": "function", "name": "spawn_agent", "namespace": "multi_agent_v1"},
        }
    ).request
    assert [(t.name, t.kind, t.strict) for t in request.tools] == [
        ("exec_command", ToolKind.FUNCTION, False),
        ("apply_patch", ToolKind.CUSTOM, None),
        ("multi_agent_v1__spawn_agent", ToolKind.FUNCTION, None),
    ]
    assert request.tools[1].format == tools[1]["format"]
    assert request.hosted_tools == (HostedTool("openai_responses", "web_search", tools[3]),)
    assert request.messages[0].blocks[0].name == "multi_agent_v1__spawn_agent"
    assert request.tool_choice == ToolChoice(ToolChoiceMode.TOOL, "multi_agent_v1__spawn_agent")


def test_a_flat_name_never_collides_with_a_tool_of_the_same_name():
    tools = [
        {"type": "function", "name": "ns__run"},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "run"}]},
    ]
    assert [t.name for t in decode({"input": "hi", "tools": tools}).request.tools] == ["ns__run", "ns__run_2"]


def test_options():
    request = decode(
        {
            "input": "hi",
            "reasoning": {"effort": "high", "summary": "detailed"},
            "max_output_tokens": 500,
            "temperature": 0.5,
            "top_p": 0.9,
            "parallel_tool_calls": False,
            "prompt_cache_key": "k1",
            "stream": True,
            "text": {
                "format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}
            },
        }
    ).request
    assert (request.reasoning_effort, request.reasoning_summary) == ("high", "detailed")
    assert (request.max_tokens, request.temperature, request.top_p) == (500, 0.5, 0.9)
    assert request.parallel_tool_calls is False and request.stream and request.cache_key == "k1"
    assert request.response_format == ResponseFormat("json_schema", "out", {"type": "object"}, True)


def test_sessions_and_stored_answers():
    assert decode({"input": "hi"}, {"session-id": "01a2-b3"}).session_hint.value == "01a2-b3"
    assert decode({"input": "hi", "prompt_cache_key": "abc"}).session_hint.source == "prompt_cache_key"
    odd = decode({"input": "hi", "prompt_cache_key": "has spaces/and slashes"}).session_hint.value
    assert odd.startswith("pck_")
    inbound = decode({"input": "more", "previous_response_id": "resp_1", "store": False})
    assert inbound.history.id == "resp_1" and inbound.history.not_found_code == "previous_response_not_found"
    assert not inbound.keep


@pytest.mark.parametrize(
    "body,param",
    [
        ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0].role"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{nope"}]},
            "input[0].arguments",
        ),
        ({"input": [{"type": "code_interpreter_call", "id": "ci_1"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]},
            "input[0].content[0].file_id",
        ),
        ({"input": "hi", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
        ({"input": "hi", "tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice.type"),
        ({"input": "hi", "reasoning": {"effort": "maximal"}}, "reasoning.effort"),
        ({"input": "hi", "temperature": 3}, "temperature"),
        ({"input": "hi", "background": True}, "background"),
        ({}, "input"),
    ],
)
def test_refusals_name_the_field(body, param):
    assert error(body).param == param


def test_an_item_reference_to_an_earlier_item_repeats_it():
    user = {"type": "message", "id": "msg_1", "role": "user", "content": "Again?"}
    request = decode({"input": [user, {"type": "item_reference", "id": "msg_1"}]}).request
    assert [m.text() for m in request.messages] == ["Again?", "Again?"]


def test_item_references_to_kept_items_become_places_in_their_assistant_turn():
    call = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "done"}
    inbound = decode(
        {
            "input": [
                {"role": "user", "content": "Go"},
                {"type": "item_reference", "id": "rs_a_0"},
                {"type": "item_reference", "id": "msg_a_1"},
                call,
                output,
                {"type": "item_reference", "id": "msg_b_0"},
            ],
            "tools": [FUNCTION],
        }
    )
    messages = inbound.request.messages
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert messages[1].blocks == (ToolCall("call_1", "exec_command", "{}"),)
    assert messages[3].blocks == ()  # filled by the exchange
    assert [(r.id, r.param, r.message, r.block) for r in inbound.references] == [
        ("rs_a_0", "input[1].id", 1, 0),
        ("msg_a_1", "input[2].id", 1, 0),
        ("msg_b_0", "input[5].id", 3, 0),
    ]


def test_compaction_requests_end_with_the_summary_prompt_and_offer_no_tools():
    for inbound in (
        decode({"input": ["hi", {"type": "compaction_trigger"}][1:], "tools": [FUNCTION]}),
        COMPACT_CODEC.decode({"model": "smart", "input": "hi", "stream": True}, {}, SEALER),
    ):
        request = inbound.request
        assert request.messages[-1] == Message(Role.USER, (Text(COMPACTION_PROMPT),))
        assert request.tools == () and not inbound.keep
        assert inbound.context.compaction
    assert not COMPACT_CODEC.decode(
        {"model": "smart", "input": "hi", "stream": True}, {}, SEALER
    ).request.stream


@pytest.mark.parametrize(
    "body,expected",
    [
        ({"model": None, "input": "hi"}, ("model: is required", "model", "missing_required_parameter")),
        ({"model": "", "input": "hi"}, ("model: must not be empty", "model", "invalid_value")),
        ({"model": 3, "input": "hi"}, ("model: expected a string, got number", "model", "invalid_type")),
        (
            {"input": "hi", "tools": [{"type": "function"}]},
            ("tools[0].name: is required", "tools[0].name", "missing_required_parameter"),
        ),
        (
            {"input": "hi", "tools": [{"type": "function", "name": ""}]},
            ("tools[0].name: must not be empty", "tools[0].name", "invalid_value"),
        ),
        (
            {"input": "hi", "tools": [{"type": 7}]},
            ("tools[0].type: expected a string, got number", "tools[0].type", "invalid_type"),
        ),
    ],
)
def test_a_string_field_refused_says_why_at_its_path(body, expected):
    refused = error(body)
    assert (refused.message, refused.param, refused.code) == expected
