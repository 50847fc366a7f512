"""DeepSeek on the shared chat codec: max_tokens, stream usage, reasoning_content replay of a
decoded turn, and its thinking-mode rejections."""

from __future__ import annotations

import pytest

from gateway.transcript.assembler import fold
from gateway.transcript.events import ErrorCategory
from gateway.transcript.model import (
    Message,
    Request,
    Role,
    Text,
    ToolResult,
)
from tests.conftest import fixture_path
from tests.providers.test_openai_compat import (
    chunk_lines,
    classify,
    conversation,
    decode,
    encode,
    openai_error,
    sse,
    target,
)


def test_deepseek_body_uses_max_tokens_and_stream_options() -> None:
    _, _, body = encode(
        "deepseek",
        Request(
            model="m", messages=conversation(image=False), stream=True, max_tokens=99, reasoning_effort="high"
        ),
    )
    assert body["max_tokens"] == 99 and "max_completion_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}
    assert "reasoning_effort" not in body
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "18C sunny"}


def test_decoded_deepseek_turn_replays_its_reasoning() -> None:
    tgt = target("deepseek", "deepseek-reasoner")
    lines = chunk_lines(fixture_path("deepseek", "deepseek-tool-call.chunks.txt"))
    turn = fold(decode("deepseek", sse(lines), tgt=tgt))
    request = Request(
        model="m",
        messages=(
            Message(Role.USER, (Text("Weather in SF?"),)),
            turn.message(),
            Message(Role.TOOL, (ToolResult(turn.blocks[1].id, "sunny"),)),
        ),
    )
    _, _, body = encode("deepseek", request, tgt)
    assert body["messages"][1]["reasoning_content"] == turn.blocks[0].text
    assert body["messages"][1]["tool_calls"][0]["id"] == "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"


@pytest.mark.parametrize(
    "message, category",
    [
        (
            (
                "Missing reasoning_content field in the assistant message at message index 6. For more "
                "information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            ),
            ErrorCategory.CONTINUITY,
        ),
        (
            "The reasoning_content in the thinking mode must be passed back to the API.",
            ErrorCategory.CONTINUITY,
        ),
        (
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
            ErrorCategory.PAIRING,
        ),
        ("Insufficient Balance", ErrorCategory.QUOTA),
    ],
)
def test_deepseek_rejections(message: str, category: ErrorCategory) -> None:
    status = 402 if category is ErrorCategory.QUOTA else 400
    body = openai_error(message, "invalid_request_error", "invalid_request_error")
    assert classify("deepseek", status, body).category is category
