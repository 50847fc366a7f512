"""The Gemini API answer encoder: stream chunks (SSE and the JSON array) and the whole answer as
the fold of the same events."""

from __future__ import annotations

import base64

import orjson

from gateway.ingress.gemini.encode import AnswerParts, GeminiStreamEncoder, answer_json
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
from gateway.transcript.model import AssistantTurn, Continuity, Reasoning, StopReason, Text, ToolCall, Usage
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"k" * 32)
GEMINI_META = Continuity(
    "gemini", "gemini", "gemini", "gemini-3-pro-preview", {"thought_signature": "R1NpZw=="}
)
CLAUDE_META = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": "s"})
USAGE = Usage(input_tokens=10, output_tokens=7, reasoning_tokens=3, cache_read_tokens=4)
EVENTS = [
    MessageStart("r1", "m"),
    BlockStart(0, BlockKind.REASONING),
    BlockDelta(0, "Think."),
    BlockStop(0, CLAUDE_META),
    BlockStart(1, BlockKind.TEXT),
    BlockDelta(1, "Hel"),
    BlockDelta(1, "lo"),
    BlockStop(1),
    BlockStart(2, BlockKind.TOOL_CALL, id="call_1", name="f"),
    BlockDelta(2, '{"a":'),
    BlockDelta(2, "1}"),
    BlockStop(2, GEMINI_META),
    UsageUpdate(USAGE),
    Finish(StopReason.TOOL_CALLS),
]


def sse_chunks(raw: bytes) -> list[dict]:
    frames = raw.split(b"\r\n\r\n")
    assert frames[-1] == b""
    return [orjson.loads(f.removeprefix(b"data: ")) for f in frames[:-1]]


def run(encoder: GeminiStreamEncoder) -> bytes:
    out = encoder.start()
    for event in EVENTS:
        out += encoder.event(event) or b""
    return out + encoder.finish()


def test_sse_stream():
    encoder = GeminiStreamEncoder(AnswerParts("r1", "group", True, SEALER), sse=True)
    assert encoder.content_type == "text/event-stream"
    chunks = sse_chunks(run(encoder))
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert parts[0] == {"text": "Think.", "thought": True}
    sealed = base64.b64decode(parts[1]["thoughtSignature"]).decode()
    assert parts[1]["thought"] is True and SEALER.unseal(sealed) == CLAUDE_META
    assert parts[2:4] == [{"text": "Hel"}, {"text": "lo"}]
    assert parts[4] == {
        "functionCall": {"name": "f", "args": {"a": 1}, "id": "call_1"},
        "thoughtSignature": "R1NpZw==",
    }
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {
        "promptTokenCount": 10,
        "candidatesTokenCount": 4,
        "totalTokenCount": 17,
        "thoughtsTokenCount": 3,
        "cachedContentTokenCount": 4,
    }
    assert {c["responseId"] for c in chunks} == {"r1"} and {c["modelVersion"] for c in chunks} == {"group"}


def test_json_array_stream_and_its_error_end():
    encoder = GeminiStreamEncoder(AnswerParts("r1", "group", False, SEALER), sse=False)
    assert encoder.content_type == "application/json"
    chunks = orjson.loads(run(encoder))
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert not any(p.get("thought") for p in parts), "no thoughts unless asked for"
    broken = GeminiStreamEncoder(AnswerParts("r1", "group", False, SEALER), sse=False)
    raw = (
        broken.start()
        + (broken.event(BlockStart(0, BlockKind.TEXT)) or b"")
        + broken.event(BlockDelta(0, "x"))
    )
    raw += broken.error(UpstreamError(ErrorCategory.RATE_LIMIT, "slow down", retry_after=3))
    first, error = orjson.loads(raw)
    assert error["error"]["code"] == 429 and error["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"} in error["error"][
        "details"
    ]


def test_the_whole_answer_is_the_fold():
    """One part per block, its text whole and its signature on it."""
    turn = AssistantTurn(
        [Reasoning("Think.", GEMINI_META), Text("Hello"), Text(" there"), ToolCall("call_1", "f", '{"a":1}')],
        StopReason.MAX_TOKENS,
        USAGE,
    )
    answer = answer_json(AnswerParts("r1", "group", True, SEALER), turn)
    candidate = answer["candidates"][0]
    assert candidate["content"]["parts"] == [
        {"text": "Think.", "thought": True, "thoughtSignature": "R1NpZw=="},
        {"text": "Hello"},
        {"text": " there"},
        {"functionCall": {"name": "f", "args": {"a": 1}, "id": "call_1"}},
    ]
    assert candidate["finishReason"] == "MAX_TOKENS" and answer["usageMetadata"]["totalTokenCount"] == 17
