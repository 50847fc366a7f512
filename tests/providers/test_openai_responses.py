"""OpenAI Responses adapter: decoding against recorded streams/bodies, request encoding, error
classification."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from gateway.providers.base import EncodeError
from gateway.providers.openai_responses import adapter as openai_responses
from gateway.providers.openai_responses.adapter import ADAPTER
from gateway.transcript.assembler import fold
from gateway.transcript.events import BlockStart, BlockStop, ErrorCategory, Finish, MessageStart, UsageUpdate
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
    provider="oai", kind="openai_responses", model="gpt-5", base_url="https://api.openai.test/v1/"
)
ENCRYPTED = "openai-reasoning-encrypted-content.1.chunks.txt"


def lines_of(name: str) -> list[str]:
    return chunk_lines(fixture_path("openai-responses", name))


def recorded_streams(name: str = ENCRYPTED) -> list[list[str]]:
    """The recording holds several HTTP responses back to back; each starts at response.created."""
    streams: list[list[str]] = []
    for line in lines_of(name):
        if orjson.loads(line)["type"] == "response.created":
            streams.append([])
        streams[-1].append(line)
    return streams


def decode(lines: list[str], size: int | None = None) -> list:
    return feed(ADAPTER.stream_decoder(TARGET), sse_body(lines, named=False), size)


def items_done(lines: list[str]) -> list[dict]:
    return [e["item"] for e in map(orjson.loads, lines) if e["type"] == "response.output_item.done"]


def items_added(lines: list[str]) -> list[dict]:
    return [e["item"] for e in map(orjson.loads, lines) if e["type"] == "response.output_item.added"]


# -- stream decoding -----------------------------------------------------------------------------


def test_reasoning_then_function_call_stream() -> None:
    first = recorded_streams()[0]
    reasoning_done, call_done = items_done(first)
    reasoning_added = items_added(first)[0]
    turn = fold(decode(first))

    assert [type(b) for b in turn.blocks] == [Reasoning, ToolCall]
    reasoning, call = turn.blocks
    summary = (
        "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result"
        " by 3, and finally multiply that by 10, reporting the final product."
    )
    assert reasoning.text == summary
    assert reasoning.meta == Continuity(
        "oai",
        "oai",
        "openai_responses",
        "gpt-5",
        {
            "id": "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9",
            "encrypted_content": reasoning_done["encrypted_content"],
            "summary": [summary],
        },
    )
    # the added item carries a different, incomplete token: only output_item.done counts
    assert reasoning_added["encrypted_content"] != reasoning_done["encrypted_content"]
    assert reasoning.meta.data["encrypted_content"].startswith("gAAAAABpPDIVOKrsHNZ0GwsoEKA_IGfuJ5f8Ma_6")
    assert call.id == "call_AB6AaRZ1FYZB2RwS6A5vbdqn" and call.name == "calculator"
    assert (
        orjson.loads(call.arguments) == {"a": 12, "b": 7, "op": "add"} == orjson.loads(call_done["arguments"])
    )
    assert call.meta.data == {"item_id": "fc_01830d662ab3856501693c32151234819091cfca267e98cc5f"}
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=134, output_tokens=28)
    assert turn.response_id == "resp_01830d662ab3856501693c321345c88190b0de00f3b9975691"
    assert turn.model == "gpt-5.1-codex-max"


def test_three_function_call_steps_and_final_text() -> None:
    streams = recorded_streams()
    assert len(streams) == 4
    calls = [fold(decode(stream)) for stream in streams[:3]]
    assert [(t.blocks[-1].id, orjson.loads(t.blocks[-1].arguments)) for t in calls] == [
        ("call_AB6AaRZ1FYZB2RwS6A5vbdqn", {"a": 12, "b": 7, "op": "add"}),
        ("call_Q6pW65MUgW9vF59BmItYGos3", {"a": 19, "b": 3, "op": "multiply"}),
        ("call_Zl5vIMnD7dVAjgU6FkhmiCZh", {"a": 57, "b": 10, "op": "multiply"}),
    ]
    assert [t.usage.input_tokens for t in calls] == [134, 221, 260]
    assert all(t.stop_reason is StopReason.TOOL_CALLS for t in calls)
    final = fold(decode(streams[3]))
    assert final.blocks == [Text("The final result is **570**.")]
    assert final.stop_reason is StopReason.END_TURN
    assert final.usage == Usage(input_tokens=299, output_tokens=12)


def test_events_after_the_terminal_event_are_ignored() -> None:
    assert decode(lines_of(ENCRYPTED)) == decode(recorded_streams()[0])


def test_event_sequence_shape() -> None:
    events = decode(recorded_streams()[0])
    assert type(events[0]) is MessageStart
    assert [type(e) for e in events[-2:]] == [UsageUpdate, Finish]
    assert [(e.index, e.kind.value, e.id) for e in events if type(e) is BlockStart] == [
        # a reasoning block names its item as soon as it is added (Responses clients need the id
        # before the item is done)
        (0, "reasoning", "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"),
        (1, "tool_call", "call_AB6AaRZ1FYZB2RwS6A5vbdqn"),
    ]
    assert [e.index for e in events if type(e) is BlockStop] == [0, 1]


def test_tool_call_with_obfuscated_deltas_and_cache_write_usage() -> None:
    lines = lines_of("issue-19493-gpt-5.1-tool-call.chunks.txt")
    turn = fold(decode(lines))
    assert turn.blocks == [
        ToolCall(
            "call_2FQdm3Br7Qb35YUBSkDR7kue",
            "get_weather",
            '{"city":"Beijing"}',
            TARGET.continuity({"item_id": "fc_0775572d10a16b66006a8d8528e8a887d2a32ef76463d40c98"}),
        )
    ]
    assert turn.usage == Usage(input_tokens=45, output_tokens=25)
    assert turn.stop_reason is StopReason.TOOL_CALLS


def test_streaming_cassette_reasoning_without_summary() -> None:
    (body,) = cassette_sse_bodies(
        fixture_path("openai-responses", "test_openai_responses_streaming_usage.yaml")
    )
    done = [p["item"] for p in sse_data_payloads(body) if p["type"] == "response.output_item.done"]
    turn = fold(feed(ADAPTER.stream_decoder(TARGET), body.encode(), 7))
    reasoning, call = turn.blocks
    assert reasoning.text == ""
    assert reasoning.meta.data == {
        "id": done[0]["id"],
        "encrypted_content": done[0]["encrypted_content"],
        "summary": [],
    }
    assert len(reasoning.meta.data["encrypted_content"]) == 3896
    assert (call.id, call.name, orjson.loads(call.arguments)) == (
        "call_CWXgs68YprAjp6t0371hiPOI",
        "final_result",
        {"result": 6666},
    )
    assert turn.usage == Usage(input_tokens=53, output_tokens=469, reasoning_tokens=448)


@pytest.mark.parametrize("size", [1, 7, 13, 64])
@pytest.mark.parametrize(
    "name",
    [
        ENCRYPTED,
        "issue-19493-gpt-5.1-tool-call.chunks.txt",
        "openai-error.1.chunks.txt",
        "openai-response-failed-only.1.chunks.txt",
    ],
)
def test_chunk_boundaries_do_not_change_events(name: str, size: int) -> None:
    lines = recorded_streams(name)[-1]
    assert decode(lines, size) == decode(lines)


def test_error_stream_is_quota() -> None:
    events = decode(lines_of("openai-error.1.chunks.txt"), 7)
    errors = stream_errors(events)
    assert len(errors) == 1 and events[-1] is errors[0]
    error = errors[0].error
    assert error.category is ErrorCategory.QUOTA and not error.retryable
    assert error.code == "insufficient_quota"
    assert error.message.startswith(
        "You exceeded your current quota, please check your plan and billing details."
    )
    assert (
        type(events[0]) is MessageStart
        and events[0].response_id == "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424"
    )
    assert fold(events).stop_reason is StopReason.ERROR


def test_response_failed_only_is_rate_limit() -> None:
    events = decode(lines_of("openai-response-failed-only.1.chunks.txt"))
    errors = stream_errors(events)
    assert len(errors) == 1
    assert errors[0].error.category is ErrorCategory.RATE_LIMIT and errors[0].error.retryable
    assert (
        errors[0].error.message
        == "Request too large for gpt-4o-mini in organization on tokens per min (TPM): Limit 30000, Requested 35364."
    )
    assert not any(type(e) is Finish for e in events)


def test_truncated_stream_reports_error() -> None:
    events = decode(recorded_streams()[0][:-3], 7)
    errors = stream_errors(events)
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].error.category is ErrorCategory.CONNECTION
    turn = fold(events)
    assert turn.stop_reason is StopReason.ERROR
    assert turn.blocks[1].arguments == '{"a":12,"b":7,"op":"add"}'


def synthetic(*events: dict) -> list[str]:
    return [orjson.dumps(e).decode() for e in events]


CREATED = {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}


def test_multi_part_summary_joins_with_blank_line() -> None:
    item = {"id": "rs_1", "type": "reasoning", "summary": []}
    done = {
        **item,
        "encrypted_content": "enc",
        "summary": [{"type": "summary_text", "text": "One"}, {"type": "summary_text", "text": "Two"}],
    }
    lines = synthetic(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "One",
        },
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 1,
            "delta": "Two",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"status": "completed", "usage": None}},
    )
    turn = fold(decode(lines))
    assert turn.blocks == [
        Reasoning(
            "One\n\nTwo",
            TARGET.continuity({"id": "rs_1", "encrypted_content": "enc", "summary": ["One", "Two"]}),
        )
    ]
    assert turn.stop_reason is StopReason.END_TURN


def test_incomplete_response_closes_open_blocks() -> None:
    lines = synthetic(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "content": []},
        },
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Partial"},
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 5, "output_tokens": 16},
            },
        },
    )
    events = decode(lines)
    assert [type(e) for e in events[-3:]] == [BlockStop, UsageUpdate, Finish]
    turn = fold(events)
    assert turn.blocks == [Text("Partial")]
    assert turn.stop_reason is StopReason.MAX_TOKENS
    assert turn.usage == Usage(input_tokens=5, output_tokens=16)


def test_unsupported_output_item_is_a_protocol_error() -> None:
    lines = synthetic(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "ig_1", "type": "image_generation_call"},
        },
    )
    errors = stream_errors(decode(lines))
    assert len(errors) == 1 and errors[0].error.category is ErrorCategory.PROTOCOL
    assert "image_generation_call" in errors[0].error.message


# -- non-streaming bodies -------------------------------------------------------------------------


def test_decode_response_reasoning_and_message() -> None:
    body = fixture_path("openai-responses", "openai-reasoning-encrypted-content.1.json").read_bytes()
    reasoning_item = orjson.loads(body)["output"][0]
    events = ADAPTER.decode_response(body, TARGET)
    turn = fold(events)
    summary = reasoning_item["summary"][0]["text"]
    assert summary.startswith("**Reporting final result**\n\nThe tool returned 570")
    assert turn.blocks == [
        Reasoning(
            summary,
            TARGET.continuity(
                {
                    "id": reasoning_item["id"],
                    "encrypted_content": reasoning_item["encrypted_content"],
                    "summary": [summary],
                }
            ),
        ),
        Text("12 + 7 = 19\n19 × 3 = 57\n57 × 10 = 570\n\nFinal result: 570"),
    ]
    assert reasoning_item["id"] == "rs_0f35ed53160b395301693cc95817ac8190b978637daea4987e"
    assert turn.stop_reason is StopReason.END_TURN
    assert turn.usage == Usage(input_tokens=865, output_tokens=163, reasoning_tokens=128)
    assert type(events[0]) is MessageStart and [type(e) for e in events[-2:]] == [UsageUpdate, Finish]


def test_decode_response_multi_summary_and_cached_tokens() -> None:
    interactions = cassette(
        fixture_path("openai-responses", "test_openai_responses_thinking_with_tool_calls.yaml")
    )
    first = interactions[0]["response"]["parsed_body"]
    turn = fold(ADAPTER.decode_response(orjson.dumps(first), TARGET))
    reasoning, call = turn.blocks
    summaries = [part["text"] for part in first["output"][0]["summary"]]
    assert len(summaries) == 5
    assert reasoning.text == "\n\n".join(summaries)
    assert reasoning.meta.data["summary"] == summaries
    assert (call.id, call.name) == ("call_gL7JE6GDeGGsFubqO2XGytyO", "update_plan")
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert turn.usage == Usage(input_tokens=124, output_tokens=1926, reasoning_tokens=1792)
    second = fold(ADAPTER.decode_response(orjson.dumps(interactions[1]["response"]["parsed_body"]), TARGET))
    assert second.usage == Usage(input_tokens=2087, output_tokens=124, cache_read_tokens=2048)
    assert second.blocks[0].text.startswith("Softly old fountains illumine alleys")


def test_decode_response_failed_body() -> None:
    body = {
        "id": "resp_x",
        "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
        "output": [],
    }
    events = ADAPTER.decode_response(orjson.dumps(body), TARGET)
    assert stream_errors(events)[0].error.category is ErrorCategory.SERVER


def test_decode_response_rejects_error_bodies() -> None:
    body = fixture_path("openai-responses", "openai-error.1.json").read_bytes()
    events = ADAPTER.decode_response(body, TARGET)
    assert len(events) == 1 and events[0].error.category is ErrorCategory.PROTOCOL


# -- request encoding -----------------------------------------------------------------------------

PNG = "data:image/png;base64,iVBORw0KGgo="
RS = Reasoning(
    "Thinking about weather.",
    TARGET.continuity({"id": "rs_1", "encrypted_content": "enc-1", "summary": ["Thinking about weather."]}),
)


def fc(call_id: str, item_id: str, target: Target = TARGET) -> ToolCall:
    return ToolCall(call_id, "get_weather", '{"city":"Paris"}', target.continuity({"item_id": item_id}))


def conversation(*assistant_blocks, **overrides) -> Request:
    fields = {
        "model": "smart",
        "system": "Be brief.",
        "messages": (
            Message(Role.USER, (Text("Weather?"), Image(PNG, "low"))),
            Message(Role.ASSISTANT, assistant_blocks or (RS, Text("Checking."), fc("call_1", "fc_1"))),
            Message(Role.TOOL, (ToolResult("call_1", "18C"),)),
        ),
        "tools": (
            ToolSpec(
                "get_weather",
                "Current weather",
                {"type": "object", "properties": {"city": {"type": "string"}}},
            ),
        ),
        "stream": True,
    }
    fields.update(overrides)
    return Request(**fields)


def encode(request: Request, target: Target = TARGET) -> tuple[str, dict, dict]:
    http = ADAPTER.encode_request(request, target, "sk-test")
    return http.url, dict(http.headers), orjson.loads(http.body)


def test_encode_full_conversation_body() -> None:
    request = conversation(
        messages=(
            Message(Role.USER, (Text("Weather?"), Image(PNG, "low"))),
            Message(Role.ASSISTANT, (RS, fc("call_1", "fc_1"))),
            Message(Role.TOOL, (ToolResult("call_1", "18C"), ToolResult("call_2", "no data", is_error=True))),
            Message(Role.USER, (Text("Thanks"), Image("https://img.test/a.jpg"))),
            Message(Role.ASSISTANT, (Text("You're welcome."),)),
        ),
        tool_choice=ToolChoice(ToolChoiceMode.REQUIRED),
        parallel_tool_calls=False,
        max_tokens=500,
        temperature=0.3,
        top_p=0.9,
    )
    url, headers, body = encode(request)
    assert url == "https://api.openai.test/v1/responses"
    assert headers == {"Authorization": "Bearer sk-test", "content-type": "application/json"}
    assert body == {
        "model": "gpt-5",
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "instructions": "Be brief.",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather?"},
                    {"type": "input_image", "image_url": PNG, "detail": "low"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Thinking about weather."}],
                "encrypted_content": "enc-1",
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
                "id": "fc_1",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "no data"},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Thanks"},
                    {"type": "input_image", "image_url": "https://img.test/a.jpg", "detail": "auto"},
                ],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "You're welcome."}],
            },
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": 500,
        "stream": True,
    }, "gpt-5 is a reasoning model: temperature/top_p are not sent"


def input_calls(body: dict) -> list[dict]:
    return [item for item in body["input"] if item.get("type") == "function_call"]


def test_fc_id_sent_for_parallel_calls_after_their_reasoning() -> None:
    _, _, body = encode(conversation(RS, fc("call_1", "fc_1"), fc("call_2", "fc_2")))
    assert [c.get("id") for c in input_calls(body)] == ["fc_1", "fc_2"]


def test_fc_id_dropped_without_reasoning_item() -> None:
    _, _, body = encode(conversation(Text("Checking."), fc("call_1", "fc_1")))
    (call,) = input_calls(body)
    assert "id" not in call and call["call_id"] == "call_1"
    assert not [item for item in body["input"] if item.get("type") == "reasoning"]


def test_fc_id_dropped_when_text_separates_it_from_reasoning() -> None:
    _, _, body = encode(conversation())
    assert [item.get("type") for item in body["input"][1:4]] == ["reasoning", "message", "function_call"]
    assert "id" not in input_calls(body)[0]


def test_fc_id_dropped_when_call_meta_is_foreign() -> None:
    other = Target("oai2", "openai_responses", "gpt-5", "https://x")
    _, _, body = encode(conversation(RS, fc("call_1", "fc_1", other)))
    assert "id" not in input_calls(body)[0]


@pytest.mark.parametrize(
    "meta",
    [
        None,
        Continuity("claude", "claude", "anthropic", "gpt-5", {"signature": "x"}),
        Continuity("oai", "oai", "openai_responses", "gpt-5-mini", {"id": "rs_1"}),
    ],
)
def test_encode_foreign_reasoning_is_an_error(meta: Continuity | None) -> None:
    with pytest.raises(EncodeError):
        ADAPTER.encode_request(conversation(Reasoning("t", meta), fc("call_1", "fc_1")), TARGET, "k")


@pytest.mark.parametrize(
    "message",
    [
        Message(Role.USER, (ToolCall("call_1", "f", "{}"),)),
        Message(Role.USER, (Reasoning("t", RS.meta),)),
        Message(Role.ASSISTANT, (ToolResult("call_1", "x"),)),
        Message(Role.ASSISTANT, (Image(PNG),)),
    ],
)
def test_encode_rejects_misplaced_blocks(message: Message) -> None:
    with pytest.raises(EncodeError):
        ADAPTER.encode_request(conversation(messages=(message,)), TARGET, "k")


@pytest.mark.parametrize(
    ("target_effort", "request_effort", "expected"),
    [
        (None, None, None),
        ("low", None, {"effort": "low", "summary": "auto"}),
        ("low", "high", {"effort": "high", "summary": "auto"}),
        # gpt-5 cannot stop reasoning: its least, and no summary for a client that asked for none
        ("medium", "none", {"effort": "minimal"}),
        ("xhigh", None, {"effort": "high", "summary": "auto"}),
    ],
)
def test_encode_reasoning_effort(
    target_effort: str | None, request_effort: str | None, expected: dict | None
) -> None:
    target = Target("oai", "openai_responses", "gpt-5", "https://x", reasoning_effort=target_effort)
    _, _, body = encode(conversation(Text("x"), reasoning_effort=request_effort), target)
    assert body.get("reasoning") == expected


@pytest.mark.parametrize(
    ("model", "request_effort", "expected"),
    [
        ("gpt-5.1", "none", {"effort": "none"}),
        ("gpt-5.1", "minimal", {"effort": "low", "summary": "auto"}),
        ("gpt-5.2", "xhigh", {"effort": "xhigh", "summary": "auto"}),
        ("o3", "minimal", {"effort": "low", "summary": "auto"}),
        ("gpt-4.1", "high", None),  # not a reasoning model: no effort at all
    ],
)
def test_each_model_gets_an_effort_it_takes(model: str, request_effort: str, expected: dict | None) -> None:
    target = Target("oai", "openai_responses", model, "https://x")
    _, _, body = encode(conversation(Text("x"), reasoning_effort=request_effort), target)
    assert body.get("reasoning") == expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (ToolChoice(ToolChoiceMode.AUTO), "auto"),
        (ToolChoice(ToolChoiceMode.NONE), "none"),
        (ToolChoice(ToolChoiceMode.TOOL, "get_weather"), {"type": "function", "name": "get_weather"}),
    ],
)
def test_encode_tool_choice(choice: ToolChoice, expected: object) -> None:
    _, _, body = encode(conversation(tool_choice=choice))
    assert body["tool_choice"] == expected


def test_encode_tool_result_with_images_and_empty_arguments() -> None:
    request = conversation(
        messages=(
            Message(Role.ASSISTANT, (ToolCall("call_1", "snap", ""),)),
            Message(Role.TOOL, (ToolResult("call_1", "photo", images=(Image(PNG),)),)),
        ),
    )
    _, _, body = encode(request)
    assert body["input"] == [
        {"type": "function_call", "call_id": "call_1", "name": "snap", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "photo"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
            ],
        },
    ]


def test_encode_replays_recorded_turn() -> None:
    """Decode a recorded answer, send it back with its tool output, and compare the items with
    the request the real client sent next."""
    interactions = cassette(
        fixture_path("openai-responses", "test_openai_responses_thinking_with_tool_calls.yaml")
    )
    recorded = interactions[1]["request"]["parsed_body"]
    answer = fold(ADAPTER.decode_response(orjson.dumps(interactions[0]["response"]["parsed_body"]), TARGET))
    output = recorded["input"][3]
    request = Request(
        model="smart",
        system=recorded["instructions"],
        messages=(
            Message(Role.USER, (Text(recorded["input"][0]["content"]),)),
            answer.message(),
            Message(Role.TOOL, (ToolResult(output["call_id"], output["output"]),)),
        ),
        reasoning_effort="low",
    )
    body = orjson.loads(ADAPTER.encode_request(request, TARGET, "k").body)
    assert body["input"][1:] == recorded["input"][1:]
    assert body["input"][0] == {
        "role": "user",
        "content": [{"type": "input_text", "text": recorded["input"][0]["content"]}],
    }
    assert body["include"] == recorded["include"] and body["instructions"] == recorded["instructions"]


# -- errors ---------------------------------------------------------------------------------------


def error_body(
    message: str, etype: str = "invalid_request_error", code: str | None = None, param: str | None = "input"
) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": etype, "param": param, "code": code}})


def test_classify_recorded_quota_error() -> None:
    body = fixture_path("openai-responses", "openai-error.1.json").read_bytes()
    error = ADAPTER.classify_error(429, {"retry-after": "20"}, body)
    assert error.category is ErrorCategory.QUOTA and not error.retryable
    assert error.message == orjson.loads(body)["error"]["message"]
    assert (error.status, error.type, error.code) == (429, "insufficient_quota", "insufficient_quota")


@pytest.mark.parametrize(
    ("status", "message", "category"),
    [
        (
            400,
            "No tool call found for function call output with call_id call_uelf1234.",
            ErrorCategory.PAIRING,
        ),
        (400, "No tool output found for function call call_XXX.", ErrorCategory.PAIRING),
        (
            400,
            "Item 'fc_0a03abc' of type 'function_call' was provided without its required 'reasoning' item: 'rs_0a03abc'.",
            ErrorCategory.CONTINUITY,
        ),
        (
            400,
            "Item 'rs_123' of type 'reasoning' was provided without its required following item.",
            ErrorCategory.CONTINUITY,
        ),
        (
            404,
            (
                "Item with id 'rs_0496abc' not found. Items are not persisted when `store` is set to false. Try again with "
                "`store` set to true, or remove this item from your input."
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            400,
            (
                "The encrypted content for item rs_123 could not be verified. Reason: Encrypted content"
                " organization_id did not match the target organization."
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            400,
            "Duplicate item found with id tsc_0774. Remove duplicate items from your input and try again.",
            ErrorCategory.INVALID_REQUEST,
        ),
        (404, "The model `gpt-9` does not exist or you do not have access to it.", ErrorCategory.NOT_FOUND),
    ],
)
def test_classify_known_errors(status: int, message: str, category: ErrorCategory) -> None:
    assert ADAPTER.classify_error(status, {}, error_body(message)).category is category


def test_classify_invalid_encrypted_content_code() -> None:
    body = error_body("Encrypted content could not be decrypted or parsed.", code="invalid_encrypted_content")
    assert ADAPTER.classify_error(400, {}, body).category is ErrorCategory.CONTINUITY


def test_classify_rate_limit_with_retry_after() -> None:
    body = error_body(
        "Rate limit reached for gpt-5 on tokens per min.", "tokens", "rate_limit_exceeded", None
    )
    error = ADAPTER.classify_error(429, {"retry-after-ms": "1500", "retry-after": "2"}, body)
    assert error.category is ErrorCategory.RATE_LIMIT and error.retryable
    assert error.retry_after == 1.5


@pytest.mark.parametrize(
    ("status", "body", "category"),
    [
        (500, error_body("The server had an error.", "server_error", None, None), ErrorCategory.SERVER),
        (
            503,
            error_body("The server is overloaded.", "server_error", "server_is_overloaded", None),
            ErrorCategory.OVERLOADED,
        ),
        (529, b"overloaded", ErrorCategory.OVERLOADED),
        (
            401,
            error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key", None),
            ErrorCategory.AUTH,
        ),
    ],
)
def test_classify_by_code_and_status(status: int, body: bytes, category: ErrorCategory) -> None:
    assert ADAPTER.classify_error(status, {}, body).category is category


def test_classify_never_keeps_an_api_key() -> None:
    key = "sk-proj-SECRETsecret1234567890abcd"
    body = error_body(
        f"Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com.",
        code="invalid_api_key",
    )
    error = ADAPTER.classify_error(401, {}, body)
    assert error.category is ErrorCategory.AUTH
    assert "SECRET" not in error.message and key not in error.message


def test_adapter_surface() -> None:
    assert ADAPTER.kind == "openai_responses" == openai_responses.KIND
    assert ADAPTER.capabilities.reasoning_replay and ADAPTER.capabilities.tool_ids.max_len == 64
    assert (
        stream_errors(feed(ADAPTER.stream_decoder(TARGET), b""))[0].error.category is ErrorCategory.CONNECTION
    )


def test_reasoning_models_get_reasoning_and_no_sampling_and_others_the_reverse():
    request = Request(
        "m", (Message(Role.USER, (Text("hi"),)),), temperature=0.2, top_p=0.5, reasoning_effort="high"
    )
    plain = orjson.loads(ADAPTER.encode_request(request, replace(TARGET, model="gpt-4.1"), "k").body)
    assert (plain["temperature"], plain["top_p"]) == (0.2, 0.5)
    assert "reasoning" not in plain and "include" not in plain
    reasoning = orjson.loads(ADAPTER.encode_request(request, replace(TARGET, model="gpt-5.1"), "k").body)
    assert "temperature" not in reasoning and "top_p" not in reasoning
    assert reasoning["reasoning"] == {"effort": "high", "summary": "auto"}
    assert reasoning["include"] == ["reasoning.encrypted_content"]


def test_stop_sequences_cannot_be_expressed_and_say_so():
    request = Request("m", (Message(Role.USER, (Text("hi"),)),), stop=("END",))
    with pytest.raises(EncodeError, match="no stop sequences"):
        ADAPTER.encode_request(request, TARGET, "k")
