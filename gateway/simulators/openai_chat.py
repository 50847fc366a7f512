"""Strict simulator of OpenAI Chat Completions (/v1/chat/completions)."""

from __future__ import annotations

import re

from aiohttp import web

from gateway.simulators import chat_family as cf
from gateway.simulators import chat_render as cr
from gateway.simulators import chat_shapes as cs
from gateway.simulators import structured as struct
from gateway.simulators.base import Rejection, SimulatorState
from gateway.simulators.reasoning_rules import openai_effort_problem

MAX_TOOL_CALL_ID = 40
MAX_FUNCTION_NAME = 64
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
# Models that take max_completion_tokens only (reasoning models).
REASONING_MODEL = re.compile(r"^(o1|o3|o4|gpt-5)")

PARAMS = frozenset(
    [
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "seed",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
        "modalities",
        "audio",
        "prediction",
        "verbosity",
        "web_search_options",
        "prompt_cache_key",
        "safety_identifier",
        "functions",
        "function_call",
    ]
)


def _invalid(message: str, param: str | None = None, code: str | None = None) -> Rejection:
    return Rejection(400, message, "invalid_request_error", param, code)


def shape_rejection(issue: cs.ShapeIssue) -> Rejection:
    path = cs.dotted(issue.path)
    if issue.kind == "missing":
        return _invalid(f"Missing required parameter: '{path}'.", path, "missing_required_parameter")
    if issue.kind == "type":
        got = cs.json_type_name(issue.got)
        return _invalid(
            f"Invalid type for '{path}': expected {issue.expected}, but got {got} instead.",
            path,
            "invalid_type",
        )
    if issue.kind == "value":
        return _invalid(
            f"Invalid value: '{issue.got}'. Supported values are: {issue.expected}.", path, "invalid_value"
        )
    if issue.kind == "empty":
        return _invalid(
            f"Invalid '{path}': empty array. Expected an array with minimum length 1, but got an "
            "empty array instead.",
            path,
            "empty_array",
        )
    if issue.kind == "extra":
        return _invalid(f"Unrecognized request argument supplied: {path}")
    raise ValueError(f"unknown shape issue {issue.kind!r}")


def _too_long(path: str, limit: int, length: int) -> Rejection:
    return _invalid(
        f"Invalid '{path}': string too long. Expected a string with maximum length {limit}, "
        f"but got a string with length {length} instead.",
        path,
        "string_above_max_length",
    )


# Message properties per role; anything else is refused (a leaked provider field such as
# `reasoning_content` is the usual culprit).
MESSAGE_KEYS = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "function": frozenset({"role", "content", "name"}),
}


def message_properties(c: cf.Conversation) -> Rejection | None:
    for i, message in enumerate(c.messages):
        for key in message:
            if key not in MESSAGE_KEYS[message["role"]]:
                # unverified: the API's JSON-schema wording for unexpected message properties
                return _invalid(
                    f"Additional properties are not allowed ('{key}' was unexpected) - 'messages.{i}'"
                )
    return None


def id_lengths(c: cf.Conversation) -> Rejection | None:
    for i, message in enumerate(c.messages):
        for n, call in enumerate(message.get("tool_calls") or () if message["role"] == "assistant" else ()):
            if len(call["id"]) > MAX_TOOL_CALL_ID:
                return _too_long(f"messages[{i}].tool_calls[{n}].id", MAX_TOOL_CALL_ID, len(call["id"]))
        # unverified: the same limit worded for the answering side
        if message["role"] == "tool" and len(message["tool_call_id"]) > MAX_TOOL_CALL_ID:
            return _too_long(f"messages[{i}].tool_call_id", MAX_TOOL_CALL_ID, len(message["tool_call_id"]))
    return None


def function_names(c: cf.Conversation) -> Rejection | None:
    for i, tool in enumerate(c.body.get("tools") or ()):
        name = tool["function"]["name"]
        path = f"tools[{i}].function.name"
        if len(name) > MAX_FUNCTION_NAME:
            return _too_long(path, MAX_FUNCTION_NAME, len(name))
        if not FUNCTION_NAME.match(name):
            return _invalid(
                f"Invalid '{path}': string does not match pattern. "
                f"Expected a string that matches the pattern '{FUNCTION_NAME.pattern}'.",
                path,
                "invalid_value",
            )
    return None


def reasoning_effort(c: cf.Conversation) -> Rejection | None:
    effort = c.body.get("reasoning_effort")
    if effort is None:
        return None
    problem = openai_effort_problem(c.model, effort, "reasoning_effort")
    return _invalid(problem[0], "reasoning_effort", problem[1]) if problem is not None else None


def parameter_combinations(c: cf.Conversation) -> Rejection | None:
    body = c.body
    if body.get("tool_choice") is not None and not body.get("tools"):
        return _invalid(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            "tool_choice",
        )
    if body.get("stream_options") is not None and not body.get("stream"):
        return _invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options"
        )
    if body.get("max_tokens") is not None and REASONING_MODEL.match(c.model):
        return _invalid(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    return None


FORMAT_TYPES = ("text", "json_object", "json_schema")


def response_format(c: cf.Conversation) -> Rejection | None:
    """`response_format`: its type, a named schema, OpenAI's strict-schema rules, and JSON mode's
    demand that the messages mention JSON."""
    fmt = c.body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        return _invalid(
            "Invalid type for 'response_format': expected an object, but got "
            f"{cs.json_type_name(fmt)} instead.",
            "response_format",
            "invalid_type",
        )
    kind = fmt.get("type")
    if kind not in FORMAT_TYPES:
        return _invalid(
            f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object', and 'json_schema'.",
            "response_format.type",
            "invalid_value",
        )
    if kind == "json_object" and not struct.mentions_json(cf.message_texts(c.messages)):
        return _invalid(
            "'messages' must contain the word 'json' in some form, to use 'response_format' of type "
            "'json_object'.",
            "messages",
        )
    if kind != "json_schema":
        return None
    spec = fmt.get("json_schema")
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str):
        missing = "response_format.json_schema" + (".name" if isinstance(spec, dict) else "")
        return _invalid(f"Missing required parameter: '{missing}'.", missing, "missing_required_parameter")
    if spec.get("strict") is True:
        problem = struct.strict_schema_problem(spec.get("schema") or {})
        if problem:
            return _invalid(
                f"Invalid schema for response_format '{name}': {problem}",
                "response_format",
                "invalid_json_schema",
            )
    return None


def pairing(c: cf.Conversation) -> Rejection | None:
    return cf.check_tool_pairing(
        c.messages,
        unknown_id=lambda i, tid: _invalid(
            f"Invalid parameter: 'tool_call_id' of '{tid}' not found in 'tool_calls' of previous message.",
            f"messages.[{i}].tool_call_id",
        ),
        orphan_tool=lambda i: _invalid(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
            "message with 'tool_calls'.",
            f"messages.[{i}].role",
        ),
        unanswered=lambda i, ids: _invalid(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
            f"messages.[{i}].role",
        ),
    )


def auth_rejection(key_sent: bool) -> Rejection:
    if key_sent:
        return Rejection(
            401,
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            None,
            "invalid_api_key",
        )
    return Rejection(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header "
        "using Bearer "
        "auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from "
        "https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
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


FAULTS: cf.FaultTable = {
    400: ("invalid_request_error", "Invalid request.", None),
    401: ("invalid_request_error", "Incorrect API key provided.", "invalid_api_key"),
    403: ("invalid_request_error", "You are not allowed to sample from this model", "model_not_found"),
    404: (
        "invalid_request_error",
        "The model does not exist or you do not have access to it.",
        "model_not_found",
    ),
    429: ("requests", "Rate limit reached for requests. Please try again later.", "rate_limit_exceeded"),
    500: ("server_error", "The server had an error while processing your request. Sorry about that!", None),
    502: ("server_error", "Bad gateway.", None),
    503: ("server_error", "The server is overloaded or not ready yet.", "server_is_overloaded"),
}


def usage(u: cr.Usage) -> dict:
    return {
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": {"cached_tokens": u.cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": u.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def message(text: str, reasoning: str, calls: list[cr.RenderedCall], thinking: bool) -> dict:
    out: dict = {"role": "assistant", "content": text or None, "refusal": None, "annotations": []}
    if calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return out


FINGERPRINT = "fp_5im0c4a7"


def overflow(used: int, limit: int) -> Rejection:
    """OpenAI Chat's context-window overflow: 400, code context_length_exceeded, param messages
    (https://platform.openai.com/docs/guides/error-codes; the wording as the API returns it, e.g.
    openai/openai-python#1162)."""
    return Rejection(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{used} tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "messages",
        "context_length_exceeded",
    )


DIALECT = cf.ChatDialect(
    kind="openai_chat",
    roles=("system", "assistant", "user", "function", "tool", "developer"),
    content_parts={
        "user": ("text", "image_url", "input_audio", "file"),
        "assistant": ("text", "refusal"),
        "system": ("text",),
        "developer": ("text",),
        "tool": ("text",),
    },
    tool_choice_modes=("none", "auto", "required"),
    allowed_params=PARAMS,
    tool_call_type_required=True,
    shape_rejection=shape_rejection,
    rules=(
        message_properties,
        id_lengths,
        function_names,
        parameter_combinations,
        reasoning_effort,
        response_format,
        pairing,
    ),
    error_body=error_body,
    overflow=overflow,
    fault_error=cf.fault_errors(FAULTS),
    auth_rejection=auth_rejection,
    invalid_json=_invalid(
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP "
        "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
    ),
    reasons=lambda model, body: False,  # chat completions never return reasoning text
    rendering=cr.ChatRendering(
        completion_id=lambda: "chatcmpl-" + cr.random_token(29),
        tool_call_id=lambda messages, n, name: "call_" + cr.random_token(24),
        usage=usage,
        role_delta=lambda thinking: {"role": "assistant", "content": "", "refusal": None},
        content_delta=lambda text, thinking: {"content": text},
        finish_delta=lambda thinking: {},
        message=message,
        usage_placement="trailing",
        chunk_extra={"service_tier": "default", "system_fingerprint": FINGERPRINT},
        choice_extra={"logprobs": None},
        body_extra={"service_tier": "default", "system_fingerprint": FINGERPRINT},
        null_usage_on_chunks=True,
        role_merges_into_tool_delta=True,
        refusals=True,
    ),
)


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return cf.check(DIALECT, body, model)[0]


def create_app(state: SimulatorState) -> web.Application:
    return cf.create_chat_app(state, DIALECT)
