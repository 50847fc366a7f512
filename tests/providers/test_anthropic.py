"""Anthropic adapter: decoding against recorded streams/bodies, request encoding, error
classification."""

from __future__ import annotations

import orjson
import pytest

from gateway.providers.anthropic import adapter as anthropic
from gateway.providers.anthropic.adapter import ADAPTER
from gateway.providers.base import EncodeError
from gateway.transcript.assembler import fold
from gateway.transcript.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorCategory,
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
from tests.providers.helpers_ab import (
    cassette,
    cassette_sse_bodies,
    chunk_lines,
    feed,
    sse_body,
    sse_data_payloads,
    stream_errors,
)

TARGET = Target(
    provider="claude", kind="anthropic", model="claude-sonnet-4-5", base_url="https://api.anthropic.test/"
)
CHUNK_FILES = (
    "anthropic-clear-thinking.1.chunks.txt",
    "anthropic-claude-sonnet-5-reasoning-summarized.chunks.txt",
    "anthropic-tool-no-args.chunks.txt",
)
STREAM_CASSETTES = (
    "test_anthropic_model_thinking_part_stream.yaml",
    "test_anthropic_model_thinking_part_redacted_stream.yaml",
)


def chunk_stream(name: str) -> bytes:
    return sse_body(chunk_lines(fixture_path("anthropic", name)), named=True)


def cassette_stream(name: str) -> str:
    (body,) = cassette_sse_bodies(fixture_path("anthropic", name))
    return body


def payloads(name: str) -> list[dict]:
    return [orjson.loads(line) for line in chunk_lines(fixture_path("anthropic", name))]


def deltas_of(events: list[dict], key: str, index: int) -> str:
    return "".join(
        e["delta"][key]
        for e in events
        if e["type"] == "content_block_delta" and e["index"] == index and key in e["delta"]
    )


def owned(data: dict, target: Target = TARGET) -> Continuity:
    return target.continuity(data)


# -- stream decoding -----------------------------------------------------------------------------


def test_thinking_stream_with_signature() -> None:
    events = feed(ADAPTER.stream_decoder(TARGET), chunk_stream("anthropic-clear-thinking.1.chunks.txt"))
    turn = fold(events)
    recorded = payloads("anthropic-clear-thinking.1.chunks.txt")
    signature = next(
        e["delta"]["signature"] for e in recorded if e.get("delta", {}).get("type") == "signature_delta"
    )

    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    reasoning, text = turn.blocks
    assert reasoning.text == deltas_of(recorded, "thinking", 0)
    assert reasoning.text == "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    assert reasoning.meta == Continuity(
        "claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": signature}
    )
    assert signature.startswith("EvQBCkYICxgCKkAxhD4NUKFzudtZ6Nzb")
    assert text == Text("925 ÷ 5 = 185")
    assert turn.stop_reason is StopReason.END_TURN
    assert turn.usage == Usage(input_tokens=69, output_tokens=53)
    assert turn.response_id == "msg_01Y6V41gqPaKWEw7iPouH7iW"
    assert turn.model == "claude-sonnet-4-5-20250929"


def test_event_sequence_shape() -> None:
    events = feed(ADAPTER.stream_decoder(TARGET), chunk_stream("anthropic-clear-thinking.1.chunks.txt"))
    assert type(events[0]) is MessageStart
    assert [type(e) for e in events[-2:]] == [UsageUpdate, Finish]
    starts = [(e.index, e.kind.value) for e in events if type(e) is BlockStart]
    assert starts == [(0, "reasoning"), (1, "text")]
    stops = [e for e in events if type(e) is BlockStop]
    assert [s.index for s in stops] == [0, 1]
    assert stops[1].meta is None
    # the recorded empty thinking_delta is not forwarded
    assert all(e.text for e in events if type(e) is BlockDelta)


def test_padded_stream_with_thinking_tokens() -> None:
    name = "anthropic-claude-sonnet-5-reasoning-summarized.chunks.txt"
    turn = fold(feed(ADAPTER.stream_decoder(TARGET), chunk_stream(name)))
    recorded = payloads(name)
    reasoning, text = turn.blocks
    assert reasoning.text == deltas_of(recorded, "thinking", 0)
    assert reasoning.text.startswith("I'm working through the Euclidean algorithm")
    assert text.text == deltas_of(recorded, "text", 1)
    assert text.text.endswith("- 462 = 21 × 22 ✓")
    assert reasoning.meta.data["signature"].startswith("EsECCokBCBAYAipA9i3HF1aHpQITkdN8")
    assert turn.usage == Usage(input_tokens=47, output_tokens=373, reasoning_tokens=62)
    assert turn.model == "claude-sonnet-5"


def test_tool_use_without_arguments() -> None:
    turn = fold(feed(ADAPTER.stream_decoder(TARGET), chunk_stream("anthropic-tool-no-args.chunks.txt")))
    assert turn.blocks == [
        Text("I'll update the issue list for you."),
        ToolCall("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", "{}"),
    ]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=565, output_tokens=48)


def test_redacted_thinking_stream() -> None:
    body = cassette_stream("test_anthropic_model_thinking_part_redacted_stream.yaml")
    recorded = [
        p["content_block"]["data"]
        for p in sse_data_payloads(body)
        if p["type"] == "content_block_start" and p["content_block"]["type"] == "redacted_thinking"
    ]
    turn = fold(feed(ADAPTER.stream_decoder(TARGET), body.encode()))
    assert len(recorded) == 2
    assert [type(b) for b in turn.blocks] == [Reasoning, Reasoning, Text]
    for block, data in zip(turn.blocks[:2], recorded, strict=True):
        assert block.text == ""
        assert block.meta == owned({"redacted": data})
    assert turn.blocks[0].meta.data["redacted"].startswith("EqkECkYIBxgCKkA8AZ4noDfV5VcOJe")
    assert turn.blocks[2].text.startswith("I notice that you've sent what appears to be some")
    assert turn.blocks[2].text.endswith("How can I assist you today with a legitimate task or question?")
    assert turn.usage == Usage(input_tokens=92, output_tokens=189)


def test_thinking_cassette_stream() -> None:
    body = cassette_stream("test_anthropic_model_thinking_part_stream.yaml")
    recorded = sse_data_payloads(body)
    turn = fold(feed(ADAPTER.stream_decoder(TARGET), body.encode()))
    reasoning, text = turn.blocks
    assert reasoning.text == deltas_of(recorded, "thinking", 0)
    assert reasoning.text.startswith("This is a straightforward question about pedestrian safety.")
    assert reasoning.meta.data["signature"] == deltas_of(recorded, "signature", 0)
    assert reasoning.meta.data["signature"].startswith("EvMCCkYICxgCKkCHP2cSuEdcJK/0rF")
    assert text.text == deltas_of(recorded, "text", 1)
    assert text.text.endswith("Always prioritize safety over speed when crossing streets.")
    assert turn.usage == Usage(input_tokens=43, output_tokens=282)
    assert turn.model == "claude-sonnet-4-20250514"


@pytest.mark.parametrize("size", [1, 7, 13, 64])
@pytest.mark.parametrize("name", CHUNK_FILES + STREAM_CASSETTES)
def test_chunk_boundaries_do_not_change_events(name: str, size: int) -> None:
    body = cassette_stream(name).encode() if name.endswith(".yaml") else chunk_stream(name)
    whole = feed(ADAPTER.stream_decoder(TARGET), body)
    assert type(whole[-1]) is Finish and not stream_errors(whole)
    assert feed(ADAPTER.stream_decoder(TARGET), body, size) == whole


def test_unnamed_events_decode_the_same() -> None:
    lines = chunk_lines(fixture_path("anthropic", "anthropic-tool-no-args.chunks.txt"))
    named = feed(ADAPTER.stream_decoder(TARGET), sse_body(lines, named=True))
    assert feed(ADAPTER.stream_decoder(TARGET), sse_body(lines, named=False)) == named


def test_truncated_stream_reports_error() -> None:
    lines = chunk_lines(fixture_path("anthropic", "anthropic-clear-thinking.1.chunks.txt"))
    events = feed(ADAPTER.stream_decoder(TARGET), sse_body(lines[:-4], named=True), 7)
    errors = stream_errors(events)
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].error.category is ErrorCategory.CONNECTION
    assert not any(type(e) is Finish for e in events)
    turn = fold(events)
    assert turn.stop_reason is StopReason.ERROR
    assert turn.blocks[1].text == "925 ÷ 5 "


@pytest.mark.parametrize(
    ("error_type", "category"),
    [
        ("overloaded_error", ErrorCategory.OVERLOADED),
        ("api_error", ErrorCategory.SERVER),
        ("rate_limit_error", ErrorCategory.RATE_LIMIT),
    ],
)
def test_mid_stream_error_event(error_type: str, category: ErrorCategory) -> None:
    lines = chunk_lines(fixture_path("anthropic", "anthropic-tool-no-args.chunks.txt"))
    error = orjson.dumps({"type": "error", "error": {"type": error_type, "message": "Overloaded"}}).decode()
    body = sse_body(lines[:4] + [error] + lines[4:], named=True)
    events = feed(ADAPTER.stream_decoder(TARGET), body, 7)
    errors = stream_errors(events)
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].error.category is category
    assert errors[0].error.message == "Overloaded"
    assert errors[0].error.type == error_type
    assert fold(events).blocks == [Text("I'll update the issue list for you.")]


def test_unsupported_block_is_a_protocol_error() -> None:
    lines = chunk_lines(fixture_path("anthropic", "anthropic-tool-no-args.chunks.txt"))
    block = {"type": "mystery_block", "id": "x_1"}
    odd = orjson.dumps({"type": "content_block_start", "index": 2, "content_block": block}).decode()
    events = feed(ADAPTER.stream_decoder(TARGET), sse_body(lines[:-2] + [odd] + lines[-2:], named=True))
    errors = stream_errors(events)
    assert len(errors) == 1 and errors[0].error.category is ErrorCategory.PROTOCOL
    assert "mystery_block" in errors[0].error.message
    assert not any(type(e) is Finish for e in events)


# -- non-streaming bodies -------------------------------------------------------------------------


def test_decode_response_thinking_then_tool_use() -> None:
    body = fixture_path("anthropic", "issue-13430-thinking-tool-call.json").read_bytes()
    recorded = orjson.loads(body)["content"]
    events = ADAPTER.decode_response(body, TARGET)
    turn = fold(events)
    assert turn.blocks == [
        Reasoning(
            "The user wants me to call checkSandboxErrors immediately.",
            owned({"signature": recorded[0]["signature"]}),
        ),
        ToolCall("toolu_017R7ACrx7NF7sLDDtvdQ1u9", "checkSandboxErrors", "{}"),
    ]
    assert recorded[0]["signature"].startswith("Eq4CCpIBCBIYAipAM+SGYGx7V1aPBT2LXi5M")
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=599, output_tokens=59, reasoning_tokens=18)
    assert type(events[0]) is MessageStart and [type(e) for e in events[-2:]] == [UsageUpdate, Finish]


def test_decode_response_matches_stream_shape() -> None:
    body = fixture_path("anthropic", "anthropic-clear-thinking.1.json").read_bytes()
    turn = fold(ADAPTER.decode_response(body, TARGET))
    signature = orjson.loads(body)["content"][0]["signature"]
    assert turn.blocks == [
        Reasoning("925 divided by 5 = 185", owned({"signature": signature})),
        Text("925 ÷ 5 = 185"),
    ]
    assert turn.usage == Usage(input_tokens=69, output_tokens=33)
    assert turn.response_id == "msg_01XrsJCi8CQoLcnnWdY8RsJz"


def test_decode_response_opus_usage() -> None:
    body = fixture_path("anthropic", "anthropic-claude-opus-5-reasoning-high.1.json").read_bytes()
    turn = fold(ADAPTER.decode_response(body, TARGET))
    assert [type(b) for b in turn.blocks] == [Reasoning, Text]
    assert turn.blocks[1].text.startswith("## Step 1: Set up the problem")
    assert turn.usage == Usage(input_tokens=51, output_tokens=1699, reasoning_tokens=139)


def test_decode_response_cache_tokens_count_as_input() -> None:
    body = orjson.loads(fixture_path("anthropic", "anthropic-clear-thinking.1.json").read_bytes())
    body["usage"].update(input_tokens=10, cache_read_input_tokens=100, cache_creation_input_tokens=20)
    turn = fold(ADAPTER.decode_response(orjson.dumps(body), TARGET))
    assert turn.usage == Usage(
        input_tokens=130, output_tokens=33, cache_read_tokens=100, cache_write_tokens=20
    )


def test_cassette_thinking_with_tool_arguments() -> None:
    interactions = cassette(fixture_path("anthropic", "test_anthropic_extended_thinking_with_tool_use.yaml"))
    for interaction in interactions:
        recorded = interaction["response"]["parsed_body"]
        turn = fold(ADAPTER.decode_response(orjson.dumps(recorded), TARGET))
        assert len(turn.blocks) == len(recorded["content"])
        for block, wire in zip(turn.blocks, recorded["content"], strict=True):
            if wire["type"] == "thinking":
                assert block == Reasoning(wire["thinking"], owned({"signature": wire["signature"]}))
            elif wire["type"] == "text":
                assert block == Text(wire["text"])
            else:
                assert (block.id, block.name) == (wire["id"], wire["name"])
                assert orjson.loads(block.arguments) == wire["input"]
        expected = StopReason.TOOL_CALLS if recorded["stop_reason"] == "tool_use" else StopReason.END_TURN
        assert turn.stop_reason is expected
    first = fold(ADAPTER.decode_response(orjson.dumps(interactions[0]["response"]["parsed_body"]), TARGET))
    assert orjson.loads(first.blocks[2].arguments) == {
        "age": 31,
        "email": "sarah.chen.92@gmail.com",
        "name": "Sarah Chen",
    }


def test_decode_response_rejects_non_message() -> None:
    body = fixture_path("anthropic", "anthropic-issue-21832-unexpected-tool-use-id.json").read_bytes()
    events = ADAPTER.decode_response(body, TARGET)
    assert len(events) == 1 and events[0].error.category is ErrorCategory.PROTOCOL


# -- request encoding -----------------------------------------------------------------------------

PNG = "data:image/png;base64,iVBORw0KGgo="
SIGNED = Reasoning("Let me look up the weather.", owned({"signature": "sig-abc"}))
REDACTED = Reasoning("", owned({"redacted": "opaque-data"}))


def conversation(**overrides) -> Request:
    fields = {
        "model": "smart",
        "system": "Be brief.",
        "messages": (
            Message(
                Role.USER, (Text("Weather in Paris and Rome?"), Image(PNG), Image("https://img.test/a.jpg"))
            ),
            Message(
                Role.ASSISTANT,
                (
                    SIGNED,
                    REDACTED,
                    Text("Checking."),
                    ToolCall("toolu_a", "get_weather", '{"city": "Paris"}'),
                    ToolCall("toolu_b", "get_weather", '{"city": "Rome"}'),
                ),
            ),
            # the user side of a turn as repair hands it to this target (merge_user_turns)
            Message(
                Role.TOOL,
                (
                    ToolResult("toolu_a", "18C"),
                    ToolResult("toolu_b", "unavailable", is_error=True),
                    Text("Thanks!"),
                ),
            ),
        ),
        "tools": (
            ToolSpec(
                "get_weather",
                "Current weather",
                {"type": "object", "properties": {"city": {"type": "string"}}},
            ),
        ),
        "tool_choice": ToolChoice(ToolChoiceMode.AUTO),
        "stream": True,
        "temperature": 0.2,
        "stop": ("END",),
    }
    fields.update(overrides)
    return Request(**fields)


def encode(request: Request, target: Target = TARGET) -> tuple[str, dict, dict]:
    http = ADAPTER.encode_request(request, target, "sk-ant-test-key")
    return http.url, dict(http.headers), orjson.loads(http.body)


def test_encode_full_conversation_body() -> None:
    url, headers, body = encode(conversation())
    assert url == "https://api.anthropic.test/v1/messages"
    assert headers == {
        "x-api-key": "sk-ant-test-key",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris and Rome?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://img.test/a.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Let me look up the weather.", "signature": "sig-abc"},
                    {"type": "redacted_thinking", "data": "opaque-data"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Rome"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_b",
                        "content": "unavailable",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Thanks!"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "auto"},
        "temperature": 0.2,
        "stop_sequences": ["END"],
        "stream": True,
    }


def test_encode_thinking_budget_from_target() -> None:
    target = Target(
        "claude", "anthropic", "claude-sonnet-4-5", "https://api.anthropic.test", thinking_budget=4096
    )
    _, headers, body = encode(conversation(top_p=0.5), target)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert body["max_tokens"] == 4096 + 8192
    assert "temperature" not in body and "top_p" not in body
    _, _, body = encode(conversation(top_p=0.97), target)
    assert body["top_p"] == 0.97


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("medium", 4096), ("high", 16384)])
def test_encode_request_effort_overrides_target_budget(effort: str, budget: int) -> None:
    target = Target(
        "claude", "anthropic", "claude-sonnet-4-5", "https://api.anthropic.test", thinking_budget=2048
    )
    _, _, body = encode(conversation(reasoning_effort=effort), target)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}


def test_encode_effort_none_disables_thinking() -> None:
    target = Target(
        "claude", "anthropic", "claude-sonnet-4-5", "https://api.anthropic.test", thinking_budget=2048
    )
    _, headers, body = encode(conversation(reasoning_effort="none"), target)
    assert "thinking" not in body and "anthropic-beta" not in headers
    assert body["temperature"] == 0.2 and body["max_tokens"] == 8192


def test_encode_client_max_tokens_bounds_the_budget() -> None:
    target = Target(
        "claude", "anthropic", "claude-sonnet-4-5", "https://api.anthropic.test", thinking_budget=4096
    )
    _, _, body = encode(conversation(max_tokens=2000), target)
    assert body["max_tokens"] == 2000 and body["thinking"]["budget_tokens"] == 1999
    _, headers, body = encode(conversation(max_tokens=20000), target)
    assert body["max_tokens"] == 20000 and body["thinking"]["budget_tokens"] == 4096
    _, headers, body = encode(conversation(max_tokens=800), target)
    assert body["max_tokens"] == 800 and "thinking" not in body and "anthropic-beta" not in headers


def test_repair_merges_roles_and_puts_results_first_for_the_encoder() -> None:
    from gateway.repair import prepare

    request = conversation(
        messages=(
            Message(Role.USER, (Text("a"),)),
            Message(Role.USER, (Text("b"),)),
            Message(Role.ASSISTANT, (ToolCall("toolu_1", "f", ""),)),
            Message(Role.USER, (Text("interjection"),)),
            Message(Role.TOOL, (ToolResult("toolu_1", "", images=(Image(PNG),)),)),
        ),
        tool_choice=None,
    )
    with pytest.raises(EncodeError, match="two user messages in a row"):
        encode(request)  # the encoder maps messages one to one: merging is the repair's
    _, _, body = encode(prepare(request, TARGET, ADAPTER.capabilities).request)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        }
                    ],
                },
                {"type": "text", "text": "interjection"},
            ],
        },
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        (ToolChoice(ToolChoiceMode.REQUIRED), None, {"type": "any"}),
        (ToolChoice(ToolChoiceMode.NONE), None, {"type": "none"}),
        (ToolChoice(ToolChoiceMode.TOOL, "get_weather"), None, {"type": "tool", "name": "get_weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (ToolChoice(ToolChoiceMode.REQUIRED), False, {"type": "any", "disable_parallel_tool_use": True}),
    ],
)
def test_encode_tool_choice(choice: ToolChoice | None, parallel: bool | None, expected: dict) -> None:
    _, _, body = encode(conversation(tool_choice=choice, parallel_tool_calls=parallel))
    assert body["tool_choice"] == expected


@pytest.mark.parametrize(
    "meta",
    [
        None,
        Continuity("gpt", "gpt", "openai_responses", "claude-sonnet-4-5", {"signature": "x"}),
        Continuity("claude", "claude", "anthropic", "claude-opus-4", {"signature": "x"}),
        Continuity("other", "other", "anthropic", "claude-sonnet-4-5", {"signature": "x"}),
    ],
)
def test_encode_foreign_reasoning_is_an_error(meta: Continuity | None) -> None:
    request = conversation(
        messages=(
            Message(Role.USER, (Text("hi"),)),
            Message(Role.ASSISTANT, (Reasoning("t", meta), Text("x"))),
        )
    )
    with pytest.raises(EncodeError):
        ADAPTER.encode_request(request, TARGET, "k")


@pytest.mark.parametrize(
    "message",
    [
        Message(Role.USER, (ToolCall("toolu_1", "f", "{}"),)),
        Message(Role.ASSISTANT, (ToolResult("toolu_1", "x"),)),
        Message(Role.ASSISTANT, (Image(PNG),)),
        Message(Role.ASSISTANT, (ToolCall("toolu_1", "f", "{not json"),)),
        Message(Role.USER, (Text(""),)),
        Message(Role.USER, (Image("data:image/png,notbase64"),)),
    ],
)
def test_encode_rejects_what_anthropic_cannot_express(message: Message) -> None:
    with pytest.raises(EncodeError):
        ADAPTER.encode_request(conversation(messages=(message,)), TARGET, "k")


def test_encode_replays_recorded_thinking_turn() -> None:
    """Decode a recorded answer, send it back, and compare with the request the real client sent."""
    interactions = cassette(fixture_path("anthropic", "test_anthropic_extended_thinking_with_tool_use.yaml"))
    recorded = interactions[3]["request"]["parsed_body"]
    target = Target(
        "claude", "anthropic", "claude-sonnet-4-0", "https://api.anthropic.com", thinking_budget=10000
    )
    answer = fold(ADAPTER.decode_response(orjson.dumps(interactions[2]["response"]["parsed_body"]), target))
    tool = recorded["tools"][0]
    request = Request(
        model="smart",
        messages=(
            Message(Role.USER, (Text(recorded["messages"][0]["content"][0]["text"]),)),
            answer.message(),
            Message(Role.USER, (Text(recorded["messages"][2]["content"][0]["text"]),)),
        ),
        tools=(ToolSpec(tool["name"], tool["description"], tool["input_schema"]),),
        tool_choice=ToolChoice(ToolChoiceMode.AUTO),
        max_tokens=recorded["max_tokens"],
    )
    http = ADAPTER.encode_request(request, target, "k")
    body = orjson.loads(http.body)
    for key in ("model", "max_tokens", "messages", "thinking", "tool_choice", "tools", "stream"):
        assert body[key] == recorded[key], key


# -- errors ---------------------------------------------------------------------------------------


def error_body(message: str, error_type: str = "invalid_request_error") -> bytes:
    return orjson.dumps(
        {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_1"}
    )


def test_classify_recorded_pairing_error() -> None:
    body = fixture_path("anthropic", "anthropic-issue-21832-unexpected-tool-use-id.json").read_bytes()
    error = ADAPTER.classify_error(400, {}, body)
    assert error.category is ErrorCategory.PAIRING
    assert error.message == orjson.loads(body)["error"]["message"]
    assert error.message.startswith(
        "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: T1."
    )
    assert (error.status, error.type, error.retryable) == (400, "invalid_request_error", False)


@pytest.mark.parametrize(
    ("message", "category"),
    [
        (
            (
                "messages.22: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01Hq, toolu_01SJ. "
                "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
            ),
            ErrorCategory.PAIRING,
        ),
        ("messages.1.content.1: `tool_use` ids must be unique", ErrorCategory.PAIRING),
        ("messages.1.content.0: Invalid `signature` in `thinking` block", ErrorCategory.CONTINUITY),
        (
            (
                "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is "
                "enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
                "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid "
                "this requirement, disable `thinking`."
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            (
                "messages.51.content.0: If an assistant message contains any thinking blocks, the first block must be thinking "
                "or redacted_thinking. Found text."
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            (
                "messages.5.content.3: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
                "modified. These blocks must remain as they were in the original response."
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            "messages.5.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
            ErrorCategory.INVALID_REQUEST,
        ),
        ("tools: Tool names must be unique.", ErrorCategory.INVALID_REQUEST),
    ],
)
def test_classify_known_400s(message: str, category: ErrorCategory) -> None:
    assert ADAPTER.classify_error(400, {}, error_body(message)).category is category


def test_classify_overloaded_529() -> None:
    error = ADAPTER.classify_error(529, {}, error_body("Overloaded", "overloaded_error"))
    assert error.category is ErrorCategory.OVERLOADED and error.retryable and error.status == 529


def test_classify_rate_limit_with_retry_after() -> None:
    error = ADAPTER.classify_error(
        429, {"retry-after": "12"}, error_body("Number of request tokens has exceeded", "rate_limit_error")
    )
    assert error.category is ErrorCategory.RATE_LIMIT
    assert error.retry_after == 12.0 and error.retryable


@pytest.mark.parametrize(
    ("status", "body", "category"),
    [
        (500, error_body("Internal server error", "api_error"), ErrorCategory.SERVER),
        (401, error_body("invalid x-api-key", "authentication_error"), ErrorCategory.AUTH),
        (413, error_body("Request exceeds the maximum size", "request_too_large"), ErrorCategory.TOO_LARGE),
        (502, b"<html>Bad Gateway</html>", ErrorCategory.SERVER),
    ],
)
def test_classify_by_type_and_status(status: int, body: bytes, category: ErrorCategory) -> None:
    assert ADAPTER.classify_error(status, {}, body).category is category


def test_classify_never_keeps_an_api_key() -> None:
    key = "sk-ant-api03-SECRETSECRETSECRET_abc-123"
    error = ADAPTER.classify_error(401, {}, error_body(f"invalid x-api-key {key}", "authentication_error"))
    assert key not in error.message and "SECRET" not in error.message
    raw = ADAPTER.classify_error(502, {}, f"proxy error for key {key}".encode())
    assert "SECRET" not in raw.message


def test_adapter_surface() -> None:
    assert ADAPTER.kind == "anthropic" == anthropic.KIND
    assert ADAPTER.capabilities.signed_thinking_for_tool_loop and ADAPTER.capabilities.reasoning_replay
    assert isinstance(ADAPTER.stream_decoder(TARGET), anthropic.AnthropicStreamDecoder)
    assert isinstance(feed(ADAPTER.stream_decoder(TARGET), b"")[0], StreamError)


def test_temperature_wins_over_top_p_which_claude_refuses_together():
    hi = (Message(Role.USER, (Text("hi"),)),)
    _, _, both = encode(Request("m", hi, temperature=0.3, top_p=0.9))
    assert both["temperature"] == 0.3 and "top_p" not in both
    _, _, only_top_p = encode(Request("m", hi, top_p=0.9))
    assert only_top_p["top_p"] == 0.9 and "temperature" not in only_top_p
