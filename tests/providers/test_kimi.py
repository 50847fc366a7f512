"""Kimi on the shared chat codec: tool messages carry the function name, and the thinking-mode
rejection for a missing reasoning_content."""

from __future__ import annotations

from gateway.transcript.events import ErrorCategory
from gateway.transcript.model import (
    Message,
    Request,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from tests.providers.test_openai_compat import (
    classify,
    encode,
)


def test_kimi_tool_messages_carry_the_function_name() -> None:
    messages = (
        Message(Role.USER, (Text("go"),)),
        Message(Role.ASSISTANT, (ToolCall("functions.get_weather:0", "get_weather", "{}"),)),
        Message(Role.TOOL, (ToolResult("functions.get_weather:0", "ok"),)),
    )
    _, _, body = encode("kimi", Request(model="m", messages=messages))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "",
        "tool_calls": [
            {
                "id": "functions.get_weather:0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"},
            }
        ],
    }
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "functions.get_weather:0",
        "content": "ok",
        "name": "get_weather",
    }


def test_kimi_missing_reasoning_content() -> None:
    body = {
        "error": {
            "message": "thinking is enabled but reasoning_content is missing in assistant tool call message at index 3",
            "type": "invalid_request_error",
        }
    }
    error = classify("kimi", 400, body)
    assert error.category is ErrorCategory.CONTINUITY and error.type == "invalid_request_error"
    assert classify(
        "kimi", 429, {"error": {"message": "busy", "type": "engine_overloaded_error"}}
    ).category is (ErrorCategory.OVERLOADED)
