"""Shared machinery of the Chat Completions simulators (openai_chat, mistral, kimi, deepseek).

Each provider module describes its dialect as data (`ChatDialect`): which roles and parameters it
knows, how it words body-shape errors, its ordering/pairing rules, its error envelope, and how its
stream looks (`chat_render.ChatRendering`). This module checks the common body shape (`chat_shapes`),
runs the dialect's rules and serves the answers; it never branches on which provider it is serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from gateway.simulators.base import (
    Fault,
    RecordedRequest,
    Rejection,
    Reply,
    SimulatorState,
    json_response,
    reset_connection,
    sse_frame,
    stream_sse,
)
from gateway.simulators.chat_render import ChatRendering, ReplyRenderer
from gateway.simulators.chat_shapes import ShapeIssue, check_shape
from gateway.simulators.structured import (
    answer_text,
    forced_call,
    pick_forced,
    schema_in_instructions,
    unbounded_problem,
)


def offered_tools(body: dict) -> list[tuple[str, dict]]:
    """The function tools a (valid) request offers, as (name, JSON schema of the arguments)."""
    return [
        (t["function"]["name"], t["function"].get("parameters") or {})
        for t in body.get("tools") or ()
        if isinstance(t.get("function"), dict) and "name" in t["function"]
    ]


def after_tool_result(body: dict) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[-1].get("role") == "tool"


# -- conversation rules -----------------------------------------------------------------------
@dataclass
class Findings:
    """What validation noticed besides a rejection; applied to the state only when accepted."""

    quality_warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Conversation:
    body: dict
    model: str
    messages: list[dict]
    findings: Findings


Rule = Callable[[Conversation], Rejection | None]


def call_ids(message: dict) -> list[str]:
    return [call["id"] for call in message.get("tool_calls") or ()]


def check_tool_pairing(
    messages: Sequence[dict],
    *,
    unknown_id: Callable[[int, str], Rejection],
    orphan_tool: Callable[[int], Rejection],
    unanswered: Callable[[int, list[str]], Rejection],
) -> Rejection | None:
    """Calls answered by the tool messages right after them; tool messages answer those calls.

    `unanswered` gets the index of the message that broke the run (the calling assistant
    message when the conversation ends there) and the ids left without a response."""
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        ids = call_ids(message) if message["role"] == "assistant" else []
        if ids:
            answered: set[str] = set()
            j = i + 1
            while j < n and messages[j]["role"] == "tool":
                tool_call_id = messages[j]["tool_call_id"]
                if tool_call_id not in ids:
                    return unknown_id(j, tool_call_id)
                answered.add(tool_call_id)
                j += 1
            missing = [tid for tid in ids if tid not in answered]
            if missing:
                return unanswered(j if j < n else i, missing)
            i = j
            continue
        if message["role"] == "tool":
            return orphan_tool(i)
        i += 1
    return None


def require_reasoning_content(
    conversation: Conversation, rejection: Callable[[int], Rejection]
) -> Rejection | None:
    """Thinking-mode rule of DeepSeek and Kimi: assistant tool-call turns carry their reasoning."""
    for i, message in enumerate(conversation.messages):
        has_calls = message["role"] == "assistant" and message.get("tool_calls")
        if has_calls and not isinstance(message.get("reasoning_content"), str):
            return rejection(i)
    return None


def thinking_param(body: dict) -> str | None:
    """The `thinking: {"type": ...}` switch DeepSeek and Kimi accept, if given."""
    thinking = body.get("thinking")
    return thinking.get("type") if isinstance(thinking, dict) else None


@dataclass(frozen=True)
class ChatDialect:
    kind: str
    roles: tuple[str, ...]
    content_parts: Mapping[str, tuple[str, ...]]  # role -> content part types it accepts
    tool_choice_modes: tuple[str, ...]
    allowed_params: frozenset[str] | None  # None: unknown top-level keys are ignored
    tool_call_type_required: bool
    shape_rejection: Callable[[ShapeIssue], Rejection]
    rules: tuple[Rule, ...]
    error_body: Callable[[Rejection], dict]
    fault_error: Callable[[int, Fault], Rejection]  # injected HTTP / in-stream error
    auth_rejection: Callable[[bool], Rejection]  # (a key was sent) -> rejection
    invalid_json: Rejection
    reasons: Callable[[str, dict], bool]  # (model, body): does this answer carry reasoning
    rendering: ChatRendering
    stream_error_body: Callable[[Rejection], dict] | None = None  # in-stream error frame; default: error_body
    # (used tokens, the window) -> the family's context-window overflow error
    overflow: Callable[[int, int], Rejection] | None = None


def check(dialect: ChatDialect, body: Any, model: str) -> tuple[Rejection | None, Findings]:
    findings = Findings()
    issue = check_shape(body, dialect)
    if issue is not None:
        return dialect.shape_rejection(issue), findings
    conversation = Conversation(body, model, body["messages"], findings)
    for rule in dialect.rules:
        rejection = rule(conversation)
        if rejection is not None:
            return rejection, findings
    return _unbounded_schema(body), findings


def _unbounded_schema(body: dict) -> Rejection | None:
    """A JSON schema no finite answer satisfies is refused, never answered (simulators' wording)."""
    fmt = response_format(body)
    spec = fmt.get("json_schema") if fmt is not None else None
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return None
    problem = unbounded_problem(spec["schema"])
    if problem is None:
        return None
    return Rejection(400, problem, "invalid_request_error", "response_format", "invalid_json_schema")


FaultTable = Mapping[int, tuple[str, str, str | None]]  # status -> (type, message, code)


def fault_errors(table: FaultTable) -> Callable[[int, Fault], Rejection]:
    """A dialect's `fault_error` from its table of default error types and messages per status."""

    def make(status: int, fault: Fault) -> Rejection:
        error_type, message, code = table.get(status, table[500])
        return Rejection(status, fault.message or message, fault.error_type or error_type, None, code)

    return make


# -- structured output ------------------------------------------------------------------------
def response_format(body: dict) -> dict | None:
    """The request's JSON response format (json_object / json_schema), if it asks for one."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return fmt
    return None


INSTRUCTING_ROLES = ("system", "developer", "user")


def message_texts(messages: list[dict], roles: tuple[str, ...] = INSTRUCTING_ROLES) -> list[str]:
    out = []
    for message in messages:
        if message.get("role") not in roles:
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return out


def forced_tool(body: dict) -> tuple[str, Any] | None:
    """The tool a forcing `tool_choice` makes the model call: `required` (Mistral also `any`)
    or a named function."""
    choice = body.get("tool_choice")
    if choice in ("required", "any"):
        return pick_forced(offered_tools(body), None)
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return pick_forced(offered_tools(body), choice["function"].get("name"))
    return None


def structured_reply(body: dict, reply: Reply) -> Reply:
    """What the model answers a JSON-format request: JSON valid for its schema (a JSON-mode
    request: the schema its instructions spell out); under a forcing tool choice, a call of that
    tool. A turn that calls tools, or refuses, has no JSON answer."""
    reply = forced_call(reply, forced_tool(body))
    fmt = response_format(body)
    if fmt is None or reply.tool_calls:
        return reply
    if reply.refusal is not None:
        return replace(reply, text="")
    if fmt["type"] == "json_schema":
        schema = fmt["json_schema"].get("schema") or {"type": "object"}
    else:
        schema = schema_in_instructions(message_texts(body["messages"]))
    return replace(reply, text=answer_text(schema, reply))


# -- serving ----------------------------------------------------------------------------------
def error_response(
    dialect: ChatDialect, rejection: Rejection, headers: Mapping[str, str] | None = None
) -> web.Response:
    return json_response(dialect.error_body(rejection), status=rejection.status, headers=headers)


def error_frame(dialect: ChatDialect) -> Callable[[Fault], bytes]:
    def frame(fault: Fault) -> bytes:
        render = dialect.stream_error_body or dialect.error_body
        return sse_frame(render(dialect.fault_error(fault.status or 500, fault)))

    return frame


def _retry_headers(fault: Fault) -> dict[str, str]:
    return {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}


async def serve_fault(
    request: web.Request,
    state: SimulatorState,
    dialect: ChatDialect,
    body: dict,
    fault: Fault,
    prompt_chars: int,
) -> web.StreamResponse:
    if fault.delay:
        await asyncio.sleep(fault.delay)
    if fault.reset_before_headers:
        return await reset_connection(request)
    if fault.status is not None and fault.after_events is None:
        return error_response(dialect, dialect.fault_error(fault.status, fault), _retry_headers(fault))
    reply = structured_reply(body, fault.reply or state.default_reply(body))
    renderer = ReplyRenderer(
        dialect.rendering, dialect.reasons(body["model"], body), body, reply, prompt_chars
    )
    if body.get("stream"):
        return await stream_sse(request, state, renderer.frames(), fault, error_frame(dialect))
    if fault.after_events is not None:
        # a non-streamed answer has no middle: the fault hits before the body is sent
        if fault.mid_stream == "reset":
            return await reset_connection(request)
        if fault.mid_stream == "stall":
            await asyncio.sleep(fault.stall_seconds)
        else:
            return error_response(
                dialect, dialect.fault_error(fault.status or 500, fault), _retry_headers(fault)
            )
    return json_response(renderer.body())


def create_chat_app(state: SimulatorState, dialect: ChatDialect) -> web.Application:
    state.overflow = dialect.overflow

    async def completions(request: web.Request) -> web.StreamResponse:
        headers = dict(request.headers)
        authorization = request.headers.get("Authorization")
        if authorization != f"Bearer {state.api_key}":
            rejection = dialect.auth_rejection(bool(authorization))
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return error_response(dialect, rejection)
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            state.requests.append(RecordedRequest(request.path, headers, None, dialect.invalid_json))
            return error_response(dialect, dialect.invalid_json)
        model = body.get("model") if isinstance(body, dict) else None
        rejection, findings = check(dialect, body, model if isinstance(model, str) else "")
        rejection = rejection or state.over_window(len(raw))
        state.requests.append(RecordedRequest(request.path, headers, body, rejection))
        if rejection is not None:
            return error_response(dialect, rejection)
        state.quality_warnings.extend(findings.quality_warnings)
        item = state.next_item(body)
        if isinstance(item, Fault):
            return await serve_fault(request, state, dialect, body, item, len(raw))
        item = structured_reply(body, item)
        renderer = ReplyRenderer(
            dialect.rendering, dialect.reasons(body["model"], body), body, item, len(raw)
        )
        if body.get("stream"):
            return await stream_sse(request, state, renderer.frames(), None, error_frame(dialect))
        return json_response(renderer.body())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", completions)
    return app
