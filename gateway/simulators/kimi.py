"""Strict simulator of Moonshot Kimi chat completions (OpenAI-compatible, with thinking models)."""

from __future__ import annotations

import re
import uuid

from aiohttp import web

from gateway.simulators import chat_family as cf
from gateway.simulators import chat_render as cr
from gateway.simulators import chat_shapes as cs
from gateway.simulators.base import Rejection, SimulatorState

NATIVE_ID = re.compile(r"^functions\.[\w-]+:\d+$")
INVALID = "invalid_request_error"


# https://platform.kimi.ai/docs/api/models-overview: K2.5 and later think unless `thinking:
# {"type": "disabled"}`; kimi-k2-thinking models always think
SWITCHABLE = re.compile(r"kimi-k(?:2\.[5-9]|[3-9])")


def thinking(model: str, body: dict) -> bool:
    if "thinking" in model:
        return True
    switch = cf.thinking_param(body)
    if switch is not None:
        return switch == "enabled"
    return SWITCHABLE.match(model) is not None


def thinking_switch(c: cf.Conversation) -> Rejection | None:
    if "thinking" not in c.body:
        return None
    switch = c.body["thinking"]
    kind = switch.get("type") if isinstance(switch, dict) else None
    if kind not in ("enabled", "disabled"):
        return _invalid(
            f"Invalid request: thinking.type must be one of enabled, disabled, got '{kind}'"
        )  # unverified
    if kind == "disabled" and "thinking" in c.model:
        return _invalid(f"Invalid request: thinking cannot be disabled for model {c.model}")  # unverified
    return None


def _invalid(message: str) -> Rejection:
    return Rejection(400, message, INVALID)


def shape_rejection(issue: cs.ShapeIssue) -> Rejection:
    # unverified wordings: Moonshot prefixes request problems with "Invalid request: "
    path = cs.dotted(issue.path)
    if issue.kind == "missing":
        return _invalid(f"Invalid request: {path} is required")
    if issue.kind == "type":
        return _invalid(
            f"Invalid request: {path} must be {issue.expected}, got {cs.json_type_name(issue.got)}"
        )
    if issue.kind == "value":
        return _invalid(f"Invalid request: {path} must be one of {issue.expected}, got '{issue.got}'")
    if issue.kind == "empty":
        return _invalid(f"Invalid request: {path} must not be empty")
    raise ValueError(f"unknown shape issue {issue.kind!r}")


# models with JSON-schema output (K2.5 and later); the rest have JSON mode only
JSON_SCHEMA_MODELS = re.compile(r"kimi-k(?:2\.[5-9]|[3-9])")


def response_format(c: cf.Conversation) -> Rejection | None:
    fmt = c.body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    if kind == "json_schema" and not JSON_SCHEMA_MODELS.match(c.model):
        # unverified wording
        return _invalid(f"Invalid request: response_format type json_schema is not supported by {c.model}")
    if kind not in ("text", "json_object", "json_schema"):
        return _invalid(
            f"Invalid request: response_format.type must be one of text, json_object, got '{kind}'"
        )
    return None


def reasoning_content(c: cf.Conversation) -> Rejection | None:
    if not thinking(c.model, c.body):
        return None
    return cf.require_reasoning_content(
        c,
        lambda i: _invalid(
            "thinking is enabled but reasoning_content is missing in assistant tool call message "
            f"at index {i}"
        ),
    )


# models with image input: K2.5 and the moonshot-v1 vision previews
# (https://platform.moonshot.ai/docs/guide/use-kimi-vision-model); the others are text models
VISION_MODELS = re.compile(r"kimi-k(?:2\.[5-9]|[3-9])|kimi-latest|moonshot-v1-[0-9a-z]+-vision")


def vision(c: cf.Conversation) -> Rejection | None:
    if VISION_MODELS.match(c.model):
        return None
    for message in c.messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            p.get("type") == "image_url" for p in content if isinstance(p, dict)
        ):
            # unverified wording
            return _invalid(f"Invalid request: model {c.model} does not support image input")
    return None


def pairing(c: cf.Conversation) -> Rejection | None:
    # unverified wordings; the pairing itself mirrors the OpenAI API Kimi is compatible with
    return cf.check_tool_pairing(
        c.messages,
        unknown_id=lambda i, tid: _invalid(f"Invalid request: tool_call_id {tid} is not found"),
        orphan_tool=lambda i: _invalid(
            f"Invalid request: tool_call_id {c.messages[i]['tool_call_id']} is not found"
        ),
        unanswered=lambda i, ids: _invalid(
            "Invalid request: an assistant message with 'tool_calls' must be followed by tool "
            "messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(ids)}"
        ),
    )


def native_ids(c: cf.Conversation) -> Rejection | None:
    """Accepted, but Kimi models act unreliably on ids not in their own global-index form."""
    index = 0
    for i, message in enumerate(c.messages):
        if message["role"] != "assistant":
            continue
        for n, call in enumerate(message.get("tool_calls") or ()):
            expected = f"functions.{call['function']['name']}:{index}"
            if not NATIVE_ID.match(call["id"]):
                c.findings.quality_warnings.append(
                    f"messages[{i}].tool_calls[{n}].id {call['id']!r} is not a native Kimi id "
                    f"(expected {expected!r})"
                )
            elif call["id"] != expected:
                c.findings.quality_warnings.append(
                    f"messages[{i}].tool_calls[{n}].id {call['id']!r} does not match the call's "
                    "name and global "
                    f"index (expected {expected!r})"
                )
            index += 1
    return None


def error_body(rejection: Rejection) -> dict:
    return {"error": {"message": rejection.message, "type": rejection.type}}


def auth_rejection(key_sent: bool) -> Rejection:
    return Rejection(401, "Invalid Authentication", "invalid_authentication_error")


FAULTS: cf.FaultTable = {
    400: (INVALID, "Invalid request", None),
    401: ("invalid_authentication_error", "Invalid Authentication", None),
    403: ("permission_denied_error", "The API you are accessing is not open", None),
    404: ("resource_not_found_error", "Not found the model or Permission denied", None),
    429: ("rate_limit_reached_error", "Your account reached max request rate, please try again later", None),
    500: ("server_error", "Internal server error", None),
    503: ("engine_overloaded_error", "The engine is currently overloaded, please try again later", None),
}


def prior_calls(messages: list[dict]) -> int:
    return sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")


def usage(u: cr.Usage) -> dict:
    return {
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "cached_tokens": u.cached,
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
        "prompt_tokens_details": {"cached_tokens": u.cached},
    }


def overflow(used: int, limit: int) -> Rejection:
    """Moonshot's overflow: 400 invalid_request_error "Invalid request: Your request exceeded
    model token limit: <limit>" (https://platform.moonshot.ai/docs/api/errors)."""
    return Rejection(
        400, f"Invalid request: Your request exceeded model token limit: {limit}", "invalid_request_error"
    )


DIALECT = cf.ChatDialect(
    kind="kimi",
    roles=("system", "user", "assistant", "tool"),
    content_parts={"user": ("text", "image_url", "video_url")},
    tool_choice_modes=("none", "auto", "required"),
    allowed_params=None,
    tool_call_type_required=True,
    shape_rejection=shape_rejection,
    rules=(thinking_switch, reasoning_content, response_format, vision, pairing, native_ids),
    error_body=error_body,
    overflow=overflow,
    fault_error=cf.fault_errors(FAULTS),
    auth_rejection=auth_rejection,
    invalid_json=_invalid("Invalid request: failed to parse the request body as JSON"),  # unverified wording
    reasons=thinking,
    rendering=cr.ChatRendering(
        completion_id=lambda: f"chatcmpl-{uuid.uuid4()}",
        tool_call_id=lambda messages, n, name: f"functions.{name}:{prior_calls(messages) + n}",
        usage=usage,
        role_delta=lambda t: {"role": "assistant", "content": ""},
        reasoning_delta=lambda text: {"reasoning_content": text},
        content_delta=lambda text, t: {"content": text},
        finish_delta=lambda t: {},
        message=cr.reasoning_content_message,
        usage_placement="choice",
    ),
)


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return cf.check(DIALECT, body, model)[0]


def create_app(state: SimulatorState) -> web.Application:
    return cf.create_chat_app(state, DIALECT)
