"""Anthropic Messages API responses: SSE stream and JSON body decoding into canonical events.

Continuity data issued here (only the anthropic modules read it):
  thinking          -> Reasoning(text, meta.data={"signature": sig})
  redacted_thinking -> Reasoning("", meta.data={"redacted": data})
  server tools and citations: see anthropic_server
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.providers.base import KeyEcho, SSEStreamDecoder, loads_or_none
from gateway.providers.structured import output_tool_name
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    MessageStart,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Citation, Continuity, Request, StopReason, Usage
from gateway.transcript.reasoning import decision_of
from gateway.transcript.target import Capabilities, OutputMode, Target
from gateway.wire.anthropic_server import (
    SERVER_TOOL_USE,
    citation,
    is_server_result,
    server_result,
)

STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "pause_turn": StopReason.PAUSE_TURN,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
}

# error.type -> category; invalid_request_error is left to the status and the message markers
ERROR_TYPES = {
    "authentication_error": ErrorCategory.AUTH,
    "permission_error": ErrorCategory.PERMISSION,
    "not_found_error": ErrorCategory.NOT_FOUND,
    "request_too_large": ErrorCategory.TOO_LARGE,
    "rate_limit_error": ErrorCategory.RATE_LIMIT,
    "api_error": ErrorCategory.SERVER,
    "overloaded_error": ErrorCategory.OVERLOADED,
    "billing_error": ErrorCategory.QUOTA,
    "timeout_error": ErrorCategory.TIMEOUT,
}

# keys never reach a kept error message, even if an upstream or proxy echoes one
KEY_ECHO = KeyEcho(re.compile(r"sk-ant-[A-Za-z0-9_\-]+"), "sk-ant-***")


class _UsageTotals:
    """Anthropic reports input without cache reads/writes; the canonical input includes them."""

    __slots__ = ("cache_read", "cache_write", "input", "output", "thinking")

    def __init__(self) -> None:
        self.input = self.cache_read = self.cache_write = self.output = self.thinking = 0

    def merge(self, usage: Mapping[str, Any] | None) -> None:
        if not usage:
            return
        value = usage.get("input_tokens")
        if value is not None:
            self.input = value
        value = usage.get("cache_read_input_tokens")
        if value is not None:
            self.cache_read = value
        value = usage.get("cache_creation_input_tokens")
        if value is not None:
            self.cache_write = value
        value = usage.get("output_tokens")
        if value is not None:
            self.output = value
        details = usage.get("output_tokens_details")
        if details and details.get("thinking_tokens") is not None:
            self.thinking = details["thinking_tokens"]

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input + self.cache_read + self.cache_write,
            output_tokens=self.output,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            reasoning_tokens=self.thinking,
        )


class _Open:
    __slots__ = ("answer", "args_seen", "citations", "input", "redacted", "server", "signature")

    def __init__(self) -> None:
        self.citations: list[Citation] = []
        self.server: dict[str, Any] | None = None  # a server_tool_use block as it started
        self.signature = ""
        self.redacted = ""
        self.input: Any = None  # tool_use input given whole in content_block_start
        self.args_seen = False
        self.answer = False  # the structured-output tool: its input is the answer text


def answer_tool(request: Request | None, target: Target, caps: Capabilities) -> str | None:
    """The tool whose input is the answer, when the request's structured output went that way."""
    if request is None:
        return None
    if decision_of(request, target, caps).output is not OutputMode.FORCED_TOOL:
        return None
    return output_tool_name(request)


class AnthropicStreamDecoder(SSEStreamDecoder):
    """Messages SSE -> canonical events. Anthropic block indexes are used as canonical indexes.
    The event name is read from the JSON `type` (always present), so `event:` lines are optional."""

    def __init__(
        self, target: Target, request: Request | None = None, caps: Capabilities | None = None
    ) -> None:
        super().__init__(target)
        self._open: dict[int, _Open] = {}
        self._usage = _UsageTotals()
        self._stop = StopReason.END_TURN
        self._answer_tool = answer_tool(request, target, caps) if caps is not None else None
        self._calls = 0  # tool calls the client sees (the answer tool is not one)

    def on_event(self, name: str, data: str, out: list[Event]) -> None:
        if self.done or not data:
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._fail(out, ErrorCategory.PROTOCOL, f"invalid JSON in Anthropic {name or 'stream'} event")
            return
        self.handle(event, out)

    def handle(self, event: Any, out: list[Event]) -> None:
        try:
            kind = event["type"]
            if kind == "content_block_delta":
                self._delta(event["index"], event["delta"], out)
            elif kind == "content_block_start":
                self._start(event["index"], event["content_block"], out)
            elif kind == "content_block_stop":
                self._stop_block(event["index"], out)
            elif kind == "message_start":
                message = event["message"]
                out.append(MessageStart(message.get("id") or "", message.get("model") or ""))
                usage = message.get("usage")
                self._usage.merge(usage)
                if usage and usage.get("input_tokens"):
                    # the prompt's size is known before any content: a client may show it at once
                    out.append(UsageUpdate(self._usage.usage()))
            elif kind == "message_delta":
                reason = event["delta"].get("stop_reason")
                if reason:
                    self._stop = STOP_REASONS.get(reason, StopReason.END_TURN)
                    if self._stop is StopReason.TOOL_CALLS and not self._calls:
                        self._stop = StopReason.END_TURN  # only the answer tool was called
                self._usage.merge(event.get("usage"))
            elif kind == "message_stop":
                out.append(UsageUpdate(self._usage.usage()))
                out.append(Finish(self._stop))
                self.done = True
            elif kind == "error":
                error = event.get("error") or {}
                etype = error.get("type") or ""
                category = ERROR_TYPES.get(etype, ErrorCategory.SERVER)
                message = KEY_ECHO.redact(error.get("message") or etype or "stream error")
                self._fail(out, category, message, type=etype)
            # ping and event types added later carry nothing the transcript needs
        except (KeyError, TypeError, AttributeError) as exc:
            self._fail(out, ErrorCategory.PROTOCOL, f"malformed Anthropic stream event: {exc!r}")

    def _start(self, index: int, block: Mapping[str, Any], out: list[Event]) -> None:
        if index in self._open:
            self._fail(out, ErrorCategory.PROTOCOL, f"Anthropic block {index} started twice")
            return
        kind = block["type"]
        state = _Open()
        if kind == "text":
            out.append(BlockStart(index, BlockKind.TEXT))
            initial = block.get("text")
            for raw in block.get("citations") or ():  # a whole body carries them on the block
                state.citations.append(citation(raw, self.target.continuity))
        elif kind == "thinking":
            out.append(BlockStart(index, BlockKind.REASONING))
            initial = block.get("thinking")
            state.signature = block.get("signature") or ""
        elif kind == "redacted_thinking":
            out.append(BlockStart(index, BlockKind.REASONING))
            initial = None
            state.redacted = block["data"]
        elif kind == "tool_use" and block["name"] == self._answer_tool:
            out.append(BlockStart(index, BlockKind.TEXT))
            initial = None
            state.input = block.get("input")
            state.answer = True
        elif kind == "tool_use":
            out.append(BlockStart(index, BlockKind.TOOL_CALL, id=block["id"], name=block["name"]))
            initial = None
            state.input = block.get("input")
            self._calls += 1
        elif kind == SERVER_TOOL_USE:
            out.append(BlockStart(index, BlockKind.SERVER_TOOL_CALL, id=block["id"], name=block["name"]))
            initial = None
            state.input = block.get("input")
            state.server = dict(block)
        elif is_server_result(kind):
            result = server_result(block, self.target.continuity)
            out.append(
                BlockStart(index, BlockKind.SERVER_TOOL_RESULT, result.call_id, result.name, result=result)
            )
            initial = None
        else:
            self._fail(out, ErrorCategory.PROTOCOL, f"unsupported Anthropic content block type {kind!r}")
            return
        self._open[index] = state
        if initial:
            out.append(BlockDelta(index, initial))

    def _delta(self, index: int, delta: Mapping[str, Any], out: list[Event]) -> None:
        state = self._open.get(index)
        if state is None:
            self._fail(out, ErrorCategory.PROTOCOL, f"Anthropic delta for block {index} that is not open")
            return
        kind = delta["type"]
        if kind == "text_delta":
            text = delta["text"]
        elif kind == "thinking_delta":
            text = delta["thinking"]
        elif kind == "input_json_delta":
            text = delta["partial_json"]
            state.args_seen = state.args_seen or bool(text)
        elif kind == "signature_delta":
            state.signature = delta["signature"]
            return
        elif kind == "citations_delta":
            state.citations.append(citation(delta["citation"], self.target.continuity))
            return
        else:
            self._fail(out, ErrorCategory.PROTOCOL, f"unsupported Anthropic delta type {kind!r}")
            return
        if text:
            out.append(BlockDelta(index, text))

    def _stop_block(self, index: int, out: list[Event]) -> None:
        state = self._open.pop(index, None)
        if state is None:
            self._fail(out, ErrorCategory.PROTOCOL, f"Anthropic stop for block {index} that is not open")
            return
        meta: Continuity | None = None
        if state.server is not None:
            meta = self.target.continuity({"block": state.server})
            if state.input and not state.args_seen:
                out.append(BlockDelta(index, orjson.dumps(state.input).decode()))
        elif state.signature:
            meta = self.target.continuity({"signature": state.signature})
        elif state.redacted:
            meta = self.target.continuity({"redacted": state.redacted})
        elif state.input and not state.args_seen:
            # non-streamed bodies carry the whole input object in the block itself
            out.append(BlockDelta(index, orjson.dumps(state.input).decode()))
        out.append(BlockStop(index, meta, tuple(state.citations)))


def decode_response(
    body: bytes, target: Target, request: Request | None = None, caps: Capabilities | None = None
) -> list[Event]:
    """A Messages JSON body replayed through the stream decoder's handlers, so both paths give
    the same events."""
    message = loads_or_none(body)
    if not isinstance(message, dict) or message.get("type") != "message":
        return [
            StreamError(UpstreamError(ErrorCategory.PROTOCOL, "Anthropic response body is not a message"))
        ]
    decoder = AnthropicStreamDecoder(target, request, caps)
    out: list[Event] = []
    decoder.handle({"type": "message_start", "message": message}, out)
    for index, block in enumerate(message.get("content") or ()):
        decoder.handle({"type": "content_block_start", "index": index, "content_block": block}, out)
        decoder.handle({"type": "content_block_stop", "index": index}, out)
    decoder.handle({"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}}, out)
    decoder.handle({"type": "message_stop"}, out)
    return out
