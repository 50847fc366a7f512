"""Strict simulator of Mistral chat completions (OpenAI-like; magistral models reason)."""

from __future__ import annotations

import re

from aiohttp import web

from gateway.simulators import chat_family as cf
from gateway.simulators import chat_render as cr
from gateway.simulators import chat_shapes as cs
from gateway.simulators.base import Rejection, SimulatorState

TOOL_CALL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
ORDER = "invalid_request_message_order"
ORDER_CODE = "3230"
# Role pairs Mistral refuses outright; an assistant without tool_calls is refused before 'tool' too.
FORBIDDEN_AFTER = frozenset({("user", "tool"), ("tool", "user"), ("tool", "system"), ("system", "tool")})

# Mistral's request model forbids unknown fields (pydantic extra="forbid").
PARAMS = frozenset(
    [
        "model",
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "stream",
        "stop",
        "random_seed",
        "response_format",
        "tools",
        "tool_choice",
        "presence_penalty",
        "frequency_penalty",
        "n",
        "prediction",
        "parallel_tool_calls",
        "prompt_mode",
        "safe_prompt",
        "metadata",
        "reasoning_effort",
    ]
)

_PYDANTIC_TYPES = {
    cs.STRING: ("string_type", "Input should be a valid string"),
    cs.CONTENT: ("string_type", "Input should be a valid string"),
    cs.ARRAY: ("list_type", "Input should be a valid list"),
    cs.OBJECT: ("dict_type", "Input should be a valid dictionary"),
    cs.BOOLEAN: ("bool_type", "Input should be a valid boolean"),
    cs.NUMBER: ("float_type", "Input should be a valid number"),
    cs.INTEGER: ("int_type", "Input should be a valid integer"),
}


# https://docs.mistral.ai/capabilities/reasoning: Magistral models always reason; Mistral Small 4
# and Medium 3.5 reason with `reasoning_effort: "high"` and not with "none"
ADJUSTABLE = re.compile(r"mistral-(?:small-(?:latest|2603)|medium-3[.-]5)")
EFFORTS = ("high", "none")


def reasons(model: str, body: dict) -> bool:
    if model.startswith("magistral"):
        return True
    return ADJUSTABLE.match(model) is not None and body.get("reasoning_effort") == "high"


def reasoning_effort(c: cf.Conversation) -> Rejection | None:
    effort = c.body.get("reasoning_effort")
    if effort is None:
        return None
    if effort not in EFFORTS:
        return _validation(("reasoning_effort",), "literal_error", "Input should be 'high' or 'none'")
    if ADJUSTABLE.match(c.model) is None:
        # unverified wording
        return Rejection(400, f"Model {c.model} does not support reasoning_effort", "invalid_request_error")
    return None


def _validation(path: cs.Path, error_type: str, message: str) -> Rejection:
    # 422 pydantic validation error; the body renders `param` back into a `loc` list
    return Rejection(422, message, "invalid_request_error", cs.dotted(path), error_type)


def _pydantic_literal(expected: str) -> str:
    values = [v.strip() for v in expected.split(",")]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def shape_rejection(issue: cs.ShapeIssue) -> Rejection:
    if issue.kind == "missing":
        return _validation(issue.path, "missing", "Field required")
    if issue.kind == "type":
        return _validation(issue.path, *_PYDANTIC_TYPES.get(issue.expected, ("value_error", "Invalid value")))
    if issue.kind == "value":
        return _validation(
            issue.path, "literal_error", f"Input should be {_pydantic_literal(issue.expected)}"
        )
    if issue.kind == "empty":
        return _validation(
            issue.path, "too_short", "List should have at least 1 item after validation, not 0"
        )
    if issue.kind == "extra":
        return _validation(issue.path, "extra_forbidden", "Extra inputs are not permitted")
    raise ValueError(f"unknown shape issue {issue.kind!r}")


MESSAGE_KEYS = {
    "system": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "prefix"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
}


def message_properties(c: cf.Conversation) -> Rejection | None:
    for i, message in enumerate(c.messages):
        for key in message:
            if key not in MESSAGE_KEYS[message["role"]]:
                return _validation(("messages", i, key), "extra_forbidden", "Extra inputs are not permitted")
    return None


def response_format(c: cf.Conversation) -> Rejection | None:
    """Mistral's JSON schema format names its schema and carries it (pydantic validation)."""
    fmt = c.body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema")
    for key in ("name", "schema"):
        if not isinstance(spec, dict) or key not in spec:
            return _validation(("response_format", "json_schema", key), "missing", "Field required")
    return None


def thinking_chunks(c: cf.Conversation) -> Rejection | None:
    for i, message in enumerate(c.messages):
        content = message.get("content")
        for p, part in enumerate(content if isinstance(content, list) else ()):
            if part["type"] != "thinking":
                continue
            path: cs.Path = ("messages", i, "content", p, "thinking")
            inner = part.get("thinking")
            if not isinstance(inner, list):
                return _validation(path, "list_type", "Input should be a valid list")
            for t, chunk in enumerate(inner):
                if (
                    not isinstance(chunk, dict)
                    or chunk.get("type") != "text"
                    or not isinstance(chunk.get("text"), str)
                ):
                    return _validation(path + (t,), "model_type", "Input should be a valid text chunk")
    return None


def tool_call_ids(c: cf.Conversation) -> Rejection | None:
    for message in c.messages:
        ids = cf.call_ids(message) if message["role"] == "assistant" else []
        if message["role"] == "tool":
            ids = [message["tool_call_id"]]
        for tool_call_id in ids:
            if not TOOL_CALL_ID.match(tool_call_id):
                return Rejection(
                    400,
                    f"Tool call id was {tool_call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                    "invalid_function_call",
                    None,
                    "3280",
                )
    return None


def empty_assistant(c: cf.Conversation) -> Rejection | None:
    for message in c.messages:
        if message["role"] == "assistant" and not message.get("tool_calls") and not message.get("content"):
            return Rejection(
                400,
                "Assistant message must have either content or tool_calls, but not none.",
                "invalid_request_error",
            )
    return None


def _order(message: str) -> Rejection:
    return Rejection(400, message, ORDER, None, ORDER_CODE)


def message_order(c: cf.Conversation) -> Rejection | None:
    messages = c.messages
    for i, message in enumerate(messages):
        role = message["role"]
        if i:
            before = messages[i - 1]
            previous = before["role"]
            refused_tool = role == "tool" and previous == "assistant" and not before.get("tool_calls")
            if (previous, role) in FORBIDDEN_AFTER or refused_tool:
                return _order(f"Unexpected role '{role}' after role '{previous}'")
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            answers = 0
            while i + 1 + answers < len(messages) and messages[i + 1 + answers]["role"] == "tool":
                answers += 1
            if answers != len(calls):
                return _order("Not the same number of function calls and responses")  # unverified type/code
    last = messages[-1]
    if last["role"] not in ("user", "tool") and not (
        last["role"] == "assistant" and last.get("prefix") is True
    ):
        return _order(
            "Expected last role User or Tool (or Assistant with prefix True) for serving but got "
            f"{last['role']}"
        )
    return None


def _loc(param: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", param)]


def error_body(rejection: Rejection) -> dict:
    if rejection.status == 422:
        detail = {
            "type": rejection.code,
            "loc": ["body", *_loc(rejection.param or "")],
            "msg": rejection.message,
        }
        return {
            "object": "error",
            "message": {"detail": [detail]},
            "type": rejection.type,
            "param": None,
            "code": None,
        }
    return {
        "object": "error",
        "message": rejection.message,
        "type": rejection.type,
        "param": None,
        "code": rejection.code,
    }


def stream_error_body(rejection: Rejection) -> dict:
    # mid-stream, the error arrives wrapped like the OpenAI-style frames around it
    return {
        "error": {"message": rejection.message, "type": rejection.type, "param": None, "code": rejection.code}
    }


def auth_rejection(key_sent: bool) -> Rejection:
    return Rejection(401, "Unauthorized", "unauthorized", None, "1000")  # unverified type/code


FAULTS: cf.FaultTable = {  # unverified types and codes
    400: ("invalid_request_error", "Invalid request", None),
    401: ("unauthorized", "Unauthorized", "1000"),
    429: ("rate_limited", "Requests rate limit exceeded", "1300"),
    500: ("internal_server_error", "Internal server error", "3000"),
    503: ("service_unavailable", "Service unavailable", "3001"),
}


def usage(u: cr.Usage) -> dict:
    out = {
        "prompt_tokens": u.prompt,
        "total_tokens": u.prompt + u.completion,
        "completion_tokens": u.completion,
    }
    if u.cached:  # unverified: Mistral reports cache hits as OpenAI does
        out["prompt_tokens_details"] = {"cached_tokens": u.cached}
    return out


def message(text: str, reasoning: str, calls: list[cr.RenderedCall], is_thinking: bool) -> dict:
    content: str | list[dict] = text
    if reasoning:
        content = [
            {"type": "thinking", "thinking": [{"type": "text", "text": reasoning}], "closed": True},
            {"type": "text", "text": text},
        ]
    tool_calls = [{"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    return {"role": "assistant", "tool_calls": tool_calls or None, "content": content}


def overflow(used: int, limit: int) -> Rejection:
    """Mistral's overflow: 400 invalid_request_error "Prompt contains N tokens and 0 draft tokens,
    too large for model with M maximum context length" (wording as reported in
    mistralai/client-python issues)."""
    return Rejection(
        400,
        f"Prompt contains {used} tokens and 0 draft tokens, too large for model with {limit} maximum "
        "context length",
        "invalid_request_error",
    )


DIALECT = cf.ChatDialect(
    kind="mistral",
    roles=("system", "user", "assistant", "tool"),
    content_parts={
        "user": ("text", "image_url", "document_url", "input_audio", "file"),
        "assistant": ("text", "thinking"),
        "system": ("text", "thinking"),
        "tool": ("text",),
    },
    tool_choice_modes=("auto", "none", "any", "required"),
    allowed_params=PARAMS,
    tool_call_type_required=False,
    shape_rejection=shape_rejection,
    rules=(
        message_properties,
        reasoning_effort,
        response_format,
        thinking_chunks,
        tool_call_ids,
        empty_assistant,
        message_order,
    ),
    error_body=error_body,
    overflow=overflow,
    stream_error_body=stream_error_body,
    fault_error=cf.fault_errors(FAULTS),
    auth_rejection=auth_rejection,
    invalid_json=Rejection(400, "Invalid JSON body", "invalid_request_error"),  # unverified wording
    reasons=reasons,
    rendering=cr.ChatRendering(
        completion_id=lambda: cr.random_token(32, "0123456789abcdef"),
        tool_call_id=lambda messages, n, name: cr.random_token(9),
        usage=usage,
        role_delta=lambda t: {"role": "assistant", "content": ""},
        reasoning_delta=lambda text: {
            "content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]
        },
        reasoning_close={"content": [{"type": "thinking", "thinking": []}]},
        content_delta=lambda text, t: {"content": text},
        finish_delta=lambda t: {"content": ""},
        message=message,
        usage_placement="finish",
        choice_extra={"logprobs": None},
        tool_calls_whole=True,
    ),
)


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return cf.check(DIALECT, body, model)[0]


def create_app(state: SimulatorState) -> web.Application:
    return cf.create_chat_app(state, DIALECT)
