"""Strict simulator of the OpenAI Responses API (`POST /v1/responses`), stateless use only.

Reasoning items carry `encrypted_content` bound to the model, the item id and its summary; calls
made after reasoning are bound to that reasoning item. Rules live in `responses_rules`, rendering
in `responses_render`.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gateway.simulators.base import (
    Fault,
    Rejection,
    Reply,
    SimulatorState,
    intake,
    json_response,
    reset_connection,
    stream_sse,
)
from gateway.simulators.responses_render import failure_frames, render, stream_frames
from gateway.simulators.responses_rules import check, validate

__all__ = ["create_app", "validate"]

STATE_KEY = web.AppKey("openai_responses_state", SimulatorState)
INVALID_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you "
    "have trouble figuring out how to fix this, please contact us through our help center at "
    "help.openai.com.)"
)
NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're "
    "accessing the API from your browser and are prompted for a username and password. You can obtain an API "
    "key from https://platform.openai.com/account/api-keys."
)
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more information on "
    "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)
SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"
STREAM_SERVER_ERROR = (
    "An error occurred while processing your request. You can retry your request, or contact us through our "
    "help center at help.openai.com if the error persists."
)
# status -> (type, code, message) of the API's error body
STATUS_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model does not exist or you do not have access to it.",
    ),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, SERVER_ERROR),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", "server_is_overloaded", "The server is overloaded. Please try again later."),
}
# Fault.error_type names with their own (type, code, message)
NAMED_ERRORS: dict[str, tuple[str, str | None, str]] = {
    "insufficient_quota": ("insufficient_quota", "insufficient_quota", QUOTA),
    "rate_limit_exceeded": ("requests", "rate_limit_exceeded", STATUS_ERRORS[429][2]),
    "server_error": ("server_error", "server_error", STREAM_SERVER_ERROR),
    "server_is_overloaded": ("server_error", "server_is_overloaded", STATUS_ERRORS[503][2]),
}


def offered_tools(body: dict) -> list[tuple[str, dict]]:
    """The function tools a (valid) request offers, as (name, JSON schema of the arguments)."""
    return [
        (t["name"], t.get("parameters") or {})
        for t in body.get("tools") or ()
        if t.get("type") == "function" and "name" in t
    ]


def after_tool_result(body: dict) -> bool:
    items = body.get("input")
    return isinstance(items, list) and bool(items) and items[-1].get("type") == "function_call_output"


def overflow(used: int, limit: int) -> Rejection:
    """The Responses API's overflow: 400 invalid_request_error, code context_length_exceeded, param
    input, "Your input exceeds the context window of this model. Please adjust your input and try
    again." (the same code and message Codex reads from `response.failed`)."""
    return Rejection(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "invalid_request_error",
        "input",
        "context_length_exceeded",
    )


def create_app(state: SimulatorState) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE_KEY] = state
    state.overflow = overflow
    app.router.add_post("/v1/responses", _responses)
    return app


def _error_body(kind: str, code: str | None, message: str, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error_response(status: int, body: dict, headers: Mapping[str, str] | None = None) -> web.Response:
    return json_response(body, status, {"x-request-id": "req_" + secrets.token_hex(16), **(headers or {})})


def _fault_error(fault: Fault, default_status: int) -> tuple[str, str | None, str]:
    if fault.error_type is not None:
        kind, code, message = NAMED_ERRORS.get(
            fault.error_type, (fault.error_type, fault.error_type, SERVER_ERROR)
        )
    else:
        kind, code, message = STATUS_ERRORS.get(default_status, ("server_error", None, SERVER_ERROR))
    return kind, code, fault.message or message


def _stream_error(fault: Fault) -> tuple[str, str | None, str]:
    name = fault.error_type or "server_error"
    kind, code, message = NAMED_ERRORS.get(name, (name, name, STREAM_SERVER_ERROR))
    return kind, code, fault.message or message


def _precheck(state: SimulatorState, headers: Mapping[str, str], body: Any) -> Rejection | None:
    auth = headers.get("Authorization")
    if not auth:
        return Rejection(401, NO_KEY)
    if not hmac.compare_digest(auth, f"Bearer {state.api_key}"):
        key = auth.removeprefix("Bearer ")
        masked = key[:3] + "*" * max(0, len(key) - 7) + key[-4:] if len(key) > 7 else "*" * len(key)
        return Rejection(
            401,
            f"Incorrect API key provided: {masked}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )
    if body is None:
        return Rejection(400, INVALID_JSON)
    return None


async def _responses(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body, raw_len, rejection = await intake(request, state, _precheck, check)
    if rejection is not None:
        return _error_response(
            rejection.status, _error_body(rejection.type, rejection.code, rejection.message, rejection.param)
        )
    item = state.next_item(body)
    if isinstance(item, Fault):
        return await _inject(request, state, body, raw_len, item)
    return await _answer(request, state, body, raw_len, item, None)


async def _inject(
    request: web.Request, state: SimulatorState, body: dict, raw_len: int, fault: Fault
) -> web.StreamResponse:
    if fault.delay:
        await asyncio.sleep(fault.delay)
    if fault.reset_before_headers:
        return await reset_connection(request)
    if fault.status is not None:
        kind, code, message = _fault_error(fault, fault.status)
        headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
        return _error_response(fault.status, _error_body(kind, code, message), headers)
    reply = fault.reply or state.default_reply(body)
    return await _answer(
        request, state, body, raw_len, reply, fault if fault.after_events is not None else None
    )


async def _answer(
    request: web.Request,
    state: SimulatorState,
    body: dict,
    raw_len: int,
    reply: Reply,
    fault: Fault | None,
) -> web.StreamResponse:
    rendered = render(state, body, reply, raw_len)
    request_id = "req_" + secrets.token_hex(16)
    if body.get("stream") is True:
        frames = stream_frames(rendered, reply.chunk_size)

        def error_frame(f: Fault) -> bytes:
            kind, code, message = _stream_error(f)
            return failure_frames(rendered.shell, f.after_events or 0, kind, code, message)

        return await stream_sse(request, state, frames, fault, error_frame, {"x-request-id": request_id})
    if fault is None:
        return json_response(rendered.response, headers={"x-request-id": request_id})
    # a non-streaming body cannot break half way: the fault becomes what the API would send instead
    if fault.mid_stream == "error":
        kind, code, message = _fault_error(fault, 500)
        return _error_response(500, _error_body(kind, code, message))
    if fault.mid_stream == "stall":
        await asyncio.sleep(fault.stall_seconds)
    return await reset_connection(request)
