"""The Gemini API request decoder: contents to canonical messages, tool ids and their pairing,
thought signatures, tools, generation config, and errors naming the JSON path."""

from __future__ import annotations

import base64

import pytest

from gateway.ingress.errors import ClientError
from gateway.ingress.gemini.codec import GeminiCodec
from gateway.ingress.gemini.decode import Decoded, decode_request
from gateway.transcript.model import (
    ANY_ISSUER,
    Continuity,
    Document,
    Image,
    Reasoning,
    ResponseFormat,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
)
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"k" * 32)


def decode(body: dict, model: str = "m", stream: bool = False):
    out = Decoded()
    return decode_request(body, model, stream, SEALER, out), out


def user(*parts: dict) -> dict:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict) -> dict:
    return {"role": "model", "parts": list(parts)}


def call(name: str, args: dict, id: str | None = None, **extra) -> dict:
    body = {"name": name, "args": args}
    if id is not None:
        body["id"] = id
    return {"functionCall": body, **extra}


def response(name: str, output: str, id: str | None = None) -> dict:
    body = {"name": name, "response": {"output": output}}
    if id is not None:
        body["id"] = id
    return {"functionResponse": body}


def test_contents_system_and_parts():
    request, _ = decode(
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                user({"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": "AAA="}}),
                model({"text": "I see "}, {"text": "a dot."}),
                user({"fileData": {"mimeType": "application/pdf", "fileUri": "https://x/doc.pdf"}}),
            ],
        },
        model="gemini-2.5-pro",
        stream=True,
    )
    assert request.model == "gemini-2.5-pro" and request.stream
    assert request.system == (Text("Be brief."),)
    first, answer, last = request.messages
    assert first.blocks == (Text("look"), Image("data:image/png;base64,AAA="))
    assert answer.role is Role.ASSISTANT and answer.blocks == (Text("I see a dot."),), "one text run"
    assert last.blocks == (Document("https://x/doc.pdf", media_type="application/pdf"),)


def test_gemini_clis_prefixed_ids_and_its_repeated_responses():
    request, _ = decode(
        {
            "contents": [
                user({"text": "go"}),
                model(call("run_shell_command", {"command": "ls"}, "run_shell_command__call_1")),
                user(response("run_shell_command", "a b", "run_shell_command__call_1")),
                user(response("run_shell_command", "a b", "run_shell_command__call_1")),
            ]
        }
    )
    calls = request.messages[1].blocks
    assert calls == (ToolCall("call_1", "run_shell_command", '{"command":"ls"}'),)
    results = [b for m in request.messages if m.role is Role.TOOL for b in m.blocks]
    assert results == [ToolResult("call_1", "a b")] * 2, "both answer the one call: pairing keeps one"


def test_calls_without_ids_pair_by_name_in_order():
    request, _ = decode(
        {
            "contents": [
                user({"text": "go"}),
                model(call("f", {"x": 1}), call("f", {"x": 2}), call("g", {})),
                user(response("g", "G"), response("f", "F1"), response("f", "F2")),
            ]
        }
    )
    ids = [b.id for b in request.messages[1].blocks]
    assert len(set(ids)) == 3
    results = {b.content: b.call_id for b in request.messages[2].blocks}
    assert results == {"G": ids[2], "F1": ids[0], "F2": ids[1]}


def test_thought_signatures():
    sealed_meta = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": "s"})
    sealed = base64.b64encode(SEALER.seal(sealed_meta).encode()).decode()
    request, out = decode(
        {
            "contents": [
                user({"text": "go"}),
                model(
                    {"text": "thinking", "thought": True, "thoughtSignature": sealed},
                    call("f", {}, "c1", thoughtSignature="skip_thought_signature_validator"),
                    call("f", {}, "c2", thoughtSignature="R2VtaW5pT3du"),
                    {"text": "", "thoughtSignature": base64.b64encode(b"gw1.forged").decode()},
                ),
            ]
        }
    )
    reasoning, dummy, native, forged = request.messages[1].blocks
    assert reasoning == Reasoning("thinking", sealed_meta)
    assert dummy.meta is None, "Gemini CLI's dummy is no signature"
    assert native.meta is not None and native.meta.kind == "gemini" and native.meta.scope == ANY_ISSUER
    assert native.meta.data == {"thought_signature": "R2VtaW5pT3du"}
    assert forged == Text("") and out.ignored_tokens == 1


def test_tools_schemas_tool_config_and_built_in_tools():
    request, _ = decode(
        {
            "contents": [user({"text": "go"})],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "a",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {"x": {"type": "STRING", "nullable": True}},
                                "propertyOrdering": ["x"],
                            },
                        },
                        {"name": "b", "parametersJsonSchema": {"type": "object", "properties": {}}},
                        {"name": "c"},
                    ]
                },
                {"googleSearch": {}},
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["b"]}},
        }
    )
    a, b, c = request.tools
    assert a.parameters == {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}
    assert b.parameters == {"type": "object", "properties": {}}
    assert c.parameters == {"type": "object", "properties": {}}
    assert [(h.kind, h.type, h.required) for h in request.hosted_tools] == [("gemini", "googleSearch", True)]
    assert request.tool_choice == ToolChoice(ToolChoiceMode.TOOL, "b")


@pytest.mark.parametrize(
    "thinking,expected,shown",
    [
        (None, (None, None, None), False),
        ({"thinkingBudget": 0}, (False, None, None), False),
        ({"thinkingBudget": 2048, "includeThoughts": True}, (True, 2048, None), True),
        ({"thinkingBudget": -1, "includeThoughts": True}, (True, None, None), True),
        ({"thinkingLevel": "LOW"}, (None, None, "low"), False),
    ],
)
def test_thinking_config(thinking, expected, shown):
    config = {"thinkingConfig": thinking} if thinking is not None else {}
    request, out = decode({"contents": [user({"text": "x"})], "generationConfig": config})
    assert (request.thinking, request.thinking_budget, request.reasoning_effort) == expected
    assert out.include_thoughts is shown


def test_generation_config_and_structured_output():
    request, _ = decode(
        {
            "contents": [user({"text": "x"})],
            "generationConfig": {
                "temperature": 0.5,
                "topP": 0.9,
                "topK": 40,
                "maxOutputTokens": 100,
                "stopSequences": ["END"],
                "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}},
            },
        }
    )
    assert (request.temperature, request.top_p, request.top_k, request.max_tokens) == (0.5, 0.9, 40, 100)
    assert request.stop == ("END",)
    assert request.response_format == ResponseFormat(
        "json_schema", schema={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    plain, _ = decode(
        {"contents": [user({"text": "x"})], "generationConfig": {"responseMimeType": "application/json"}}
    )
    assert plain.response_format == ResponseFormat("json_object")


@pytest.mark.parametrize(
    "body,path",
    [
        ([], None),
        ({"contents": []}, "contents"),
        ({"contents": [{"role": "tool", "parts": [{"text": "x"}]}]}, "contents[0].role"),
        ({"contents": [user({"text": 5})]}, "contents[0].parts[0].text"),
        ({"contents": [user(call("f", {}))]}, "contents[0].parts[0]"),
        ({"contents": [user({"executableCode": {}})]}, "contents[0].parts[0].executableCode"),
        ({"contents": [user({"text": "x"})], "tools": [{"frobnicate": {}}]}, "tools[0].frobnicate"),
        (
            {"contents": [user({"text": "x"})], "generationConfig": {"candidateCount": 2}},
            "generationConfig.candidateCount",
        ),
        (
            {"contents": [user({"text": "x"})], "generationConfig": {"maxOutputTokens": "9"}},
            "generationConfig.maxOutputTokens",
        ),
        ({"contents": [user({"text": "x"})], "cachedContent": "cachedContents/1"}, "cachedContent"),
    ],
)
def test_errors_name_the_json_path(body, path):
    with pytest.raises(ClientError) as exc:
        decode(body)
    assert exc.value.status == 400
    assert exc.value.param == path


def test_snake_case_field_names_like_googles_parser():
    request, out = decode(
        {
            "system_instruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                user({"text": "go"}),
                model({"function_call": {"name": "f", "args": {"some_arg": 1}, "id": "c1"}}),
                user({"function_response": {"name": "f", "id": "c1", "response": {"the_output": "x"}}}),
            ],
            "tools": [{"function_declarations": [{"name": "f"}]}, {"google_search": {}}],
            "generation_config": {
                "max_output_tokens": 9,
                "thinking_config": {"include_thoughts": True, "thinking_budget": 100},
            },
        }
    )
    assert request.system == (Text("Be brief."),) and request.max_tokens == 9
    assert request.messages[1].blocks == (ToolCall("c1", "f", '{"some_arg":1}'),), "arguments kept as sent"
    assert request.messages[2].blocks == (ToolResult("c1", '{"the_output":"x"}'),)
    assert [t.name for t in request.tools] == ["f"] and request.hosted_tools[0].type == "googleSearch"
    assert request.thinking_budget == 100 and out.include_thoughts


def test_the_model_from_the_path_and_the_framing_from_the_query():
    inbound = GeminiCodec(stream=True).decode(
        {"contents": [user({"text": "x"})]},
        {},
        SEALER,
        params={"model": "models/gemini-2.5-pro"},
        query={"alt": "sse"},
    )
    assert inbound.request.model == "gemini-2.5-pro" and inbound.request.stream and inbound.context.sse
