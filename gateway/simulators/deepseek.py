"""Strict simulator of DeepSeek chat completions, including thinking mode (deepseek-reasoner)."""

from __future__ import annotations

import uuid

from aiohttp import web

from gateway.simulators import chat_family as cf
from gateway.simulators import chat_render as cr
from gateway.simulators import chat_shapes as cs
from gateway.simulators.base import Rejection, SimulatorState

THINKING_MODELS = frozenset({"deepseek-reasoner"})
INVALID = "invalid_request_error"
# https://api-docs.deepseek.com/guides/thinking_mode: V4 models think unless `thinking` disables
# it; `reasoning_effort` takes these (the docs map each onto low, high or max)
THINKS_BY_DEFAULT = "deepseek-v4"
SWITCH_TYPES = ("enabled", "disabled")
EFFORTS = ("minimal", "low", "medium", "high", "xhigh", "max")


def thinking(model: str, body: dict) -> bool:
    switch = cf.thinking_param(body)
    if switch is not None:
        return switch == "enabled"
    return model in THINKING_MODELS or model.startswith(THINKS_BY_DEFAULT)


def _unknown_variant(path: str, got: object, expected: tuple[str, ...]) -> Rejection:
    listed = ", ".join(f"`{v}`" for v in expected)
    return _invalid(
        f"Failed to deserialize the JSON body into the target type: {path}: unknown variant `{got}`, "
        f"expected one of {listed}",
        422,
    )


def reasoning_params(c: cf.Conversation) -> Rejection | None:
    """The thinking switch and the effort, as serde reads them."""
    if "thinking" in c.body:
        switch = c.body["thinking"]
        if not isinstance(switch, dict) or "type" not in switch:
            return _invalid(
                "Failed to deserialize the JSON body into the target type: thinking: missing field `type`",
                422,
            )
        if switch["type"] not in SWITCH_TYPES:
            return _unknown_variant("thinking.type", switch["type"], SWITCH_TYPES)
    effort = c.body.get("reasoning_effort")
    if effort is not None and effort not in EFFORTS:
        return _unknown_variant("reasoning_effort", effort, EFFORTS)
    return None


def _invalid(message: str, status: int = 400) -> Rejection:
    return Rejection(status, message, INVALID, None, INVALID)


def _serde_expected(expected: str) -> str:
    variants = [f"`{v.strip()[1:-1]}`" for v in expected.split(",")]
    return f"expected {variants[0]}" if len(variants) == 1 else f"expected one of {', '.join(variants)}"


def shape_rejection(issue: cs.ShapeIssue) -> Rejection:
    # DeepSeek deserializes with serde: 422 "Failed to deserialize the JSON body into the target type"
    if issue.kind == "empty":
        return _invalid("Empty input messages")  # unverified wording
    if issue.kind == "missing":
        where, detail = issue.path[:-1], f"missing field `{issue.path[-1]}`"
    elif issue.kind == "type":
        where, detail = issue.path, f"invalid type: {cs.json_type_name(issue.got)}, expected {issue.expected}"
    elif issue.kind == "value":
        where, detail = issue.path[:-1], f"unknown variant `{issue.got}`, {_serde_expected(issue.expected)}"
    else:
        raise ValueError(f"unknown shape issue {issue.kind!r}")
    prefix = f"{cs.dotted(where)}: " if where else ""
    return _invalid(f"Failed to deserialize the JSON body into the target type: {prefix}{detail}", 422)


def reasoning_content(c: cf.Conversation) -> Rejection | None:
    if not thinking(c.model, c.body):
        return None
    return cf.require_reasoning_content(
        c,
        lambda i: _invalid(
            f"Missing reasoning_content field in the assistant message at message index {i}. For "
            "more information, "
            "please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
        ),
    )


TOOL_WITHOUT_CALL = "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"


def response_format(c: cf.Conversation) -> Rejection | None:
    """DeepSeek has JSON mode only; a json_schema response format is refused."""
    fmt = c.body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") not in ("text", "json_object"):
        return _invalid("This response_format type is unavailable now")
    return None


def pairing(c: cf.Conversation) -> Rejection | None:
    return cf.check_tool_pairing(
        c.messages,
        # unverified: an unknown id is reported like a tool message without a call
        unknown_id=lambda i, tid: _invalid(TOOL_WITHOUT_CALL),
        orphan_tool=lambda i: _invalid(TOOL_WITHOUT_CALL),
        # unverified wording
        unanswered=lambda i, ids: _invalid(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. (insufficient tool messages following tool_calls message)"
        ),
    )


def error_body(rejection: Rejection) -> dict:
    return {
        "error": {
            "message": rejection.message,
            "type": rejection.type,
            "param": rejection.param,
            "code": rejection.code,
        }
    }


def auth_rejection(key_sent: bool) -> Rejection:
    reason = "Your api key is invalid" if key_sent else "No api key provided"  # unverified wording
    return Rejection(
        401, f"Authentication Fails, {reason}", "authentication_error", None, "invalid_request_error"
    )


FAULTS: cf.FaultTable = {  # unverified type names; messages from DeepSeek's error code table
    400: (INVALID, "Invalid Format", INVALID),
    401: ("authentication_error", "Authentication Fails", "invalid_request_error"),
    402: ("unknown_error", "Insufficient Balance", "invalid_request_error"),
    429: ("rate_limit_error", "Rate Limit Reached", "rate_limit_error"),
    500: ("server_error", "Server Error", "server_error"),
    503: ("server_error", "Server Overloaded", "server_error"),
}


def usage(u: cr.Usage) -> dict:
    return {
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
        "prompt_cache_hit_tokens": u.cached,
        "prompt_cache_miss_tokens": u.prompt - u.cached,
    }


FINGERPRINT = "fp_5im0d33p_prod0820_fp8_kvcache"


def overflow(used: int, limit: int) -> Rejection:
    """DeepSeek's overflow: 400 invalid_request_error in OpenAI's words with the request's split
    (https://api-docs.deepseek.com/quick_start/error_codes: 400 "Invalid Format"; wording as
    reported in deepseek-ai/DeepSeek-V3 issues)."""
    return Rejection(
        400,
        f"This model's maximum context length is {limit} tokens. However, you requested {used} tokens "
        f"({used} in the messages, 0 in the completion). Please reduce the length of the messages or "
        "completion.",
        "invalid_request_error",
    )


DIALECT = cf.ChatDialect(
    kind="deepseek",
    roles=("system", "user", "assistant", "tool"),
    content_parts={role: ("text",) for role in ("system", "user", "assistant", "tool")},
    tool_choice_modes=("none", "auto", "required"),
    allowed_params=None,
    tool_call_type_required=True,
    shape_rejection=shape_rejection,
    rules=(reasoning_params, reasoning_content, response_format, pairing),
    error_body=error_body,
    overflow=overflow,
    fault_error=cf.fault_errors(FAULTS),
    auth_rejection=auth_rejection,
    invalid_json=_invalid("Failed to parse the request body as JSON"),
    reasons=thinking,
    rendering=cr.ChatRendering(
        completion_id=lambda: str(uuid.uuid4()),
        tool_call_id=lambda messages, n, name: f"call_{n:02d}_" + cr.random_token(24),
        usage=usage,
        role_delta=lambda t: (
            {"role": "assistant", "content": None, "reasoning_content": ""}
            if t
            else {"role": "assistant", "content": ""}
        ),
        reasoning_delta=lambda text: {"content": None, "reasoning_content": text},
        content_delta=lambda text, t: (
            {"content": text, "reasoning_content": None} if t else {"content": text}
        ),
        finish_delta=lambda t: {"content": "", "reasoning_content": None} if t else {"content": ""},
        message=cr.reasoning_content_message,
        usage_placement="finish",
        chunk_extra={"system_fingerprint": FINGERPRINT},
        choice_extra={"logprobs": None},
        body_extra={"system_fingerprint": FINGERPRINT},
        null_usage_on_chunks=True,
    ),
)


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return cf.check(DIALECT, body, model)[0]


def create_app(state: SimulatorState) -> web.Application:
    return cf.create_chat_app(state, DIALECT)
