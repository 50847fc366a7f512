"""Mistral on the shared chat codec: thinking chunks in content arrays, no stream_options, tool
choice words, and its flat error bodies."""

from __future__ import annotations

import pytest

from gateway.transcript.events import ErrorCategory
from gateway.transcript.model import (
    Message,
    Reasoning,
    Request,
    Role,
    Text,
    ToolChoice,
    ToolChoiceMode,
)
from tests.providers.test_openai_compat import (
    TOOLS,
    classify,
    conversation,
    encode,
    own,
    target,
)


def test_mistral_thinking_chunks_and_no_stream_options() -> None:
    tgt = target("mistral", "magistral-medium-latest")
    messages = (
        Message(Role.USER, (Text("17*23?"),)),
        Message(Role.ASSISTANT, (Reasoning("17*20 + 17*3", own(tgt)), Text("391"))),
        Message(Role.USER, (Text("thanks"),)),
    )
    _, _, body = encode("mistral", Request(model="m", messages=messages, stream=True, max_tokens=10), tgt)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "17*20 + 17*3"}]},
            {"type": "text", "text": "391"},
        ],
    }
    assert body["stream"] is True and "stream_options" not in body
    assert body["max_tokens"] == 10


def test_tool_choice_words() -> None:
    for mode, word in [
        (ToolChoiceMode.AUTO, "auto"),
        (ToolChoiceMode.NONE, "none"),
        (ToolChoiceMode.REQUIRED, "required"),
    ]:
        _, _, body = encode(
            "mistral", Request(model="m", messages=conversation(), tools=TOOLS, tool_choice=ToolChoice(mode))
        )
        assert body["tool_choice"] == word


@pytest.mark.parametrize(
    "message, type_, code, category",
    [
        (
            "Tool call id was 2968-LWy3uasib but must be a-z, A-Z, 0-9, with a length of 9.",
            "invalid_function_call",
            "3280",
            ErrorCategory.PAIRING,
        ),
        (
            "Unexpected role 'user' after role 'tool'",
            "invalid_request_message_order",
            "3230",
            ErrorCategory.PAIRING,
        ),
        (
            "Unexpected role 'tool' after role 'user'",
            "invalid_request_message_order",
            "3230",
            ErrorCategory.PAIRING,
        ),
        (
            "Not the same number of function calls and responses",
            "invalid_request_error",
            None,
            ErrorCategory.PAIRING,
        ),
        (
            "Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant",
            "invalid_request_error",
            None,
            ErrorCategory.INVALID_REQUEST,
        ),
    ],
)
def test_mistral_flat_error_bodies(
    message: str, type_: str, code: str | None, category: ErrorCategory
) -> None:
    body = {"object": "error", "message": message, "type": type_, "param": None, "code": code}
    error = classify("mistral", 400, body)
    assert (error.category, error.message, error.type, error.code) == (category, message, type_, code)
