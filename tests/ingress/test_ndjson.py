"""The NDJSON encoder on canonical events: lines, positions in block start order, whole tool
calls, continuity tokens from the codec, usage, the end and the error line; and Accept parsing."""

from __future__ import annotations

import orjson
import pytest

from gateway.ingress.chat.codec import CODEC
from gateway.ingress.dialects import DIALECTS
from gateway.ingress.ndjson import NdjsonEncoder, ToolArgumentsError, accepts_ndjson
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    MessageStart,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Continuity, StopReason, Usage
from gateway.transcript.seal import Sealer

META = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": "sig-1"})
CALL_META = Continuity("gem", "gem", "gemini", "gemini-3-pro-preview", {"thought_signature": "ts"})


def encoder() -> tuple[NdjsonEncoder, list[tuple[BlockKind, Continuity]]]:
    asked: list[tuple[BlockKind, Continuity]] = []

    def token(kind: BlockKind, meta: Continuity) -> str:
        asked.append((kind, meta))
        return f"token-{len(asked)}"

    return NdjsonEncoder(token), asked


def run(enc: NdjsonEncoder, events: list[Event]) -> list[dict]:
    out = enc.start()
    for event in events:
        chunk = enc.event(event)
        if chunk is not None:
            assert chunk.endswith(b"\n") and chunk.count(b"\n") == chunk.count(b"}\n")
            out += chunk
    out += enc.finish()
    return [orjson.loads(line) for line in out.splitlines()]


def test_lines_in_block_start_order_whatever_the_providers_indexes():
    enc, asked = encoder()
    lines = run(
        enc,
        [
            MessageStart("resp_1", "m"),
            BlockStart(7, BlockKind.REASONING),
            BlockDelta(7, "Let me"),
            BlockStart(3, BlockKind.TEXT),  # starts before the reasoning completes
            BlockDelta(7, " think.\n"),
            BlockDelta(3, "Checking "),
            BlockStop(7, META),
            BlockStart(12, BlockKind.TOOL_CALL, "call_abc", "get_weather"),
            BlockDelta(12, '{"city": '),
            BlockDelta(3, "now."),
            BlockDelta(12, '"Paris"}'),
            BlockStop(3),
            BlockStop(12, CALL_META),
            UsageUpdate(Usage(10, 5, reasoning_tokens=2)),
            Finish(StopReason.TOOL_CALLS),
        ],
    )
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0, "cache_write_tokens": 0}
    usage["reasoning_tokens"] = 2
    assert lines == [
        {"type": "thinking", "index": 0, "text": "Let me"},
        {"type": "thinking", "index": 0, "text": " think.\n"},
        {"type": "text", "index": 1, "text": "Checking "},
        {"type": "thinking_signature", "index": 0, "signature": "token-1"},
        {"type": "text", "index": 1, "text": "now."},
        {
            "type": "tool_call",
            "index": 2,
            "id": "call_abc",
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        },
        {"type": "thinking_signature", "index": 2, "signature": "token-2"},
        {"type": "usage", **usage},
        {"type": "end", "finish_reason": "tool_calls", "usage": usage},
    ]
    assert asked == [(BlockKind.REASONING, META), (BlockKind.TOOL_CALL, CALL_META)]


def test_a_block_without_text_is_still_named_before_its_signature():
    enc, _ = encoder()
    lines = run(
        enc,
        [
            BlockStart(0, BlockKind.REASONING),  # encrypted / redacted reasoning: no readable text
            BlockDelta(0, ""),
            BlockStop(0, META),
            BlockStart(1, BlockKind.TEXT),
            BlockStop(1),
        ],
    )
    assert lines[:4] == [
        {"type": "thinking", "index": 0, "text": ""},
        {"type": "thinking_signature", "index": 0, "signature": "token-1"},
        {"type": "text", "index": 1, "text": ""},
        {"type": "end", "finish_reason": "end_turn", "usage": lines[3]["usage"]},
    ]


@pytest.mark.parametrize(
    ("stop", "calls", "finish"),
    [
        (None, False, "end_turn"),
        (StopReason.MAX_TOKENS, False, "max_tokens"),
        (StopReason.REFUSAL, False, "refusal"),
        (StopReason.END_TURN, True, "tool_calls"),  # a proxy's end_turn after calls: run them
        (None, True, "tool_calls"),
        (StopReason.MAX_TOKENS, True, "max_tokens"),
    ],
)
def test_finish_reason(stop, calls, finish):
    enc, _ = encoder()
    events: list[Event] = []
    if calls:
        events += [BlockStart(0, BlockKind.TOOL_CALL, "call_1", "f"), BlockStop(0)]
    if stop is not None:
        events.append(Finish(stop))
    *_, end = run(enc, events)
    assert end["type"] == "end" and end["finish_reason"] == finish
    assert end["usage"]["input_tokens"] == 0


def test_empty_arguments_are_an_empty_object():
    enc, _ = encoder()
    lines = run(enc, [BlockStart(0, BlockKind.TOOL_CALL, "call_1", "now"), BlockDelta(0, "  "), BlockStop(0)])
    assert lines[0]["arguments"] == {}


@pytest.mark.parametrize("arguments", ['{"city": "Par', "[1, 2]", '"Paris"', "null"])
def test_a_tool_call_whose_arguments_are_not_an_object_is_a_broken_stream(arguments):
    enc, _ = encoder()
    enc.event(BlockStart(0, BlockKind.TOOL_CALL, "call_1", "get_weather"))
    enc.event(BlockDelta(0, arguments))
    with pytest.raises(ToolArgumentsError, match="get_weather"):
        enc.event(BlockStop(0))


def test_the_error_line():
    enc, _ = encoder()
    line = enc.error(UpstreamError(ErrorCategory.OVERLOADED, "Overloaded", status=529))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"type": "error", "error": {"type": "overloaded", "message": "Overloaded"}}


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("application/x-ndjson", True),
        ("Application/X-NDJSON; charset=utf-8", True),
        ("text/event-stream, application/x-ndjson", True),
        ("application/x-ndjson;q=0.5, text/event-stream;q=0.4", True),
        ("application/x-ndjson;q=0.5, text/event-stream", False),
        ("application/x-ndjson;q=0", False),
        ("application/x-ndjson;q=oops", False),
        ("application/json", False),
        ("*/*", False),
        ("", False),
    ],
)
def test_accept(accept, wanted):
    assert accepts_ndjson(accept) is wanted


def test_the_chat_dialect_sends_back_the_sealed_token():
    """Chat carries no provider's own token: reasoning_details hold the gateway's sealed one."""
    sealer = Sealer(b"k" * 32)
    token = CODEC.continuity_token(BlockKind.REASONING, META, sealer)
    assert token != "sig-1" and sealer.unseal(token) == META


def test_every_ingress_dialect_names_the_token_its_clients_send_back():
    sealer = Sealer(b"k" * 32)
    for route in (route for dialect in DIALECTS for route in dialect.routes):
        for kind in BlockKind:
            token = route.codec.continuity_token(kind, META, sealer)
            assert isinstance(token, str) and token, route.path
