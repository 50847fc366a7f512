"""Canonical events -> the Anthropic Messages stream, and the Message JSON as its fold."""

from __future__ import annotations

import orjson
import pytest

from gateway.ingress.base import Inbound, Reply
from gateway.ingress.errors import ClientError, anthropic_error
from gateway.ingress.messages.codec import CODEC, Context
from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder
from gateway.ingress.messages.fold import fold, message_json
from gateway.transcript.assembler import fold as fold_turn
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Finish,
    MessageStart,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Continuity, Message, Request, Role, StopReason, Text, Usage
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"s" * 32)
REQUEST = Request("smart", (Message(Role.USER, (Text("x" * 400),)),))
ANTHROPIC = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": "SIG"})
REDACTED = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"redacted": "DATA"})
GEMINI = Continuity("gem", "gem", "gemini", "gemini-3-pro-preview", {})


def events(omit: bool = False) -> MessageEvents:
    return MessageEvents("msg_1", "smart", REQUEST, omit, SEALER)


def stream(canonical, omit: bool = False) -> list[dict]:
    encoder = MessagesStreamEncoder(events(omit))
    raw = encoder.start() + b"".join(encoder.event(e) or b"" for e in canonical) + encoder.finish()
    out = []
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        name, data = frame.split("\n")
        event = orjson.loads(data.removeprefix("data: "))
        assert name == "event: " + event["type"], "every event has its event: line"
        out.append(event)
    return out


def test_interleaved_blocks_go_out_one_at_a_time_in_start_order():
    canonical = [
        MessageStart(),
        BlockStart(0, BlockKind.TOOL_CALL, "call_A", "get_weather"),
        BlockStart(1, BlockKind.TOOL_CALL, "call_B", "get_time"),
        BlockDelta(1, '{"city":'),
        BlockDelta(0, '{"city":'),
        BlockDelta(1, '"Tokyo"}'),
        BlockStop(1),
        BlockDelta(0, '"Paris"}'),
        BlockStop(0),
        UsageUpdate(Usage(10, 5)),
        Finish(StopReason.TOOL_CALLS),
    ]
    out = stream(canonical)
    shape = [(e["type"], e.get("index")) for e in out]
    assert shape == [
        ("message_start", None),
        ("content_block_start", 0),
        ("content_block_delta", 0),
        ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_delta", 1),
        ("content_block_delta", 1),
        ("content_block_stop", 1),
        ("message_delta", None),
        ("message_stop", None),
    ]
    message = fold(out)
    assert [(b["id"], b["input"]) for b in message["content"]] == [
        ("call_A", {"city": "Paris"}),
        ("call_B", {"city": "Tokyo"}),
    ]
    assert message["stop_reason"] == "tool_use"


def test_thinking_signatures_raw_for_anthropic_sealed_for_others():
    canonical = [
        BlockStart(0, BlockKind.REASONING),
        BlockDelta(0, "mine"),
        BlockStop(0, ANTHROPIC),
        BlockStart(1, BlockKind.REASONING),
        BlockStop(1, REDACTED),
        BlockStart(2, BlockKind.REASONING),
        BlockDelta(2, "theirs"),
        BlockStop(2, GEMINI),
        BlockStart(3, BlockKind.REASONING),  # nothing to show, nothing to carry: no block
        BlockStop(3, None),
        BlockStart(4, BlockKind.TEXT),  # empty text: no block
        BlockStop(4, GEMINI),
        BlockStart(5, BlockKind.TEXT),
        BlockDelta(5, "done"),
        BlockStop(5),
        Finish(StopReason.END_TURN),
    ]
    content = fold(stream(canonical))["content"]
    assert content[0] == {"type": "thinking", "thinking": "mine", "signature": "SIG"}
    assert content[1] == {"type": "redacted_thinking", "data": "DATA"}
    assert content[2]["thinking"] == "theirs" and SEALER.unseal(content[2]["signature"]) == GEMINI
    assert content[3] == {"type": "text", "text": "done"}
    assert len(content) == 4


def test_display_omitted_keeps_the_signature_and_drops_the_text():
    canonical = [BlockStart(0, BlockKind.REASONING), BlockDelta(0, "secret"), BlockStop(0, ANTHROPIC)]
    out = stream(canonical, omit=True)
    assert not any(e.get("delta", {}).get("type") == "thinking_delta" for e in out)
    assert fold(out)["content"] == [{"type": "thinking", "thinking": "", "signature": "SIG"}]


@pytest.mark.parametrize(
    "finish,tool,expected",
    [
        (StopReason.END_TURN, True, "tool_use"),  # a tool block went out: the client must run it
        (StopReason.TOOL_CALLS, False, "end_turn"),
        (StopReason.MAX_TOKENS, True, "max_tokens"),
        (StopReason.STOP_SEQUENCE, False, "stop_sequence"),
        (StopReason.REFUSAL, False, "refusal"),
        (StopReason.CONTENT_FILTER, False, "refusal"),
        (StopReason.PAUSE_TURN, False, "pause_turn"),
    ],
)
def test_stop_reason_follows_what_was_emitted(finish, tool, expected):
    canonical = [BlockStart(0, BlockKind.TEXT), BlockDelta(0, "x"), BlockStop(0)]
    if tool:
        canonical += [BlockStart(1, BlockKind.TOOL_CALL, "call_A", "f"), BlockStop(1)]
    out = stream([*canonical, Finish(finish)])
    assert out[-2]["delta"]["stop_reason"] == expected
    if tool:  # a call without arguments still carries one empty fragment
        assert {"type": "input_json_delta", "partial_json": ""} in [e.get("delta") for e in out]


def test_message_start_carries_early_usage_else_an_estimate():
    early = stream(
        [
            UsageUpdate(Usage(input_tokens=1234, cache_read_tokens=1000)),
            BlockStart(0, BlockKind.TEXT),
            BlockDelta(0, "x"),
            BlockStop(0),
        ]
    )
    assert early[0]["message"]["usage"] == {
        "input_tokens": 234,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1000,
        "output_tokens": 1,
    }
    late = stream([BlockStart(0, BlockKind.TEXT), BlockDelta(0, "x"), BlockStop(0), UsageUpdate(Usage(7, 3))])
    assert late[0]["message"]["usage"]["input_tokens"] == 104  # 400 characters / 4 + one message
    assert late[-2]["usage"] == {
        "input_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 3,
    }


def test_keepalive_and_errors_open_the_message_first():
    encoder = MessagesStreamEncoder(events())
    assert encoder.start() == b""
    ping = encoder.keepalive().decode()
    assert ping.startswith("event: message_start\n") and ping.endswith(
        'event: ping\ndata: {"type":"ping"}\n\n'
    )
    assert encoder.keepalive() == b'event: ping\ndata: {"type":"ping"}\n\n'
    error = encoder.error(UpstreamError(ErrorCategory.OVERLOADED, "Overloaded")).decode()
    assert (
        error
        == 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )


def test_the_whole_message_is_the_fold_of_the_stream():
    canonical = [
        MessageStart("up", "m"),
        BlockStart(0, BlockKind.REASONING),
        BlockDelta(0, "think"),
        BlockStart(1, BlockKind.TEXT),
        BlockDelta(1, "hel"),
        BlockStop(0, ANTHROPIC),
        BlockDelta(1, "lo"),
        BlockStop(1),
        BlockStart(2, BlockKind.TOOL_CALL, "call_X", "f"),
        BlockDelta(2, '{"a": 1}'),
        BlockStop(2, GEMINI),
        UsageUpdate(Usage(50, 9, cache_write_tokens=20)),
        Finish(StopReason.TOOL_CALLS),
    ]
    whole = message_json(events(), fold_turn(canonical))
    assert whole == fold(stream(canonical))
    assert whole["content"] == [
        {"type": "thinking", "thinking": "think", "signature": "SIG"},
        {"type": "text", "text": "hello"},
        {"type": "tool_use", "id": "call_X", "name": "f", "input": {"a": 1}},
    ]
    assert whole["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 0,
        "output_tokens": 9,
    }
    inbound = Inbound(REQUEST, context=Context(False))
    assert (
        orjson.loads(CODEC.answer(inbound, Reply("msg_1", "smart", 0), fold_turn(canonical), SEALER)) == whole
    )


@pytest.mark.parametrize(
    "error,status,kind,message",
    [
        (ClientError(400, "bad"), 400, "invalid_request_error", "bad"),
        (ClientError(401, "no"), 401, "authentication_error", "no"),
        (ClientError(404, "none"), 404, "not_found_error", "none"),
        (ClientError(413, "big"), 413, "request_too_large", "big"),
        (ClientError(429, "slow"), 429, "rate_limit_error", "slow"),
        (ClientError(503, "busy"), 529, "overloaded_error", "busy"),
        (ClientError(502, "broken"), 502, "api_error", "broken"),
        (ClientError(504, "late"), 504, "timeout_error", "late"),
        (ClientError(500, "ours"), 500, "api_error", "ours"),
        (
            ClientError(
                413,
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130500 tokens.",
                code="context_length_exceeded",
            ),
            400,
            "invalid_request_error",
            "prompt is too long: 130500 tokens > 128000 maximum (This model's maximum context length is 128000 tokens. However, your messages resulted in 130500 tokens.)",
        ),
        (
            ClientError(
                400, "prompt is too long: 250000 tokens > 200000 maximum", code="context_length_exceeded"
            ),
            400,
            "invalid_request_error",
            "prompt is too long: 250000 tokens > 200000 maximum",
        ),
    ],
)
def test_error_envelope(error, status, kind, message):
    got_status, body = anthropic_error(error)
    assert got_status == status
    assert orjson.loads(body) == {"type": "error", "error": {"type": kind, "message": message}}


# Anthropic's web search answer as the API streams it (web search tool docs, "Streaming"):
# server_tool_use with its input as input_json_delta, the whole web_search_tool_result in its
# content_block_start, then text whose citations arrive as citations_delta
SEARCH_STREAM = [
    {
        "type": "message_start",
        "message": {"id": "msg_s", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 9}},
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"query": "paris"}'},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_9",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://w.example",
                    "title": "W",
                    "encrypted_content": "ENC",
                }
            ],
        },
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "text", "text": "", "citations": []},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {
            "type": "citations_delta",
            "citation": {
                "type": "web_search_result_location",
                "url": "https://w.example",
                "title": "W",
                "cited_text": "sunny",
                "encrypted_index": "IDX",
            },
        },
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "It is sunny."}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
    {"type": "message_stop"},
]


def _search_events():
    from gateway.providers.anthropic import ADAPTER
    from gateway.transcript.target import Target

    target = Target("claude", "anthropic", "claude-sonnet-4-5", "http://x", "claude")
    decoder = ADAPTER.stream_decoder(target)
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in SEARCH_STREAM)
    return decoder.feed(body) + decoder.finish()


def test_anthropic_server_tools_and_citations_reach_a_messages_client_as_anthropic_sent_them():
    message = message_json(events(), fold_turn(_search_events()))
    use, result, text = message["content"]
    assert use == {
        "type": "server_tool_use",
        "id": "srvtoolu_9",
        "name": "web_search",
        "input": {"query": "paris"},
    }
    assert result == SEARCH_STREAM[4]["content_block"]
    assert text["text"] == "It is sunny." and text["citations"] == [SEARCH_STREAM[7]["delta"]["citation"]]
    assert message["stop_reason"] == "end_turn"  # a server tool is no client tool call
    streamed = stream(_search_events())
    kinds = [e["delta"]["type"] for e in streamed if e["type"] == "content_block_delta"]
    # citations are known once their text block stops: they close it (the SDKs accumulate them
    # into the block wherever they come)
    assert kinds == ["input_json_delta", "text_delta", "citations_delta"]
    assert fold(streamed)["content"] == message["content"]


def test_server_tools_reach_a_chat_client_as_text():
    from gateway.ingress.chat.encode import ChatStreamEncoder
    from gateway.ingress.textual import ServerToolsAsText

    encoder = ServerToolsAsText(ChatStreamEncoder("c", "smart", False, SEALER, 0))
    raw = encoder.start() + b"".join(encoder.event(e) or b"" for e in _search_events()) + encoder.finish()
    text = "".join(
        orjson.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        for line in raw.decode().splitlines()
        if line.startswith("data: {") and orjson.loads(line[6:])["choices"]
    )
    assert "[web_search (query: paris)]" in text and "- W <https://w.example>" in text
    assert 'It is sunny.\n\nSources:\n- W <https://w.example> "sunny"' in text
