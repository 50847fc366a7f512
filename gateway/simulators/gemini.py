"""Strict simulator of the Gemini API (v1beta generateContent / streamGenerateContent).

Gemini 3 thought signatures are issued with the state's key, bound to the model and the content
they cover (a function call's name and arguments; a text answer's text), and verified when they
come back in the current turn, as the real API does (rules in `gemini_rules`).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from gateway.simulators import structured
from gateway.simulators.base import (
    Fault,
    RecordedRequest,
    Rejection,
    Reply,
    SimulatorState,
    json_response,
    reset_connection,
    stream_sse,
)
from gateway.simulators.gemini_render import ReplyRenderer
from gateway.simulators.gemini_rules import (
    after_tool_result,
    check,
    forced_tool,
    invalid,
    offered_tools,
    response_json_schema,
    validate,
)

__all__ = ["after_tool_result", "check", "create_app", "forced_tool", "offered_tools", "validate"]

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
FAULT_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "API key not valid. Please pass a valid API key.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "You exceeded your current quota, please check your plan and billing details. For more "
    "information on "
    "this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}


def error_body(rejection: Rejection, details: list[dict] | None = None) -> dict:
    error: dict[str, Any] = {"code": rejection.status, "message": rejection.message, "status": rejection.type}
    if details:
        error["details"] = details
    return {"error": error}


def fault_rejection(status: int, fault: Fault) -> Rejection:
    return Rejection(
        status,
        fault.message or FAULT_MESSAGES.get(status, FAULT_MESSAGES[500]),
        fault.error_type or STATUS_NAMES.get(status, "INTERNAL"),
    )


def _retry_details(fault: Fault) -> list[dict] | None:
    if fault.retry_after is None:
        return None
    return [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{fault.retry_after:g}s"}]


def _sse(payload: dict) -> bytes:
    # Google frames its SSE events with CRLF
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


def _fault_frame(fault: Fault) -> bytes:
    return _sse(error_body(fault_rejection(fault.status or 500, fault)))


def _array_frames(chunks: list[dict]) -> list[bytes]:
    """streamGenerateContent without alt=sse: one JSON array, written element by element."""
    frames = [(b"[" if n == 0 else b",\r\n") + orjson.dumps(chunk) for n, chunk in enumerate(chunks)]
    frames.append(b"]")
    return frames


def _array_fault_frame(fault: Fault) -> bytes:
    return b",\r\n" + orjson.dumps(error_body(fault_rejection(fault.status or 500, fault))) + b"]"


AUTH_MISSING = Rejection(
    401,
    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
    "cookie or other "
    "valid authentication credential.",
    "UNAUTHENTICATED",
)
# The real API answers a wrong key with 400 API_KEY_INVALID; the simulators' contract is a 401.
AUTH_INVALID = Rejection(401, "API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")
INVALID_KEY_DETAILS = [
    {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
    }
]


COUNT_KEYS = frozenset(("contents", "generateContentRequest"))


async def _count_tokens(
    request: web.Request, state: SimulatorState, model: str, headers: dict[str, str]
) -> web.Response:
    """`:countTokens` with `contents`, or a whole `generateContentRequest` (checked by the same
    rules as generateContent); the count is what generateContent reports as promptTokenCount."""
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    rejection = None
    inner: Any = None
    if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in COUNT_KEYS:
        rejection = invalid("Exactly one of contents or generateContentRequest must be set.")  # unverified
    elif "contents" in body:
        inner = {"contents": body["contents"]}
    else:
        given = body["generateContentRequest"]
        inner = dict(given) if isinstance(given, dict) else {}
        if inner.pop("model", None) != f"models/{model}":
            rejection = invalid("generateContentRequest.model must name the model of the URL.")  # unverified
    if rejection is None:
        rejection = check(state, inner, model)[0]
    state.requests.append(RecordedRequest(request.path, headers, body, rejection))
    if rejection is not None:
        return json_response(error_body(rejection), rejection.status)
    return json_response({"totalTokens": max(1, len(orjson.dumps(inner)) // 4)})


EMBED_KEYS = frozenset(("model", "content", "taskType", "title", "outputDimensionality"))
TASK_TYPES = frozenset(
    (
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    )
)


def _embed_rejection(item: Any, model: str, batch: bool) -> Rejection | None:
    """One EmbedContentRequest: known fields only, text parts, the URL's model (required in a
    batch), a known task type, a positive dimensionality."""
    if not isinstance(item, dict):
        return invalid("Invalid JSON payload received. Expected an object.")
    for key in item:
        if key not in EMBED_KEYS:
            return invalid(f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
    given = item.get("model")
    if (batch or given is not None) and given != f"models/{model}":
        return invalid(
            f"Model names must match: the request is for models/{model}, got {given}."
        )  # unverified
    content = item.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts:
        return invalid("* EmbedContentRequest.content: contents is not specified\n")
    if not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        return invalid("* EmbedContentRequest.content.parts: only text parts can be embedded\n")  # unverified
    task = item.get("taskType")
    if task is not None and task not in TASK_TYPES:
        return invalid(
            "Invalid value at 'task_type' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), "{task}"'
        )
    dimensions = item.get("outputDimensionality")
    if dimensions is not None and (type(dimensions) is not int or dimensions <= 0):
        return invalid("* EmbedContentRequest.output_dimensionality: must be positive\n")  # unverified
    return None


def _embedding(item: dict) -> dict:
    text = " ".join(p["text"] for p in item["content"]["parts"])
    size = item.get("outputDimensionality") or 8
    seed = zlib.crc32(text.encode())
    return {"values": [round(((seed >> i) % 1000) / 1000, 3) for i in range(size)]}


async def _embed(
    request: web.Request, state: SimulatorState, model: str, action: str, headers: dict[str, str]
) -> web.Response:
    """`:embedContent` and `:batchEmbedContents`, as strict about their bodies as Google."""
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        body = None
    batch = action == "batchEmbedContents"
    items = body.get("requests") if batch and isinstance(body, dict) else [body]
    rejection = None
    if batch and (
        not isinstance(body, dict) or set(body) != {"requests"} or not isinstance(items, list) or not items
    ):
        rejection = invalid("* BatchEmbedContentsRequest.requests: requests is not specified\n")
    else:
        rejection = next((r for r in (_embed_rejection(i, model, batch) for i in items) if r), None)
    state.requests.append(RecordedRequest(request.path, headers, body, rejection))
    if rejection is not None:
        return json_response(error_body(rejection), rejection.status)
    if batch:
        return json_response({"embeddings": [_embedding(i) for i in items]})
    return json_response({"embedding": _embedding(body)})


def overflow(used: int, limit: int) -> Rejection:
    """Gemini's overflow: 400 INVALID_ARGUMENT "The input token count (N) exceeds the maximum
    number of tokens allowed (M)." (https://ai.google.dev/gemini-api/docs/troubleshooting:
    INVALID_ARGUMENT; wording as google-gemini/gemini-cli reports it)."""
    return invalid(f"The input token count ({used}) exceeds the maximum number of tokens allowed ({limit}).")


def create_app(state: SimulatorState) -> web.Application:
    state.overflow = overflow

    async def models(request: web.Request) -> web.StreamResponse:
        headers = dict(request.headers)
        model, _, action = request.match_info["model_and_action"].rpartition(":")
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if key != state.api_key:
            rejection = AUTH_INVALID if key else AUTH_MISSING
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(
                error_body(rejection, INVALID_KEY_DETAILS if key else None), rejection.status
            )
        if action == "countTokens" and model:
            return await _count_tokens(request, state, model, headers)
        if action in ("embedContent", "batchEmbedContents") and model:
            return await _embed(request, state, model, action, headers)
        if action not in ("generateContent", "streamGenerateContent") or not model:
            rejection = Rejection(404, f"models/{model} is not found for API version v1beta.", "NOT_FOUND")
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(error_body(rejection), 404)
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            rejection = invalid("Invalid JSON payload received. Unexpected token.")
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(error_body(rejection), 400)
        rejection, findings, req = check(state, body, model)
        rejection = rejection or state.over_window(len(raw))
        state.requests.append(RecordedRequest(request.path, headers, body, rejection))
        if rejection is not None:
            return json_response(error_body(rejection), rejection.status)
        state.verified_tokens += findings.verified
        state.placeholder_tokens += findings.placeholders
        item = state.next_item(body)
        fault = item if isinstance(item, Fault) else None
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.reset_before_headers:
                return await reset_connection(request)
            if fault.status is not None and fault.after_events is None:
                return json_response(
                    error_body(fault_rejection(fault.status, fault), _retry_details(fault)), fault.status
                )
        reply = (
            item
            if isinstance(item, Reply)
            else (fault.reply if fault and fault.reply else state.default_reply(body))
        )
        reply = structured.forced_call(reply, forced_tool(req))
        schema = response_json_schema(req)
        if schema is not None and not reply.tool_calls:
            reply = replace(reply, text=structured.answer_text(schema, reply))
        renderer = ReplyRenderer(state, model, req, reply, len(raw))
        if action == "streamGenerateContent":
            sse = request.query.get("alt") == "sse"
            chunks = renderer.chunks()
            frames = [_sse(c) for c in chunks] if sse else _array_frames(chunks)
            error_frame: Callable[[Fault], bytes] = _fault_frame if sse else _array_fault_frame
            headers_out = None if sse else {"Content-Type": "application/json"}
            return await stream_sse(request, state, frames, fault, error_frame, headers_out)
        if fault is not None and fault.after_events is not None:
            # a non-streamed answer has no middle: the fault hits before the body is sent
            if fault.mid_stream == "reset":
                return await reset_connection(request)
            if fault.mid_stream == "stall":
                await asyncio.sleep(fault.stall_seconds)
            else:
                status = fault.status or 500
                return json_response(
                    error_body(fault_rejection(status, fault), _retry_details(fault)), status
                )
        return json_response(renderer.body())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1beta/models/{model_and_action}", models)
    return app
