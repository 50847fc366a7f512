"""The Chat Completions family (openai_chat, deepseek, kimi, mistral): recorded streams and bodies
decoded and folded, request bodies encoded per dialect, error bodies classified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.providers import deepseek, kimi, mistral, openai_chat
from gateway.providers.base import EncodeError
from gateway.transcript.assembler import fold
from gateway.transcript.events import (
    BlockStart,
    ErrorCategory,
    Event,
    Finish,
    MessageStart,
    StreamError,
    UsageUpdate,
)
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

ADAPTERS = {
    "openai_chat": openai_chat.ADAPTER,
    "deepseek": deepseek.ADAPTER,
    "kimi": kimi.ADAPTER,
    "mistral": mistral.ADAPTER,
}


def target(kind: str, model: str = "m-1", **kw: Any) -> Target:
    return Target(
        provider=f"{kind}-main", kind=kind, model=model, base_url=f"https://{kind}.example/v1", **kw
    )


def chunk_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sse(lines: list[str], done: bool = True) -> bytes:
    body = "".join(f"data: {line}\n\n" for line in lines)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def decode(kind: str, body: bytes, size: int | None = None, tgt: Target | None = None) -> list[Event]:
    decoder = ADAPTERS[kind].stream_decoder(tgt or target(kind))
    events: list[Event] = []
    if size is None:
        events += decoder.feed(body)
    else:
        for start in range(0, len(body), size):
            events += decoder.feed(body[start : start + size])
    return events + decoder.finish()


def decode_both(kind: str, body: bytes) -> list[Event]:
    """Whole-body and 7-byte-slice decoding must give identical events."""
    whole = decode(kind, body)
    assert decode(kind, body, 7) == whole
    return whole


def delta_texts(lines: list[str], key: str) -> str:
    out = []
    for line in lines:
        for choice in orjson.loads(line).get("choices") or ():
            value = (choice.get("delta") or {}).get(key)
            if isinstance(value, str):
                out.append(value)
    return "".join(out)


def tail(events: list[Event]) -> list[type]:
    return [type(e) for e in events[-2:]]


# --------------------------------------------------------------------------------------------
# recorded streams


def test_openai_text_stream() -> None:
    lines = chunk_lines(fixture_path("openai-chat", "openai-text.chunks.txt"))
    events = decode_both("openai_chat", sse(lines))
    assert events[0] == MessageStart("chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0", "gpt-4.1-nano-2025-04-14")
    assert tail(events) == [UsageUpdate, Finish]
    assert sum(type(e) is UsageUpdate for e in events) == 1
    turn = fold(events)
    assert len(turn.blocks) == 1 and type(turn.blocks[0]) is Text
    assert turn.blocks[0].text.startswith("**Holiday Name:** Harmony Day")
    assert turn.blocks[0].text == delta_texts(lines, "content")
    assert turn.stop_reason is StopReason.END_TURN
    assert turn.usage == Usage(input_tokens=16, output_tokens=300)


def test_azure_leading_prompt_filter_chunk_is_tolerated() -> None:
    lines = chunk_lines(fixture_path("openai-chat", "azure-model-router.1.chunks.txt"))
    events = decode_both("openai_chat", sse(lines))
    assert events[0] == MessageStart("chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt", "gpt-5-nano-2025-08-07")
    turn = fold(events)
    assert [b.text for b in turn.blocks] == ["Capital of Denmark."]
    assert turn.usage == Usage(input_tokens=15, output_tokens=78, reasoning_tokens=64)
    assert turn.stop_reason is StopReason.END_TURN


def test_deepseek_reasoning_then_text() -> None:
    lines = chunk_lines(fixture_path("deepseek", "deepseek-reasoning.chunks.txt"))
    tgt = target("deepseek", "deepseek-reasoner")
    events = decode("deepseek", sse(lines), tgt=tgt)
    assert decode("deepseek", sse(lines), 7, tgt) == events
    turn = fold(events)
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    reasoning, text = turn.blocks
    assert reasoning.text.startswith('We need to count the number of the letter "r"')
    assert reasoning.text == delta_texts(lines, "reasoning_content")
    assert tgt.owns(reasoning.meta) and reasoning.meta.data == {}
    assert text.text == 'The word "strawberry" contains three "r"s.'
    assert turn.usage == Usage(input_tokens=18, output_tokens=219, reasoning_tokens=205)
    assert turn.stop_reason is StopReason.END_TURN


def test_deepseek_tool_call_stream() -> None:
    lines = chunk_lines(fixture_path("deepseek", "deepseek-tool-call.chunks.txt"))
    events = decode_both("deepseek", sse(lines))
    starts = [e for e in events if type(e) is BlockStart]
    assert starts[1] == BlockStart(1, starts[1].kind, "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather")
    turn = fold(events)
    assert [type(b) for b in turn.blocks] == [Reasoning, ToolCall]
    assert turn.blocks[0].text.startswith("The user is asking for the weather in San Francisco.")
    call = turn.blocks[1]
    assert (call.id, call.name, orjson.loads(call.arguments)) == (
        "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF",
        "weather",
        {"location": "San Francisco"},
    )
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=339, output_tokens=83, cache_read_tokens=320, reasoning_tokens=39)


def test_mistral_whole_tool_call_without_index() -> None:
    lines = chunk_lines(fixture_path("mistral", "mistral-tool-call.chunks.txt"))
    turn = fold(decode_both("mistral", sse(lines)))
    assert [(b.id, b.name, orjson.loads(b.arguments)) for b in turn.blocks] == [
        ("gSIMJiOkT", "weather", {"location": "San Francisco"})
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=124, output_tokens=22)


def test_kimi_usage_in_choice_and_trailing_chunk_counted_once() -> None:
    lines = chunk_lines(fixture_path("moonshotai", "moonshotai-usage-live.chunks.txt"))
    events = decode_both("kimi", sse(lines))
    assert [e for e in events if type(e) is UsageUpdate] == [
        UsageUpdate(Usage(input_tokens=90, output_tokens=50, cache_read_tokens=90, reasoning_tokens=33))
    ]
    turn = fold(events)
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    assert turn.blocks[0].text == (
        'The user is asking me to reply with exactly "OK". This is a simple request with no ambiguity. '
        'I should just respond with "OK" and nothing else.'
    )
    assert turn.blocks[1].text == "OK"
    assert turn.stop_reason is StopReason.END_TURN


# --------------------------------------------------------------------------------------------
# recorded non-streaming bodies


def test_openai_text_body() -> None:
    raw = fixture_path("openai-chat", "openai-text.json").read_bytes()
    events = openai_chat.ADAPTER.decode_response(raw, target("openai_chat"))
    assert events[0] == MessageStart("chatcmpl-D8Z5f52zQqikDBEKQMQoYcWMcWPeU", "gpt-4.1-nano-2025-04-14")
    turn = fold(events)
    assert [b.text for b in turn.blocks] == [orjson.loads(raw)["choices"][0]["message"]["content"]]
    assert turn.blocks[0].text.startswith("**Holiday Name:** Galaxy Day")
    assert turn.usage == Usage(input_tokens=16, output_tokens=363)
    assert turn.stop_reason is StopReason.END_TURN


def test_deepseek_tool_call_body() -> None:
    raw = fixture_path("deepseek", "deepseek-tool-call.json").read_bytes()
    turn = fold(deepseek.ADAPTER.decode_response(raw, target("deepseek")))
    assert [type(b) for b in turn.blocks] == [Reasoning, ToolCall]  # content "" makes no text block
    assert turn.blocks[0].text.endswith("Let me call the weather function.")
    assert turn.blocks[1].id == "call_00_9V0vrf86Pc9aelHCJMZqnJBo"
    assert orjson.loads(turn.blocks[1].arguments) == {"location": "San Francisco"}
    assert turn.usage == Usage(input_tokens=339, output_tokens=92, cache_read_tokens=320, reasoning_tokens=48)
    assert turn.stop_reason is StopReason.TOOL_CALLS


def test_deepseek_reasoning_body() -> None:
    raw = fixture_path("deepseek", "deepseek-reasoning.json").read_bytes()
    turn = fold(deepseek.ADAPTER.decode_response(raw, target("deepseek")))
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    assert turn.blocks[0].text.startswith("We are asked: \"How many 'r's are in the word 'strawberry'?\"")
    assert turn.blocks[1].text.startswith('The word "strawberry" contains three instances')
    assert turn.usage == Usage(input_tokens=18, output_tokens=345, reasoning_tokens=315)


def test_mistral_tool_call_body() -> None:
    raw = fixture_path("mistral", "mistral-tool-call.json").read_bytes()
    turn = fold(mistral.ADAPTER.decode_response(raw, target("mistral")))
    assert [(b.id, b.name, b.arguments) for b in turn.blocks] == [
        ("gSIMJiOkT", "weather", '{"location": "San Francisco"}')
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS


def test_mistral_thinking_content_array_body() -> None:
    raw = fixture_path("mistral", "mistral-reasoning-history-live.json").read_bytes()
    tgt = target("mistral", "mistral-small-latest")
    turn = fold(mistral.ADAPTER.decode_response(raw, tgt))
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    assert turn.blocks[0].text.startswith("I need to calculate 17 multiplied by 23.")
    assert turn.blocks[0].text.endswith("So, 17 * 23 equals 391.")
    assert tgt.owns(turn.blocks[0].meta)
    assert turn.blocks[1].text == "391"
    assert turn.usage == Usage(input_tokens=31, output_tokens=161)
    assert turn.stop_reason is StopReason.END_TURN


# --------------------------------------------------------------------------------------------
# VCR cassettes (raw SSE bodies)


def cassette_bodies(path: Path) -> list[str]:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed; VCR cassettes cannot be read")
    interactions = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]
    return [i["response"]["body"]["string"] for i in interactions]


def test_openai_chat_cassette_streamed_tool_call_then_text() -> None:
    first, second = cassette_bodies(
        fixture_path("openai-chat", "test_run_stream_sync_streams_real_model.yaml")
    )
    turn = fold(decode_both("openai_chat", first.encode()))
    assert [(b.id, b.name) for b in turn.blocks] == [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital")]
    assert orjson.loads(turn.blocks[0].arguments) == {"country": "UK"}
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=53, output_tokens=15)
    turn = fold(decode_both("openai_chat", second.encode()))
    assert [type(b) for b in turn.blocks] == [Text]
    assert turn.blocks[0].text == "The capital of the UK is London."
    assert turn.usage == Usage(input_tokens=78, output_tokens=9)


def test_mistral_cassette_streamed_thinking_chunks() -> None:
    (body,) = cassette_bodies(fixture_path("mistral", "test_mistral_model_thinking_part_iter.yaml"))
    turn = fold(decode_both("mistral", body.encode()))
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    assert turn.blocks[0].text.startswith("Okay, the user is")
    assert turn.blocks[1].text.endswith(" ensure a safe crossing.")
    assert turn.usage == Usage(input_tokens=10, output_tokens=232)
    assert turn.stop_reason is StopReason.END_TURN


# --------------------------------------------------------------------------------------------
# synthetic streams: parallel calls, truncation, errors


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return orjson.dumps({"id": "chatcmpl-par", "model": "gpt-x", "choices": choices, **extra}).decode()


def test_parallel_indexed_tool_calls_with_interleaved_fragments() -> None:
    lines = [
        chunk({"role": "assistant", "content": None}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "g", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"y": 2}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        chunk({}, "tool_calls"),
        chunk(
            usage={"prompt_tokens": 5, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 3}}
        ),
    ]
    turn = fold(decode_both("openai_chat", sse(lines)))
    assert [(b.id, b.name, orjson.loads(b.arguments)) for b in turn.blocks] == [
        ("call_a", "f", {"x": 1}),
        ("call_b", "g", {"y": 2}),
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=5, output_tokens=7, cache_read_tokens=3)


def test_mistral_parallel_whole_calls_without_index() -> None:
    calls = [
        {"id": "aaaaaaaa1", "function": {"name": "f", "arguments": '{"x": 1}'}},
        {"id": "bbbbbbbb2", "function": {"name": "f", "arguments": '{"x": 2}'}},
    ]
    lines = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": None, "tool_calls": calls}, "tool_calls"),
    ]
    turn = fold(decode_both("mistral", sse(lines)))
    assert [(b.id, b.arguments) for b in turn.blocks] == [
        ("aaaaaaaa1", '{"x": 1}'),
        ("bbbbbbbb2", '{"x": 2}'),
    ]


def test_text_then_tool_call_keeps_start_order() -> None:
    lines = [
        chunk({"content": "Let me check."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
    ]
    turn = fold(decode_both("openai_chat", sse(lines)))
    assert [type(b) for b in turn.blocks] == [Text, ToolCall]
    assert turn.blocks[0].text == "Let me check."


def test_stream_without_done_is_truncated() -> None:
    lines = chunk_lines(fixture_path("openai-chat", "openai-text.chunks.txt"))
    events = decode_both("openai_chat", sse(lines, done=False))
    assert type(events[-1]) is StreamError
    assert events[-1].error.category is ErrorCategory.CONNECTION
    assert not any(type(e) is Finish for e in events)
    assert fold(events).stop_reason is StopReason.ERROR


def test_stream_cut_mid_answer_is_truncated() -> None:
    lines = chunk_lines(fixture_path("deepseek", "deepseek-tool-call.chunks.txt"))[:45]
    events = decode("deepseek", sse(lines, done=False), 7)
    assert type(events[-1]) is StreamError and events[-1].error.category is ErrorCategory.CONNECTION
    assert fold(events).stop_reason is StopReason.ERROR


def test_done_without_finish_reason_is_a_protocol_error() -> None:
    events = decode("openai_chat", sse([chunk({"content": "hi"})]))
    assert type(events[-1]) is StreamError
    assert events[-1].error.category is ErrorCategory.PROTOCOL


def test_in_stream_error_chunk() -> None:
    error = {
        "error": {"message": "The server had an error while processing your request.", "type": "server_error"}
    }
    events = decode("openai_chat", sse([chunk({"content": "par"}), orjson.dumps(error).decode()]))
    errors = [e for e in events if type(e) is StreamError]
    assert len(errors) == 1 and errors[0].error.category is ErrorCategory.SERVER
    assert errors[0].error.message == "The server had an error while processing your request."
    assert errors[0].error.retryable
    assert not any(type(e) is Finish for e in events)


def test_unsupported_content_chunk_is_an_error_not_a_drop() -> None:
    events = decode("mistral", sse([chunk({"content": [{"type": "audio", "data": "..."}]}, "stop")]))
    assert [type(e) for e in events if type(e) is StreamError] == [StreamError]
    assert events[-1].error.category is ErrorCategory.PROTOCOL


# --------------------------------------------------------------------------------------------
# encoding


def own(tgt: Target, **data: Any) -> Continuity:
    return tgt.continuity(data)


FOREIGN = Continuity("claude", "claude", "anthropic", "claude-x", {"signature": "sig"})
TOOLS = (
    ToolSpec(
        "get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}}
    ),
)


def conversation(reasoning: Reasoning | None = None, image: bool = True) -> tuple[Message, ...]:
    assistant_blocks: tuple[Any, ...] = (
        Text("Checking both."),
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_2", "get_weather", '{"city": "Rome"}'),
    )
    if reasoning is not None:
        assistant_blocks = (reasoning, *assistant_blocks)
    return (
        Message(Role.USER, (Text("Weather in "), Text("Paris and Rome?"))),
        Message(Role.ASSISTANT, assistant_blocks),
        Message(
            Role.TOOL,
            (ToolResult("call_1", "18C sunny"), ToolResult("call_2", "city not found", is_error=True)),
        ),
        Message(
            Role.USER,
            (Text("And this?"), *([Image("https://img.example/a.png", detail="low")] if image else [])),
        ),
    )


def encode(
    kind: str, request: Request, tgt: Target | None = None
) -> tuple[str, dict[str, str], dict[str, Any]]:
    http = ADAPTERS[kind].encode_request(request, tgt or target(kind), "sk-test")
    return http.url, dict(http.headers), orjson.loads(http.body)


def test_openai_chat_body_shape() -> None:
    tgt = target("openai_chat", "gpt-5", reasoning_effort="low")
    request = Request(
        model="smart",
        system="Be brief.",
        messages=conversation(),
        tools=TOOLS,
        tool_choice=ToolChoice(ToolChoiceMode.TOOL, "get_weather"),
        parallel_tool_calls=True,
        stream=True,
        max_tokens=256,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
    )
    url, headers, body = encode("openai_chat", request, tgt)
    assert url == "https://openai_chat.example/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body == {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: city not found"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this?"},
                    {"type": "image_url", "image_url": {"url": "https://img.example/a.png", "detail": "low"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": True,
        "max_completion_tokens": 256,
        "stop": ["END"],
        "reasoning_effort": "low",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_openai_chat_client_effort_overrides_target_and_non_stream_has_no_stream_keys() -> None:
    tgt = target("openai_chat", "o3", reasoning_effort="low")
    request = Request(model="m", messages=conversation(), reasoning_effort="high")
    _, _, body = encode("openai_chat", request, tgt)
    assert body["reasoning_effort"] == "high"
    assert "stream" not in body and "stream_options" not in body


@pytest.mark.parametrize("kind", ["openai_chat", "deepseek", "kimi", "mistral"])
def test_foreign_reasoning_is_refused(kind: str) -> None:
    request = Request(model="m", messages=conversation(Reasoning("thought", FOREIGN)))
    with pytest.raises(EncodeError, match="messages\\[1\\]"):
        encode(kind, request)


def test_reasoning_from_another_model_of_same_provider_is_foreign() -> None:
    tgt = target("deepseek", "deepseek-reasoner")
    other = target("deepseek", "deepseek-chat").continuity({})
    with pytest.raises(EncodeError):
        encode("deepseek", Request(model="m", messages=conversation(Reasoning("t", other))), tgt)


@pytest.mark.parametrize("kind", ["deepseek", "kimi"])
def test_reasoning_content_rules(kind: str) -> None:
    tgt = target(kind, "thinker")
    with_reasoning = Request(
        model="m", messages=conversation(Reasoning("Need both cities.", own(tgt)), image=False)
    )
    _, _, body = encode(kind, with_reasoning, tgt)
    assistant = body["messages"][1]
    assert assistant["reasoning_content"] == "Need both cities."
    assert assistant["content"] == "Checking both."
    # a tool-call turn without (owned) reasoning still carries the field, empty
    _, _, body = encode(kind, Request(model="m", messages=conversation(image=False)), tgt)
    assert body["messages"][1]["reasoning_content"] == ""
    # a turn without tool calls and without reasoning does not
    plain = Request(
        model="m", messages=(Message(Role.USER, (Text("hi"),)), Message(Role.ASSISTANT, (Text("yo"),)))
    )
    _, _, body = encode(kind, plain, tgt)
    assert body["messages"][1] == {"role": "assistant", "content": "yo"}


def test_openai_chat_omits_its_own_reasoning() -> None:
    tgt = target("openai_chat")
    messages = conversation(Reasoning("internal", own(tgt)))
    _, _, body = encode("openai_chat", Request(model="m", messages=messages), tgt)
    assert "reasoning_content" not in body["messages"][1]
    assert body["messages"][1]["content"] == "Checking both."


def test_unsupported_blocks_raise() -> None:
    bad_user = Request(model="m", messages=(Message(Role.USER, (ToolResult("call_1", "x"),)),))
    with pytest.raises(EncodeError):
        encode("openai_chat", bad_user)
    image_result = Request(
        model="m",
        messages=(Message(Role.TOOL, (ToolResult("call_1", "x", images=(Image("https://x/y.png"),)),)),),
    )
    with pytest.raises(EncodeError):
        encode("openai_chat", image_result)


# --------------------------------------------------------------------------------------------
# errors


def classify(kind: str, status: int, body: Any, headers: dict[str, str] | None = None):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return ADAPTERS[kind].classify_error(status, headers or {}, raw)


def openai_error(
    message: str, type_: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@pytest.mark.parametrize(
    "message",
    [
        (
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. The following tool_call_ids did not have response messages: call_ctiG"
        ),
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
        "Invalid parameter: 'tool_call_id' of 'call_X' not found in 'tool_calls' of previous message.",
    ],
)
def test_openai_pairing_rejections(message: str) -> None:
    error = classify("openai_chat", 400, openai_error(message))
    assert error.category is ErrorCategory.PAIRING
    assert error.message == message and error.status == 400 and not error.retryable


def test_openai_insufficient_quota_fixture() -> None:
    raw = fixture_path("openai-responses", "openai-error.1.json").read_bytes()
    error = classify("openai_chat", 429, raw, {"retry-after": "20"})
    assert error.category is ErrorCategory.QUOTA and not error.retryable
    assert error.type == "insufficient_quota"


def test_openai_rate_limit_and_overload() -> None:
    error = classify(
        "openai_chat",
        429,
        openai_error("Rate limit reached", "requests", "rate_limit_exceeded"),
        {"retry-after": "2"},
    )
    assert (error.category, error.retry_after, error.code) == (
        ErrorCategory.RATE_LIMIT,
        2.0,
        "rate_limit_exceeded",
    )
    error = classify("openai_chat", 503, openai_error("overloaded", "server_error", "server_is_overloaded"))
    assert error.category is ErrorCategory.OVERLOADED and error.retryable


def test_unparseable_error_bodies_fall_back_to_status() -> None:
    error = classify("openai_chat", 502, b"<html>Bad gateway</html>")
    assert error.category is ErrorCategory.SERVER and error.message == "<html>Bad gateway</html>"
    assert classify("mistral", 401, b"").category is ErrorCategory.AUTH


def test_pairing_text_on_a_5xx_is_not_a_pairing_error() -> None:
    body = openai_error(
        "Invalid parameter: 'tool_call_id' of 'call_X' not found in 'tool_calls' of previous message."
    )
    assert classify("openai_chat", 500, body).category is ErrorCategory.SERVER


def test_openai_chat_sampling_goes_to_chat_models_and_effort_to_reasoning_models() -> None:
    request = Request(model="m", messages=conversation(), temperature=0.2, top_p=0.9, reasoning_effort="high")
    _, _, chat = encode("openai_chat", request, target("openai_chat", "gpt-4.1"))
    assert (chat["temperature"], chat["top_p"]) == (0.2, 0.9) and "reasoning_effort" not in chat
    _, _, reasoning = encode("openai_chat", request, target("openai_chat", "gpt-5-mini"))
    assert "temperature" not in reasoning and "top_p" not in reasoning
    assert reasoning["reasoning_effort"] == "high"


def test_chat_search_model_annotations_become_citations() -> None:
    """gpt-4o-search-preview answers with url_citation annotations on the message (streamed on a
    delta); they close the text block as readable citations."""
    note = {
        "type": "url_citation",
        "url_citation": {"url": "https://w.example", "title": "W", "start_index": 0, "end_index": 5},
    }
    lines = [
        orjson.dumps(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Sunny today."}}]}
        ).decode(),
        orjson.dumps(
            {"choices": [{"index": 0, "delta": {"annotations": [note]}, "finish_reason": "stop"}]}
        ).decode(),
    ]
    turn = fold(decode_both("openai_chat", sse(lines)))
    (text,) = turn.blocks
    assert text.text == "Sunny today."
    assert [(c.url, c.title, c.cited_text) for c in text.citations] == [("https://w.example", "W", "Sunny")]
