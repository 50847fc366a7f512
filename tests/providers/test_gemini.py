"""Gemini: recorded streams/bodies decoded and folded (signatures kept on the part they came on),
requests encoded (roles, parts, signature placement, functionResponse, schemas, key in header),
errors classified (RetryInfo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.providers.base import EncodeError
from gateway.providers.gemini import adapter as gemini
from gateway.providers.gemini.request import gemini_schema
from gateway.transcript.assembler import fold
from gateway.transcript.events import ErrorCategory, Event, Finish, MessageStart, StreamError, UsageUpdate
from gateway.transcript.model import (
    Continuity,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    StopReason,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
    ToolSpec,
    Usage,
)
from gateway.transcript.target import Target
from tests.conftest import fixture_path

ADAPTER = gemini.ADAPTER
PLACEHOLDER = "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="


def target(model: str = "gemini-3-pro-preview", **kw: Any) -> Target:
    return Target(
        provider="gem", kind="gemini", model=model, base_url="https://generativelanguage.googleapis.com", **kw
    )


def chunk_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sse(lines: list[str]) -> bytes:
    return "".join(f"data: {line}\n\n" for line in lines).encode()


def decode(body: bytes, size: int | None = None, tgt: Target | None = None) -> list[Event]:
    decoder = ADAPTER.stream_decoder(tgt or target())
    events: list[Event] = []
    if size is None:
        events += decoder.feed(body)
    else:
        for start in range(0, len(body), size):
            events += decoder.feed(body[start : start + size])
    return events + decoder.finish()


def decode_both(body: bytes, tgt: Target | None = None) -> list[Event]:
    whole = decode(body, tgt=tgt)
    assert decode(body, 7, tgt) == whole
    return whole


def signatures(lines: list[str]) -> list[str]:
    """Every thoughtSignature in a recording, in order (the expectations come from the data)."""
    found = []
    for line in lines:
        for candidate in orjson.loads(line).get("candidates") or ():
            for part in candidate.get("content", {}).get("parts") or ():
                if "thoughtSignature" in part:
                    found.append(part["thoughtSignature"])
    return found


# --------------------------------------------------------------------------------------------
# recorded streams


def test_tool_call_signature_is_on_the_function_call() -> None:
    lines = chunk_lines(fixture_path("google", "google-tool-call-gemini3.chunks.txt"))
    tgt = target()
    events = decode_both(sse(lines), tgt)
    assert events[0] == MessageStart("QHiLaa6LBrb8vdIPoNztsAg", "gemini-3-pro-preview")
    assert [type(e) for e in events[-2:]] == [UsageUpdate, Finish]
    turn = fold(events)
    (sig,) = signatures(lines)
    assert len(sig) > 1000
    assert [type(b) for b in turn.blocks] == [ToolCall]  # the trailing unsigned "" text makes no block
    call = turn.blocks[0]
    assert (call.id, call.name, orjson.loads(call.arguments)) == (
        "",
        "weather",
        {"location": "San Francisco"},
    )
    assert tgt.owns(call.meta) and call.meta.data == {"thought_signature": sig}
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=29, output_tokens=15 + 804, reasoning_tokens=804)


def test_text_answer_keeps_trailing_empty_signed_part() -> None:
    lines = chunk_lines(fixture_path("google", "google-reasoning-gemini3.chunks.txt"))
    turn = fold(decode_both(sse(lines)))
    (sig,) = signatures(lines)
    assert turn.blocks == [
        Text('There are **3** "r"s in strawberry.\n\nSt**r**awbe**rr**y'),
        Text("", target().continuity({"thought_signature": sig})),
    ]
    assert turn.stop_reason is StopReason.END_TURN
    assert turn.usage == Usage(input_tokens=9, output_tokens=23 + 302, reasoning_tokens=302)
    assert turn.response_id == "M3iLaY-AI7zTxN8P3Piw4Qg"


def test_issue_18073_empty_text_signature_is_its_own_block() -> None:
    lines = chunk_lines(fixture_path("google", "issue-18073-empty-text-thought-signature.chunks.txt"))
    tgt = target("gemini-3-flash-preview")
    turn = fold(decode_both(sse(lines), tgt))
    (sig,) = signatures(lines)
    assert turn.blocks == [Text("4"), Text("", tgt.continuity({"thought_signature": sig}))]
    assert turn.usage == Usage(input_tokens=15, output_tokens=1 + 52, reasoning_tokens=52)
    assert turn.stop_reason is StopReason.END_TURN


def test_vertex_partial_args_stream() -> None:
    lines = chunk_lines(fixture_path("google", "google-stream-no-args-tool-call.chunks.txt"))
    tgt = target("gemini-3-flash-preview")
    turn = fold(decode_both(sse(lines), tgt))
    (sig,) = signatures(lines)
    assert [type(b) for b in turn.blocks] == [Reasoning, ToolCall, ToolCall, ToolCall, ToolCall]
    thought = turn.blocks[0]
    assert thought.text.startswith("**Processing User Requests**\n\nI've started by understanding")
    assert tgt.owns(thought.meta) and thought.meta.data == {}
    calls = turn.blocks[1:]
    assert [(c.name, orjson.loads(c.arguments)) for c in calls] == [
        ("read_theme", {}),
        ("read_screen", {"id": "A"}),
        ("read_screen", {"id": "B"}),
        ("read_screen", {"id": "C"}),
    ]
    assert calls[0].meta.data == {"thought_signature": sig}
    assert [c.meta for c in calls[1:]] == [None, None, None]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=249, output_tokens=58 + 183, reasoning_tokens=183)


# --------------------------------------------------------------------------------------------
# recorded bodies and cassettes


def test_tool_call_body() -> None:
    raw = fixture_path("google", "google-tool-call-gemini3.json").read_bytes()
    sig = orjson.loads(raw)["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    events = ADAPTER.decode_response(raw, target())
    assert events[0] == MessageStart("JniLacKqGqH0xs0P0O776As", "gemini-3-pro-preview")
    turn = fold(events)
    assert [(b.name, b.arguments, b.meta.data) for b in turn.blocks] == [
        ("weather", '{"location":"San Francisco"}', {"thought_signature": sig})
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=29, output_tokens=15 + 1801, reasoning_tokens=1801)


def test_signed_text_body() -> None:
    raw = fixture_path("google", "google-reasoning-gemini3.json").read_bytes()
    part = orjson.loads(raw)["candidates"][0]["content"]["parts"][0]
    turn = fold(ADAPTER.decode_response(raw, target()))
    assert turn.blocks == [
        Text(part["text"], target().continuity({"thought_signature": part["thoughtSignature"]}))
    ]
    assert turn.stop_reason is StopReason.END_TURN
    assert turn.usage == Usage(input_tokens=9, output_tokens=29 + 258, reasoning_tokens=258)


def test_body_without_finish_reason_is_an_error() -> None:
    body = orjson.dumps({"candidates": [{"content": {"parts": [{"text": "hi"}], "role": "model"}}]})
    events = ADAPTER.decode_response(body, target())
    assert type(events[-1]) is StreamError and events[-1].error.category is ErrorCategory.PROTOCOL


def test_cassette_streams_and_replayed_signature() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed; VCR cassettes cannot be read")
    path = fixture_path("google", "test_google_streaming_tool_call_thought_signature.yaml")
    first, second = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]
    body = first["response"]["body"]["string"]
    sig = orjson.loads(body.split("\r\n")[0][len("data: ") :])["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]
    turn = fold(decode_both(body.encode()))
    assert [(b.name, b.arguments, b.meta.data) for b in turn.blocks] == [
        ("get_country", "{}", {"thought_signature": sig})
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=29, output_tokens=10 + 202, reasoning_tokens=202)
    turn = fold(decode_both(second["response"]["body"]["string"].encode()))
    assert turn.blocks == [Text("The capital of Mexico is Mexico City.")]
    assert turn.usage == Usage(input_tokens=257, output_tokens=8)
    # the recorded follow-up request replays the call with its signature and answers it by name
    replayed = second["request"]["parsed_body"]["contents"]
    assert replayed[1]["parts"][0]["functionCall"]["name"] == "get_country"
    assert replayed[2]["parts"][0]["functionResponse"]["name"] == "get_country"


# --------------------------------------------------------------------------------------------
# synthetic streams


def gchunk(parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> str:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return orjson.dumps(
        {"candidates": [candidate], "responseId": "r1", "modelVersion": "gemini-x", **extra}
    ).decode()


def test_parallel_calls_signature_only_on_first() -> None:
    lines = [
        gchunk([{"text": "Checking."}]),
        gchunk(
            [
                {"functionCall": {"name": "f", "args": {"x": 1}, "id": "fc1"}, "thoughtSignature": "U0lH"},
                {"functionCall": {"name": "f", "args": {"x": 2}, "id": "fc2"}},
            ],
            "STOP",
            usageMetadata={"promptTokenCount": 10, "candidatesTokenCount": 5, "cachedContentTokenCount": 4},
        ),
    ]
    tgt = target()
    turn = fold(decode_both(sse(lines), tgt))
    assert turn.blocks == [
        Text("Checking."),
        ToolCall("fc1", "f", '{"x":1}', tgt.continuity({"thought_signature": "U0lH", "id": "fc1"})),
        ToolCall("fc2", "f", '{"x":2}', tgt.continuity({"id": "fc2"})),
    ]
    assert turn.usage == Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4)
    assert turn.stop_reason is StopReason.TOOL_CALLS


def test_signed_text_part_is_not_merged_with_unsigned_text() -> None:
    lines = [
        gchunk([{"text": "a"}, {"text": "b"}]),
        gchunk([{"text": "c", "thoughtSignature": "U0lH"}, {"text": "d"}]),
        gchunk([{"text": "e"}], "STOP"),
    ]
    turn = fold(decode_both(sse(lines)))
    assert [(b.text, b.meta.data if b.meta else None) for b in turn.blocks] == [
        ("ab", None),
        ("c", {"thought_signature": "U0lH"}),
        ("de", None),
    ]


def test_partial_args_nested_paths_and_value_kinds() -> None:
    lines = [
        gchunk([{"functionCall": {"name": "plan", "willContinue": True}, "thoughtSignature": "U0lH"}]),
        gchunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [{"jsonPath": "$.title", "stringValue": "Hel", "willContinue": True}],
                        "willContinue": True,
                    }
                }
            ]
        ),
        gchunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [{"jsonPath": "$.title", "stringValue": "lo"}],
                        "willContinue": True,
                    }
                }
            ]
        ),
        gchunk(
            [
                {
                    "functionCall": {
                        "partialArgs": [
                            {"jsonPath": "$.opts.count", "numberValue": 3},
                            {"jsonPath": "$.opts.dry", "boolValue": False},
                            {"jsonPath": "$.steps[1]", "stringValue": "second"},
                            {"jsonPath": "$.steps[0]", "stringValue": "first"},
                            {"jsonPath": "$['odd key']", "nullValue": "NULL_VALUE"},
                        ],
                        "willContinue": True,
                    }
                }
            ]
        ),
        gchunk([{"functionCall": {}}]),
        gchunk([{"text": ""}], "STOP"),
    ]
    turn = fold(decode_both(sse(lines)))
    (call,) = turn.blocks
    assert orjson.loads(call.arguments) == {
        "title": "Hello",
        "opts": {"count": 3, "dry": False},
        "steps": ["first", "second"],
        "odd key": None,
    }
    assert call.meta.data == {"thought_signature": "U0lH"}


def test_truncated_stream() -> None:
    lines = chunk_lines(fixture_path("google", "google-tool-call-gemini3.chunks.txt"))[:-1]
    events = decode_both(sse(lines))
    assert type(events[-1]) is StreamError and events[-1].error.category is ErrorCategory.CONNECTION
    assert not any(type(e) is Finish for e in events)
    assert fold(events).stop_reason is StopReason.ERROR


def test_in_stream_error_chunk() -> None:
    error = {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }
    events = decode(sse([gchunk([{"text": "par"}]), orjson.dumps(error).decode()]))
    errors = [e for e in events if type(e) is StreamError]
    assert len(errors) == 1
    assert errors[0].error.category is ErrorCategory.OVERLOADED and errors[0].error.retryable
    assert errors[0].error.message == "The model is overloaded. Please try again later."


def test_blocked_prompt_and_safety_stop() -> None:
    blocked = orjson.dumps({"promptFeedback": {"blockReason": "SAFETY"}, "responseId": "r"}).decode()
    assert fold(decode(sse([blocked]))).stop_reason is StopReason.CONTENT_FILTER
    assert fold(decode(sse([gchunk([{"text": "x"}], "RECITATION")]))).stop_reason is StopReason.CONTENT_FILTER
    assert fold(decode(sse([gchunk([{"text": "x"}], "MAX_TOKENS")]))).stop_reason is StopReason.MAX_TOKENS
    assert fold(decode(sse([gchunk([], "MALFORMED_FUNCTION_CALL")]))).stop_reason is StopReason.ERROR


def test_unsupported_part_is_an_error_not_a_drop() -> None:
    events = decode(sse([gchunk([{"executableCode": {"language": "PYTHON", "code": "1"}}], "STOP")]))
    assert type(events[-1]) is StreamError and events[-1].error.category is ErrorCategory.PROTOCOL


# --------------------------------------------------------------------------------------------
# encoding


FOREIGN = Continuity("claude", "claude", "anthropic", "claude-x", {"signature": "sig"})


def encode(
    request: Request, tgt: Target | None = None, key: str = "AIza-secret"
) -> tuple[str, dict[str, str], dict[str, Any]]:
    http = ADAPTER.encode_request(request, tgt or target(), key)
    return http.url, dict(http.headers), orjson.loads(http.body)


def test_body_shape_roles_parts_and_signatures() -> None:
    tgt = target()
    sig = tgt.continuity({"thought_signature": "U0lHMQ=="})
    stale = target("gemini-2.5-pro").continuity({"thought_signature": "T0xE"})
    request = Request(
        model="smart",
        system="Be brief.",
        messages=(
            Message(
                Role.USER, (Text("Weather in Paris and Rome?"), Image("data:image/png;base64,iVBORw0KGgo="))
            ),
            Message(
                Role.ASSISTANT,
                (
                    Reasoning("Two cities.", tgt.continuity({})),
                    Text("Checking."),
                    ToolCall("call_a", "get_weather", '{"city": "Paris"}', sig),
                    ToolCall("call_b", "get_weather", '{"city": "Rome"}', stale),
                ),
            ),
            # one step's results in one message, as repair hands them to Gemini (merge_tool_runs)
            Message(
                Role.TOOL, (ToolResult("call_a", "18C"), ToolResult("call_b", "unknown city", is_error=True))
            ),
            Message(
                Role.ASSISTANT, (Text("Paris 18C."), Text("", tgt.continuity({"thought_signature": "RU5E"})))
            ),
            Message(Role.USER, (Text("thanks"), Image("https://img.example/pic.jpg"))),
        ),
        stream=True,
        max_tokens=512,
        temperature=0.5,
        top_p=0.8,
        stop=("END",),
    )
    url, headers, body = encode(request, tgt)
    assert (
        url
        == "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    )
    assert headers["x-goog-api-key"] == "AIza-secret"
    assert body == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Weather in Paris and Rome?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Two cities.", "thought": True},
                    {"text": "Checking."},
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_a"},
                        "thoughtSignature": "U0lHMQ==",
                    },
                    # a signature from another model is never replayed
                    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_b"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "id": "call_a",
                            "response": {"content": "18C"},
                        }
                    },
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "id": "call_b",
                            "response": {"error": "unknown city"},
                        }
                    },
                ],
            },
            {"role": "model", "parts": [{"text": "Paris 18C."}, {"text": "", "thoughtSignature": "RU5E"}]},
            {
                "role": "user",
                "parts": [
                    {"text": "thanks"},
                    {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://img.example/pic.jpg"}},
                ],
            },
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "maxOutputTokens": 512,
            "temperature": 0.5,
            "topP": 0.8,
            "stopSequences": ["END"],
        },
    }


def test_api_key_only_in_header_and_non_stream_url() -> None:
    url, headers, body = encode(
        Request(model="m", messages=(Message(Role.USER, (Text("hi"),)),)), key="AIza-secret"
    )
    assert (
        url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:generateContent"
    )
    assert "AIza-secret" not in url and "key=" not in url
    assert "AIza-secret" not in orjson.dumps(body).decode()
    assert [k for k, v in headers.items() if v == "AIza-secret"] == ["x-goog-api-key"]


def test_owned_signed_reasoning_and_placeholder_signature() -> None:
    tgt = target()
    placeholder = tgt.continuity({"thought_signature": PLACEHOLDER})
    messages = (
        Message(Role.USER, (Text("go"),)),
        Message(
            Role.ASSISTANT,
            (
                Reasoning("plan", tgt.continuity({"thought_signature": "VEg="})),
                ToolCall("call_x", "f", "", placeholder),
            ),
        ),
        Message(Role.TOOL, (ToolResult("call_x", "done"),)),
    )
    _, _, body = encode(Request(model="m", messages=messages), tgt)
    assert body["contents"][1]["parts"] == [
        {"text": "plan", "thought": True, "thoughtSignature": "VEg="},
        {"functionCall": {"name": "f", "args": {}, "id": "call_x"}, "thoughtSignature": PLACEHOLDER},
    ]


def test_foreign_reasoning_is_refused() -> None:
    messages = (
        Message(Role.USER, (Text("go"),)),
        Message(Role.ASSISTANT, (Reasoning("t", FOREIGN), Text("x"))),
    )
    with pytest.raises(EncodeError, match="messages\\[1\\]"):
        encode(Request(model="m", messages=messages))


def test_result_for_unknown_call_and_non_object_args_are_refused() -> None:
    with pytest.raises(EncodeError):
        encode(Request(model="m", messages=(Message(Role.TOOL, (ToolResult("call_zz", "x"),)),)))
    bad_args = (Message(Role.USER, (Text("go"),)), Message(Role.ASSISTANT, (ToolCall("c", "f", "[1, 2]"),)))
    with pytest.raises(EncodeError):
        encode(Request(model="m", messages=bad_args))


def test_decoded_turns_replay_exactly() -> None:
    tgt = target("gemini-3-flash-preview")
    lines = chunk_lines(fixture_path("google", "google-stream-no-args-tool-call.chunks.txt"))
    (sig,) = signatures(lines)
    turn = fold(decode(sse(lines), tgt=tgt))
    messages = (Message(Role.USER, (Text("read them"),)), turn.message())
    _, _, body = encode(Request(model="m", messages=messages), tgt)
    assert body["contents"][1]["parts"] == [
        {"text": turn.blocks[0].text, "thought": True},
        {"functionCall": {"name": "read_theme", "args": {}}, "thoughtSignature": sig},
        {"functionCall": {"name": "read_screen", "args": {"id": "A"}}},
        {"functionCall": {"name": "read_screen", "args": {"id": "B"}}},
        {"functionCall": {"name": "read_screen", "args": {"id": "C"}}},
    ]
    lines = chunk_lines(fixture_path("google", "issue-18073-empty-text-thought-signature.chunks.txt"))
    (sig,) = signatures(lines)
    turn = fold(decode(sse(lines), tgt=tgt))
    _, _, body = encode(
        Request(model="m", messages=(Message(Role.USER, (Text("2+2"),)), turn.message())), tgt
    )
    assert body["contents"][1]["parts"] == [{"text": "4"}, {"text": "", "thoughtSignature": sig}]


def test_tools_schema_stripping_and_tool_config() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "description": "City", "examples": ["Paris"]},
            "unit": {"type": ["string", "null"], "enum": ["c", "f"]},
            "where": {"$ref": "#/$defs/Place", "description": "override"},
            "tags": {"type": "array", "items": {"type": "string", "additionalProperties": False}},
            "mode": {"const": "fast"},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["city"],
        "$defs": {
            "Place": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"lat": {"type": "number"}},
            }
        },
    }
    tools = (ToolSpec("get_weather", "Weather", schema), ToolSpec("ping", "No arguments"))
    request = Request(
        model="m",
        messages=(Message(Role.USER, (Text("hi"),)),),
        tools=tools,
        tool_choice=ToolChoice(ToolChoiceMode.TOOL, "get_weather"),
    )
    _, _, body = encode(request)
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string", "description": "City"},
                            "unit": {"nullable": True, "type": "string", "enum": ["c", "f"]},
                            "where": {
                                "type": "object",
                                "properties": {"lat": {"type": "number"}},
                                "description": "override",
                            },
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "mode": {"enum": ["fast"]},
                            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                        },
                        "required": ["city"],
                    },
                },
                {"name": "ping", "description": "No arguments"},
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }
    for mode, word in [
        (ToolChoiceMode.AUTO, "AUTO"),
        (ToolChoiceMode.NONE, "NONE"),
        (ToolChoiceMode.REQUIRED, "ANY"),
    ]:
        _, _, body = encode(
            Request(model="m", messages=request.messages, tools=tools, tool_choice=ToolChoice(mode))
        )
        assert body["toolConfig"] == {"functionCallingConfig": {"mode": word}}


def test_recursive_schema_ref_is_refused() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    with pytest.raises(EncodeError, match="recursive"):
        gemini_schema(schema)


def test_thinking_config_from_budget_or_effort() -> None:
    request = Request(model="m", messages=(Message(Role.USER, (Text("hi"),)),))
    _, _, body = encode(request, target("gemini-2.5-flash", thinking_budget=2048))
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True}}
    # Gemini 3 takes levels: a budget becomes the level whose 2.5 budget is nearest
    _, _, body = encode(request, target(thinking_budget=2048))
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True}}
    _, _, body = encode(request, target(reasoning_effort="low"))
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True}}
    high = Request(model="m", messages=request.messages, reasoning_effort="high")
    _, _, body = encode(high, target(reasoning_effort="low"))
    assert body["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "high"
    _, _, body = encode(request)
    assert "generationConfig" not in body


# --------------------------------------------------------------------------------------------
# errors


def google_error(code: int, status: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message, "status": status}})


def test_429_retry_info_fixture() -> None:
    raw = fixture_path("google", "google-429-retry-info.json").read_bytes()
    error = ADAPTER.classify_error(429, {}, raw)
    assert error.category is ErrorCategory.RATE_LIMIT and error.retryable
    assert error.retry_after == 34.4
    assert error.type == "RESOURCE_EXHAUSTED" and error.status == 429
    assert error.message == "You exceeded your current quota, please check your plan."
    assert ADAPTER.classify_error(429, {"Retry-After": "3"}, raw).retry_after == 3.0


def test_missing_thought_signature_is_continuity() -> None:
    message = (
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
        "call `default_api:Task` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "
        "for more details."
    )
    error = ADAPTER.classify_error(400, {}, google_error(400, "INVALID_ARGUMENT", message))
    assert error.category is ErrorCategory.CONTINUITY and error.message == message


@pytest.mark.parametrize(
    "message",
    [
        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
        "Please ensure that function call turn comes immediately after a user turn or after a function response turn.",
        "Please ensure that function response turn comes immediately after a function call turn",
    ],
)
def test_pairing_rejections(message: str) -> None:
    error = ADAPTER.classify_error(400, {}, google_error(400, "INVALID_ARGUMENT", message))
    assert error.category is ErrorCategory.PAIRING and not error.retryable


def test_status_strings_and_fallbacks() -> None:
    overloaded = ADAPTER.classify_error(
        503, {}, google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
    )
    assert overloaded.category is ErrorCategory.OVERLOADED and overloaded.retryable
    bad_key = ADAPTER.classify_error(
        400, {}, google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
    )
    assert bad_key.category is ErrorCategory.AUTH
    other = ADAPTER.classify_error(
        400, {}, google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
    )
    assert other.category is ErrorCategory.INVALID_REQUEST
    assert ADAPTER.classify_error(500, {}, b"upstream connect error").category is ErrorCategory.SERVER


def test_tool_config_is_only_sent_with_function_declarations() -> None:
    hi = (Message(Role.USER, (Text("hi"),)),)
    _, _, body = encode(Request(model="m", messages=hi, tool_choice=ToolChoice(ToolChoiceMode.NONE)))
    assert "toolConfig" not in body and "tools" not in body


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("gemini-3-pro-preview", None, {"thinkingLevel": "low", "includeThoughts": True}),
        ("gemini-3-pro-preview", "high", {"thinkingLevel": "high", "includeThoughts": True}),
        ("gemini-2.5-flash", "high", {"thinkingBudget": 24576, "includeThoughts": True}),
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}),
        # models that cannot stop thinking think least, and the client that asked for none sees none
        ("gemini-2.5-pro", "none", {"thinkingBudget": 128}),
        ("gemini-3-pro-preview", "none", {"thinkingLevel": "low"}),
        ("gemini-3-flash-preview", "none", {"thinkingLevel": "minimal"}),
    ],
)
def test_a_client_effort_overrides_the_target_budget(model, effort, expected) -> None:
    request = Request(model="m", messages=(Message(Role.USER, (Text("hi"),)),), reasoning_effort=effort)
    _, _, body = encode(request, target(model, thinking_budget=2048))
    assert body["generationConfig"]["thinkingConfig"] == expected


def test_grounding_metadata_is_a_server_tool_call_and_its_sources() -> None:
    """`groundingMetadata` of a google_search-grounded answer (its documented shape,
    https://ai.google.dev/gemini-api/docs/google-search) becomes the search and its sources."""
    from gateway.transcript.assembler import fold
    from gateway.transcript.model import ServerToolCall, ServerToolResult, Source, Text

    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Spain won Euro 2024."}]},
                "finishReason": "STOP",
                "groundingMetadata": {
                    "webSearchQueries": ["UEFA Euro 2024 winner"],
                    "groundingChunks": [
                        {"web": {"uri": "https://vertexaisearch.example/1", "title": "uefa.com"}}
                    ],
                    "groundingSupports": [
                        {
                            "segment": {"startIndex": 0, "endIndex": 20, "text": "Spain won Euro 2024."},
                            "groundingChunkIndices": [0],
                        }
                    ],
                },
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 6},
    }
    decoder = ADAPTER.stream_decoder(target())
    events = decoder.feed(b"data: " + orjson.dumps(chunk) + b"\n\n") + decoder.finish()
    turn = fold(events)
    text, call, result = turn.blocks
    assert type(text) is Text and text.text == "Spain won Euro 2024."
    assert type(call) is ServerToolCall and call.name == "google_search"
    assert orjson.loads(call.input) == {"queries": ["UEFA Euro 2024 winner"]}
    assert type(result) is ServerToolResult and result.sources == (
        Source("https://vertexaisearch.example/1", "uefa.com"),
    )
    assert '"Spain won Euro 2024." [1]' in result.text
    assert call.meta is not None and call.meta.kind == "gemini"
