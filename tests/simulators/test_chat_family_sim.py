"""Request rules of the chat-completions simulators: openai_chat, deepseek, kimi, mistral."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.simulators import chat_family, deepseek, kimi, mistral, openai_chat
from gateway.simulators.base import Rejection, SimulatorState


def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


def assistant_calls(*ids: str, name: str = "lookup", **extra: Any) -> dict:
    calls = [{"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls, **extra}


def tool(tool_call_id: str, content: str = "ok") -> dict:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def req(model: str, *messages: dict, **extra: Any) -> dict:
    return {"model": model, "messages": list(messages), **extra}


def reject(module: Any, body: dict) -> Rejection | None:
    return module.validate(SimulatorState(module.DIALECT.kind), body, body["model"])


# -- openai_chat -----------------------------------------------------------------------------
GPT = "gpt-4o-mini"
ID = "call_ZR5UUuTt3pf61kjwAJIYdVMj"


def test_openai_valid_tool_loop() -> None:
    body = req(GPT, user(), assistant_calls(ID, "call_2"), tool(ID), tool("call_2"), user("thanks"))
    body["tools"] = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    body.update(tool_choice="auto", stream=True, stream_options={"include_usage": True})
    assert reject(openai_chat, body) is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            req(GPT, user(), assistant_calls(ID, "call_2"), tool(ID), user("next")),
            Rejection(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                "'tool_call_id'. The following tool_call_ids did not have response messages: call_2",
                "invalid_request_error",
                "messages.[3].role",
            ),
        ),
        (
            req(GPT, user(), tool(ID)),
            Rejection(
                400,
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with "
                "'tool_calls'.",
                "invalid_request_error",
                "messages.[1].role",
            ),
        ),
        (
            req(GPT, user(), assistant_calls(ID), tool("call_X")),
            Rejection(
                400,
                "Invalid parameter: 'tool_call_id' of 'call_X' not found in 'tool_calls' of "
                "previous message.",
                "invalid_request_error",
                "messages.[2].tool_call_id",
            ),
        ),
        (
            req(GPT, user(), assistant_calls("c" * 51), tool("c" * 51)),
            Rejection(
                400,
                "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with "
                "maximum length 40, "
                "but got a string with length 51 instead.",
                "invalid_request_error",
                "messages[1].tool_calls[0].id",
                "string_above_max_length",
            ),
        ),
        (
            req(GPT, user(), tools=[{"type": "function", "function": {"name": "bad name!"}}]),
            Rejection(
                400,
                "Invalid 'tools[0].function.name': string does not match pattern. Expected a string "
                "that matches "
                "the pattern '^[a-zA-Z0-9_-]+$'.",
                "invalid_request_error",
                "tools[0].function.name",
                "invalid_value",
            ),
        ),
        (
            req(
                GPT,
                user(),
                {
                    **assistant_calls(ID),
                    "tool_calls": [
                        {"id": ID, "type": "function", "function": {"name": "f", "arguments": {}}}
                    ],
                },
                tool(ID),
            ),
            Rejection(
                400,
                "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a "
                "string, but got an "
                "object instead.",
                "invalid_request_error",
                "messages[1].tool_calls[0].function.arguments",
                "invalid_type",
            ),
        ),
        (
            {"model": GPT},
            Rejection(
                400,
                "Missing required parameter: 'messages'.",
                "invalid_request_error",
                "messages",
                "missing_required_parameter",
            ),
        ),
        (
            req(GPT),
            Rejection(
                400,
                "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
                "an empty array "
                "instead.",
                "invalid_request_error",
                "messages",
                "empty_array",
            ),
        ),
        (
            req(GPT, {"role": "robot", "content": "x"}),
            Rejection(
                400,
                "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', "
                "'function', 'tool', "
                "'developer'.",
                "invalid_request_error",
                "messages[0].role",
                "invalid_value",
            ),
        ),
        (
            req(GPT, {"role": "tool", "content": "x"}),
            Rejection(
                400,
                "Missing required parameter: 'messages[0].tool_call_id'.",
                "invalid_request_error",
                "messages[0].tool_call_id",
                "missing_required_parameter",
            ),
        ),
        (
            req(GPT, user(), thinking={"type": "enabled"}),
            Rejection(400, "Unrecognized request argument supplied: thinking"),
        ),
        (
            req(GPT, user(), tool_choice="auto"),
            Rejection(
                400,
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                "invalid_request_error",
                "tool_choice",
            ),
        ),
        (
            req(GPT, user(), stream_options={"include_usage": True}),
            Rejection(
                400,
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "invalid_request_error",
                "stream_options",
            ),
        ),
        (
            req("o3-mini", user(), max_tokens=100),
            Rejection(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' "
                "instead.",
                "invalid_request_error",
                "max_tokens",
                "unsupported_parameter",
            ),
        ),
    ],
)
def test_openai_rejections(body: dict, expected: Rejection) -> None:
    assert reject(openai_chat, body) == expected


def test_openai_refuses_leaked_provider_fields_in_messages() -> None:
    turn = {**assistant_calls(ID), "reasoning_content": "thoughts"}
    assert reject(openai_chat, req(GPT, user(), turn, tool(ID))) == Rejection(
        400, "Additional properties are not allowed ('reasoning_content' was unexpected) - 'messages.1'"
    )


def test_openai_assistant_ending_with_unanswered_calls_is_rejected() -> None:
    rejection = reject(openai_chat, req(GPT, user(), assistant_calls(ID)))
    assert rejection is not None and rejection.message.endswith(f"did not have response messages: {ID}")


# -- deepseek --------------------------------------------------------------------------------
REASONER = "deepseek-reasoner"
MISSING_RC = (
    "Missing reasoning_content field in the assistant message at message index {}. For more "
    "information, please "
    "refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)


def test_deepseek_thinking_requires_reasoning_content_on_tool_call_turns() -> None:
    body = req(
        REASONER,
        user(),
        assistant_calls("call_00_a"),
        tool("call_00_a"),
        {"role": "assistant", "content": "done"},
        user(),
    )
    assert reject(deepseek, body) == Rejection(
        400, MISSING_RC.format(1), "invalid_request_error", None, "invalid_request_error"
    )
    body["messages"][1]["reasoning_content"] = (
        ""  # the empty string is accepted; turns without calls need none
    )
    assert reject(deepseek, body) is None
    body["messages"][1]["reasoning_content"] = None
    assert reject(deepseek, body).message == MISSING_RC.format(1)


def test_deepseek_thinking_switch() -> None:
    plain = req("deepseek-chat", user(), assistant_calls("c1"), tool("c1"))
    assert reject(deepseek, plain) is None
    assert reject(deepseek, {**plain, "thinking": {"type": "enabled"}}).message == MISSING_RC.format(1)
    with_reasoning = req(REASONER, user(), assistant_calls("c1"), tool("c1"), thinking={"type": "disabled"})
    assert reject(deepseek, with_reasoning) is None


def test_deepseek_tool_rules_and_deserialization_errors() -> None:
    orphan = reject(deepseek, req("deepseek-chat", user(), tool("c1")))
    assert orphan == Rejection(
        400,
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        "invalid_request_error",
        None,
        "invalid_request_error",
    )
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]}
    rejection = reject(deepseek, req("deepseek-chat", image))
    assert rejection.status == 422
    assert rejection.message == (
        "Failed to deserialize the JSON body into the target type: messages[0].content[0]: "
        "unknown variant `image_url`, expected `text`"
    )
    missing = reject(deepseek, req("deepseek-chat", {"role": "user"}))
    assert missing.message.endswith("messages[0]: missing field `content`")


# -- kimi ------------------------------------------------------------------------------------
K2T = "kimi-k2-thinking"


def test_kimi_thinking_requires_reasoning_content() -> None:
    body = req(K2T, user(), assistant_calls("functions.lookup:0"), tool("functions.lookup:0"), user("more"))
    rejection = reject(kimi, body)
    assert rejection == Rejection(
        400,
        "thinking is enabled but reasoning_content is missing in assistant tool call message at index 1",
        "invalid_request_error",
    )
    assert kimi.error_body(rejection) == {
        "error": {
            "message": "thinking is enabled but reasoning_content is missing in assistant tool call "
            "message at index 1",
            "type": "invalid_request_error",
        }
    }
    assert reject(kimi, {**body, "model": "kimi-k2-0905-preview"}) is None
    body["messages"][1]["reasoning_content"] = "I should look it up."
    assert reject(kimi, body) is None


def test_kimi_foreign_ids_are_accepted_with_a_quality_warning() -> None:
    body = req(
        "kimi-k2-0905-preview",
        user(),
        assistant_calls("functions.lookup:0", "functions.lookup:1"),
        tool("functions.lookup:0"),
        tool("functions.lookup:1"),
        assistant_calls("call_abc"),
        tool("call_abc"),
        assistant_calls("functions.lookup:7"),
        tool("functions.lookup:7"),
    )
    rejection, findings = chat_family.check(kimi.DIALECT, body, body["model"])
    assert rejection is None
    assert findings.quality_warnings == [
        "messages[4].tool_calls[0].id 'call_abc' is not a native Kimi id (expected 'functions.lookup:2')",
        (
            "messages[6].tool_calls[0].id 'functions.lookup:7' does not match the call's name and "
            "global index "
            "(expected 'functions.lookup:3')"
        ),
    ]


def test_kimi_unknown_tool_call_id() -> None:
    body = req("kimi-k2-0905-preview", user(), assistant_calls("functions.a:0"), tool("functions.b:0"))
    assert reject(kimi, body).message == "Invalid request: tool_call_id functions.b:0 is not found"


# -- mistral ---------------------------------------------------------------------------------
SMALL = "mistral-small-latest"


def mistral_error(rejection: Rejection | None) -> dict:
    assert rejection is not None
    return mistral.error_body(rejection)


def test_mistral_valid_tool_loop_and_prefix() -> None:
    assert reject(mistral, req(SMALL, user(), assistant_calls("gSIMJiOkT"), tool("gSIMJiOkT"))) is None
    body = req(
        SMALL,
        user(),
        assistant_calls("gSIMJiOkT"),
        tool("gSIMJiOkT"),
        {"role": "assistant", "content": "ok"},
        user(),
    )
    assert reject(mistral, body) is None
    prefixed = req(SMALL, user(), {"role": "assistant", "content": "Sure,", "prefix": True})
    assert reject(mistral, prefixed) is None


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [user(), assistant_calls("2968-LWy3uasib"), tool("2968-LWy3uasib")],
            {
                "object": "error",
                "message": "Tool call id was 2968-LWy3uasib but must be a-z, A-Z, 0-9, with a length of 9.",
                "type": "invalid_function_call",
                "param": None,
                "code": "3280",
            },
        ),
        (
            [user(), assistant_calls("abcdefghi"), tool("abcdefghi"), user("next")],
            {
                "object": "error",
                "message": "Unexpected role 'user' after role 'tool'",
                "type": "invalid_request_message_order",
                "param": None,
                "code": "3230",
            },
        ),
        (
            [user(), tool("abcdefghi")],
            {
                "object": "error",
                "message": "Unexpected role 'tool' after role 'user'",
                "type": "invalid_request_message_order",
                "param": None,
                "code": "3230",
            },
        ),
        (
            [user(), assistant_calls("abcdefghi", "ABCDEFGHI"), tool("abcdefghi")],
            {
                "object": "error",
                "message": "Not the same number of function calls and responses",
                "type": "invalid_request_message_order",
                "param": None,
                "code": "3230",
            },
        ),
        (
            [user(), {"role": "assistant", "content": ""}, user("again")],
            {
                "object": "error",
                "message": "Assistant message must have either content or tool_calls, but not none.",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            },
        ),
        (
            [user(), {"role": "assistant", "content": "hello"}],
            {
                "object": "error",
                "message": "Expected last role User or Tool (or Assistant with prefix True) for "
                "serving but got assistant",
                "type": "invalid_request_message_order",
                "param": None,
                "code": "3230",
            },
        ),
    ],
)
def test_mistral_rejections(messages: list[dict], expected: dict) -> None:
    rejection = reject(mistral, req(SMALL, *messages))
    assert rejection is not None and rejection.status == 400
    assert mistral_error(rejection) == expected


def test_mistral_thinking_history_and_extra_fields() -> None:
    thinking = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "17*23..."}], "closed": True},
            {"type": "text", "text": "391"},
        ],
    }
    assert reject(mistral, req("magistral-medium-latest", user(), thinking, user("and 18*23?"))) is None
    broken = {**thinking, "content": [{"type": "thinking", "thinking": "not a list"}]}
    assert mistral_error(reject(mistral, req("magistral-medium-latest", user(), broken, user()))) == {
        "object": "error",
        "message": {
            "detail": [
                {
                    "type": "list_type",
                    "loc": ["body", "messages", 1, "content", 0, "thinking"],
                    "msg": "Input should be a valid list",
                }
            ]
        },
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    leaked = reject(
        mistral,
        req(SMALL, user(), {**assistant_calls("abcdefghi"), "reasoning_content": ""}, tool("abcdefghi")),
    )
    assert mistral_error(leaked)["message"]["detail"] == [
        {
            "type": "extra_forbidden",
            "loc": ["body", "messages", 1, "reasoning_content"],
            "msg": "Extra inputs are not permitted",
        }
    ]
    extra = reject(mistral, req(SMALL, user(), stream_options={"include_usage": True}))
    assert extra.status == 422
    assert mistral_error(extra)["message"]["detail"] == [
        {
            "type": "extra_forbidden",
            "loc": ["body", "stream_options"],
            "msg": "Extra inputs are not permitted",
        }
    ]
