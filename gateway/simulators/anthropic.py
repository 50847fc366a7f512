"""Strict simulator of the Anthropic Messages API (`POST /v1/messages`).

Answers in the API's own wire format (SSE with `event:` lines, or the Message JSON), issues
thinking signatures and redacted_thinking data bound to the model and content, and rejects
requests exactly like the API does (rules in `anthropic_rules`).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import string
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from gateway.simulators import structured
from gateway.simulators.anthropic_rules import (
    NONCE_LEN,
    check,
    check_count,
    omitted_thinking_signature,
    output_schema,
    redacted_data,
    thinking_signature,
    validate,
)
from gateway.simulators.base import (
    Fault,
    Rejection,
    Reply,
    SimulatorState,
    ToolCallSpec,
    intake,
    json_response,
    reset_connection,
    split_text,
    sse_frame,
    stream_sse,
)

__all__ = ["create_app", "validate"]

STATE_KEY = web.AppKey("anthropic_state", SimulatorState)
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {
    "invalid_request_error": "Invalid request.",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found.",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": (
        "This request would exceed the rate limit for your organization. Please try again later."
    ),
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}
BASE62 = string.ascii_letters + string.digits


def overflow(used: int, limit: int) -> Rejection:
    """Anthropic's overflow: 400 invalid_request_error "prompt is too long: N tokens > M maximum"
    (https://docs.claude.com/en/api/errors; Claude Code compacts on this wording)."""
    return Rejection(400, f"prompt is too long: {used} tokens > {limit} maximum")


def create_app(state: SimulatorState) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE_KEY] = state
    state.overflow = overflow
    app.router.add_post("/v1/messages", _messages)
    app.router.add_post("/v1/messages/count_tokens", _count_tokens)
    return app


def _base62(n: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(n))


def _request_id() -> str:
    return "req_011C" + _base62(20)


def _error_response(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    request_id = _request_id()
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return json_response(body, status, {"request-id": request_id, **(headers or {})})


def _precheck(state: SimulatorState, headers: Mapping[str, str], body: Any) -> Rejection | None:
    key = headers.get("x-api-key")
    if not key:
        return Rejection(401, "x-api-key header is required", "authentication_error")
    if not hmac.compare_digest(key, state.api_key):
        return Rejection(401, "invalid x-api-key", "authentication_error")
    if body is None:
        # unverified wording
        return Rejection(
            400,
            "There was an error parsing the body of your request. Please check that the body is valid JSON.",
        )
    if not headers.get("anthropic-version"):
        return Rejection(400, "anthropic-version: header is required")
    return None


async def _messages(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body, raw_len, rejection = await intake(request, state, _precheck, check)
    if rejection is not None:
        return _error_response(rejection.status, rejection.type, rejection.message)
    item = state.next_item(body)
    if isinstance(item, Fault):
        return await _inject(request, state, body, raw_len, item)
    return await _answer(request, state, body, raw_len, item, None)


async def _count_tokens(request: web.Request) -> web.StreamResponse:
    """Counts what the same body would cost as a message (the usage `_answer` reports). The body
    is the Messages request without `max_tokens` and `stream`, checked by the same rules."""
    state = request.app[STATE_KEY]
    body, raw_len, rejection = await intake(request, state, _precheck, check_count, window=False)
    if rejection is not None:
        return _error_response(rejection.status, rejection.type, rejection.message)
    return json_response({"input_tokens": max(1, raw_len // 4)})


async def _inject(
    request: web.Request, state: SimulatorState, body: dict, raw_len: int, fault: Fault
) -> web.StreamResponse:
    if fault.delay:
        await asyncio.sleep(fault.delay)
    if fault.reset_before_headers:
        return await reset_connection(request)
    if fault.status is not None:
        kind = fault.error_type or ERROR_TYPES.get(fault.status, "api_error")
        headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
        return _error_response(
            fault.status, kind, fault.message or ERROR_MESSAGES.get(kind, "Error"), headers
        )
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
    message = render_message(state, body, request.headers, reply, raw_len)
    request_id = _request_id()
    if body.get("stream") is True:
        frames = stream_frames(message, reply.chunk_size)
        return await stream_sse(request, state, frames, fault, error_frame, {"request-id": request_id})
    if fault is None:
        return json_response(message, headers={"request-id": request_id})
    # a non-streaming body cannot break half way: the fault becomes what the API would send instead
    if fault.mid_stream == "error":
        kind = fault.error_type or "overloaded_error"
        return _error_response(
            529 if kind == "overloaded_error" else 500,
            kind,
            fault.message or ERROR_MESSAGES.get(kind, "Error"),
        )
    if fault.mid_stream == "stall":
        await asyncio.sleep(fault.stall_seconds)
    return await reset_connection(request)


def error_frame(fault: Fault) -> bytes:
    kind = fault.error_type or "overloaded_error"
    message = fault.message or ERROR_MESSAGES.get(kind, "Error")
    return sse_frame({"type": "error", "error": {"type": kind, "message": message}}, "error")


def _thinking_enabled(body: dict) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _continues_tool_loop(body: dict) -> bool:
    last = body["messages"][-1]
    content = last["content"]
    return (
        last["role"] == "user"
        and isinstance(content, list)
        and any(block["type"] == "tool_result" for block in content)
    )


def offered_tools(body: dict) -> list[tuple[str, dict]]:
    """The tools a (valid) request offers, as (name, JSON schema of the input)."""
    return [(t["name"], t.get("input_schema") or {}) for t in body.get("tools") or () if "name" in t]


def after_tool_result(body: dict) -> bool:
    return _continues_tool_loop(body)


def _emits_thinking(body: dict, headers: Mapping[str, str]) -> bool:
    """Claude thinks once at the start of an assistant turn; after tool results it thinks again
    only with interleaved thinking (beta header, or adaptive thinking)."""
    if not _thinking_enabled(body):
        return False
    if body["thinking"]["type"] == "adaptive" or INTERLEAVED_THINKING_BETA in headers.get(
        "anthropic-beta", ""
    ):
        return True
    return not _continues_tool_loop(body)


def _forced_tool(body: dict) -> dict | None:
    """The tool a forcing tool_choice makes the model call when the script names none: the
    named one, or for "any" the last declared (where a client puts its answer tool)."""
    choice = body.get("tool_choice")
    tools = body.get("tools") or []
    if not isinstance(choice, dict) or not tools:
        return None
    if choice.get("type") == "tool":
        return next((t for t in tools if t.get("name") == choice.get("name")), None)
    return tools[-1] if choice.get("type") == "any" else None


def _structured(body: dict, reply: Reply) -> Reply:
    """The answer a constrained model gives: JSON valid for `output_config.format`, or a call of
    the forced tool with input valid for its schema; a refusal says why, as text."""
    if reply.refusal is not None:
        return replace(reply, text=reply.refusal, tool_calls=[])
    if reply.tool_calls:
        return reply
    forced = _forced_tool(body)
    if forced is not None:
        schema = forced.get("input_schema") or {"type": "object"}
        call = ToolCallSpec(forced["name"], structured.answer(schema, reply))
        return replace(reply, text="", tool_calls=[call])
    schema = output_schema(body)
    if schema is not None:
        return replace(reply, text=structured.answer_text(schema, reply))
    return reply


def render_message(
    state: SimulatorState, body: dict, headers: Mapping[str, str], reply: Reply, raw_len: int
) -> dict:
    """The complete Message JSON for `reply`; the stream is derived from it."""
    model = body["model"]
    content: list[dict] = []
    generated = 0
    if _emits_thinking(body, headers):
        if reply.reasoning:
            if body["thinking"].get("display") == "omitted":  # the text stays with the API
                nonce = secrets.token_hex(NONCE_LEN // 2)
                block = {"thinking": "", "signature": omitted_thinking_signature(state, model, nonce)}
            else:
                signature = thinking_signature(state, model, reply.reasoning)
                block = {"thinking": reply.reasoning, "signature": signature}
            content.append({"type": "thinking", **block})
            generated += len(reply.reasoning)
        if reply.redacted_reasoning:
            content.append(
                {
                    "type": "redacted_thinking",
                    "data": redacted_data(state, model, secrets.token_hex(NONCE_LEN // 2)),
                }
            )
    reply = _structured(body, reply)
    if reply.text:
        content.append({"type": "text", "text": reply.text})
        generated += len(reply.text)
    for call in reply.tool_calls:
        content.append(
            {"type": "tool_use", "id": "toolu_01" + _base62(22), "name": call.name, "input": call.arguments}
        )
        generated += len(orjson.dumps(call.arguments))
    if reply.stop == "length":
        stop_reason = "max_tokens"
    elif reply.refusal is not None:
        stop_reason = "refusal"
    else:
        stop_reason = "tool_use" if reply.tool_calls else "end_turn"
    return {
        "model": model,
        "id": "msg_01" + _base62(22),
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(1, raw_len // 4),
            "cache_creation_input_tokens": reply.cache_write,
            "cache_read_input_tokens": reply.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": reply.cache_write,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": max(1, generated // 4),
            "service_tier": "standard",
        },
    }


def _block_events(index: int, block: dict, chunk_size: int) -> list[dict]:
    kind = block["type"]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": part} for part in split_text(block["thinking"], chunk_size)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "redacted_thinking":
        start, deltas = block, []  # arrives complete, no deltas
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in split_text(block["text"], chunk_size)]
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        arguments = orjson.dumps(block["input"]).decode() if block["input"] else ""
        # a call without arguments still sends one empty fragment, like the API
        parts = split_text(arguments, chunk_size) or [""]
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
    else:
        raise ValueError(f"cannot stream a {kind!r} block")
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    if index == 0:
        events.append({"type": "ping"})
    events.extend({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas)
    events.append({"type": "content_block_stop", "index": index})
    return events


def stream_frames(message: dict, chunk_size: int) -> list[bytes]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict] = [{"type": "message_start", "message": start}]
    blocks = message["content"]
    for index, block in enumerate(blocks):
        events.extend(_block_events(index, block, chunk_size))
        if index < len(blocks) - 1:
            events.append({"type": "ping"})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {
                "input_tokens": usage["input_tokens"],
                "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                "cache_read_input_tokens": usage["cache_read_input_tokens"],
                "output_tokens": usage["output_tokens"],
            },
        }
    )
    events.append({"type": "message_stop"})
    return [sse_frame(event, event["type"]) for event in events]
