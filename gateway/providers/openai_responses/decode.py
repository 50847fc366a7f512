"""OpenAI Responses API responses: SSE stream and JSON body decoding into canonical events.

Continuity data issued here (only the openai_responses modules read it):
  reasoning item -> Reasoning("\\n\\n".join(summary), meta.data={"id": "rs_..",
                    "encrypted_content": str | None, "summary": [str, ...]})
  function_call  -> ToolCall(id=call_id, meta.data={"item_id": "fc_.."})
  custom_tool_call -> ToolCall(id=call_id, custom=True, arguments=the raw input,
                    meta.data={"item_id": "ctc_.."})
A reasoning block's BlockStart carries the item id ("rs_..") as soon as the item is added.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.providers.base import KeyEcho, SSEStreamDecoder, loads_or_none
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
from gateway.transcript.model import Citation, Request, StopReason, Usage
from gateway.transcript.target import Target
from gateway.wire.openai_server import SERVER_ITEMS, annotation, server_item

SUMMARY_SEPARATOR = "\n\n"

INCOMPLETE_REASONS = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}

# error.code / error.type -> category, ahead of the HTTP status (a 429 may be a quota error)
ERROR_CODES = {
    "insufficient_quota": ErrorCategory.QUOTA,
    "rate_limit_exceeded": ErrorCategory.RATE_LIMIT,
    "server_error": ErrorCategory.SERVER,
    "server_is_overloaded": ErrorCategory.OVERLOADED,
    "invalid_api_key": ErrorCategory.AUTH,
    "model_not_found": ErrorCategory.NOT_FOUND,
    "invalid_encrypted_content": ErrorCategory.CONTINUITY,
}

# keys never reach a kept error message (OpenAI echoes part of a rejected key)
KEY_ECHO = KeyEcho(re.compile(r"sk-[A-Za-z0-9_\-*]{6,}"), "sk-***")


def _usage(usage: Mapping[str, Any] | None) -> Usage:
    if not usage:
        return Usage()
    inputs = usage.get("input_tokens_details") or {}
    outputs = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=inputs.get("cached_tokens") or 0,
        cache_write_tokens=inputs.get("cache_write_tokens") or 0,
        reasoning_tokens=outputs.get("reasoning_tokens") or 0,
    )


def error_category(error: Mapping[str, Any], default: ErrorCategory) -> ErrorCategory:
    return ERROR_CODES.get(error.get("code") or "") or ERROR_CODES.get(error.get("type") or "") or default


# call item types -> the field holding the call's input (JSON arguments, or a custom tool's text)
_CALL_INPUT = {"function_call": "arguments", "custom_tool_call": "input"}


class _Item:
    """One output item being streamed. `parts`: summary parts (reasoning) or content parts
    (message) seen so far; `index`: its canonical block (reasoning, function_call) or the
    message's open content part (-1 when none is open)."""

    __slots__ = ("index", "kind", "parts", "streamed")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.parts = 0
        self.streamed = False  # function_call: argument deltas arrived


Handler = Callable[["ResponsesStreamDecoder", Any, list[Event]], None]


class ResponsesStreamDecoder(SSEStreamDecoder):
    """Responses SSE -> canonical events. Items are addressed by output_index; canonical block
    indexes are handed out in start order (a message item may hold several text parts)."""

    def __init__(self, target: Target, request: Request | None = None) -> None:
        super().__init__(target)
        self._items: dict[int, _Item] = {}
        self._next_index = 0
        self._saw_call = False
        self._refused = False

    def on_event(self, name: str, data: str, out: list[Event]) -> None:
        # a terminal event ends the response; anything after it belongs to no answer
        if self.done or not data:
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._fail(out, ErrorCategory.PROTOCOL, "invalid JSON in Responses stream event")
            return
        self.handle(event, out)

    def handle(self, event: Any, out: list[Event]) -> None:
        try:
            handler = _HANDLERS.get(event["type"])
            if handler is not None:  # unknown and informational event types carry nothing we need
                handler(self, event, out)
        except (KeyError, TypeError, AttributeError) as exc:
            self._fail(out, ErrorCategory.PROTOCOL, f"malformed Responses stream event: {exc!r}")

    def _alloc(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _item(self, event: Mapping[str, Any], out: list[Event]) -> _Item | None:
        item = self._items.get(event["output_index"])
        if item is None:
            self._fail(
                out, ErrorCategory.PROTOCOL, f"Responses event {event['type']} for an item that is not open"
            )
        return item

    # -- handlers ------------------------------------------------------------------------------

    def _created(self, event: Any, out: list[Event]) -> None:
        response = event["response"]
        out.append(MessageStart(response.get("id") or "", response.get("model") or ""))

    def _item_added(self, event: Any, out: list[Event]) -> None:
        output_index = event["output_index"]
        if output_index in self._items:
            self._fail(out, ErrorCategory.PROTOCOL, f"Responses output item {output_index} added twice")
            return
        item = event["item"]
        kind = item["type"]
        if kind == "message":
            self._items[output_index] = _Item(kind, -1)
        elif kind == "reasoning":
            state = self._items[output_index] = _Item(kind, self._alloc())
            out.append(BlockStart(state.index, BlockKind.REASONING, id=item.get("id") or ""))
        elif kind in _CALL_INPUT:
            state = self._items[output_index] = _Item(kind, self._alloc())
            self._saw_call = True
            custom = kind == "custom_tool_call"
            call_id, name = item["call_id"], item["name"]
            out.append(BlockStart(state.index, BlockKind.TOOL_CALL, id=call_id, name=name, custom=custom))
            arguments = item.get(_CALL_INPUT[kind])
            if arguments:
                state.streamed = True
                out.append(BlockDelta(state.index, arguments))
        elif kind in SERVER_ITEMS:  # a hosted tool's call: written whole when it is done
            self._items[output_index] = _Item(kind, -1)
        else:
            self._fail(out, ErrorCategory.PROTOCOL, f"unsupported Responses output item type {kind!r}")

    def _text_delta(self, event: Any, out: list[Event], refusal: bool = False) -> None:
        item = self._item(event, out)
        if item is None:
            return
        if item.index < 0:  # a delta without its content_part.added
            self._open_part(item, out, refusal)
        delta = event["delta"]
        if delta:
            out.append(BlockDelta(item.index, delta))

    def _refusal_delta(self, event: Any, out: list[Event]) -> None:
        self._text_delta(event, out, refusal=True)

    def _summary_delta(self, event: Any, out: list[Event]) -> None:
        item = self._item(event, out)
        if item is None:
            return
        if not item.parts:  # a delta without its reasoning_summary_part.added
            item.parts = 1
        delta = event["delta"]
        if delta:
            out.append(BlockDelta(item.index, delta))

    def _arguments_delta(self, event: Any, out: list[Event]) -> None:
        item = self._item(event, out)
        if item is None:
            return
        item.streamed = True
        delta = event["delta"]
        if delta:
            out.append(BlockDelta(item.index, delta))

    def _summary_part_added(self, event: Any, out: list[Event]) -> None:
        item = self._item(event, out)
        if item is None:
            return
        if item.parts:
            out.append(BlockDelta(item.index, SUMMARY_SEPARATOR))
        item.parts += 1
        text = event.get("part", {}).get("text")
        if text:
            out.append(BlockDelta(item.index, text))

    def _open_part(self, item: _Item, out: list[Event], refusal: bool = False) -> None:
        item.index = self._alloc()
        item.parts += 1
        if refusal:
            self._refused = True
        out.append(BlockStart(item.index, BlockKind.REFUSAL if refusal else BlockKind.TEXT))

    def _close_part(self, item: _Item, out: list[Event], part: Mapping[str, Any] | None = None) -> None:
        if item.index >= 0:
            out.append(BlockStop(item.index, None, self._citations(part)))
            item.index = -1

    def _citations(self, part: Mapping[str, Any] | None) -> tuple[Citation, ...]:
        if not part or not part.get("annotations"):
            return ()
        body = part.get("text") or ""
        return tuple(annotation(a, body, self.target.continuity) for a in part["annotations"])

    def _part_added(self, event: Any, out: list[Event]) -> None:
        item = self._item(event, out)
        if item is None:
            return
        part = event["part"]
        if part["type"] not in ("output_text", "refusal"):
            self._fail(out, ErrorCategory.PROTOCOL, f"unsupported Responses content part {part['type']!r}")
            return
        self._close_part(item, out)
        self._open_part(item, out, part["type"] == "refusal")
        text = part.get("text") or part.get("refusal")
        if text:
            out.append(BlockDelta(item.index, text))

    def _part_done(self, event: Any, out: list[Event]) -> None:
        item = self._item(event, out)
        if item is not None:
            self._close_part(item, out, event.get("part"))

    def _item_done(self, event: Any, out: list[Event]) -> None:
        output_index = event["output_index"]
        if output_index not in self._items:  # done without added: the item arrives whole
            self._item_added(event, out)
            if self.failed:
                return
        state = self._items.pop(output_index)
        item = event["item"]
        if state.kind == "reasoning":
            summary = [
                part["text"] for part in item.get("summary") or () if part.get("type") == "summary_text"
            ]
            missing = summary[state.parts :]
            if missing:
                text = SUMMARY_SEPARATOR.join(missing)
                out.append(BlockDelta(state.index, SUMMARY_SEPARATOR + text if state.parts else text))
            data = {"id": item["id"], "encrypted_content": item.get("encrypted_content"), "summary": summary}
            out.append(BlockStop(state.index, self.target.continuity(data)))
        elif state.kind in _CALL_INPUT:
            arguments = item.get(_CALL_INPUT[state.kind])
            if not state.streamed and arguments:
                out.append(BlockDelta(state.index, arguments))
            out.append(BlockStop(state.index, self.target.continuity({"item_id": item["id"]})))
        elif state.kind in SERVER_ITEMS:
            call, result = server_item(item, self.target.continuity, f"{state.kind}_{output_index}")
            index = self._alloc()
            out.append(BlockStart(index, BlockKind.SERVER_TOOL_CALL, id=call.id, name=call.name))
            out.append(BlockDelta(index, call.input))
            out.append(BlockStop(index, call.meta))
            index = self._alloc()
            out.append(BlockStart(index, BlockKind.SERVER_TOOL_RESULT, call.id, call.name, result=result))
            out.append(BlockStop(index))
        else:
            self._close_part(state, out)
            if not state.parts:  # nothing streamed: the parts come with the finished item
                for part in item.get("content") or ():
                    ptype = part.get("type")
                    if ptype not in ("output_text", "refusal"):
                        self._fail(
                            out, ErrorCategory.PROTOCOL, f"unsupported Responses content part {ptype!r}"
                        )
                        return
                    self._open_part(state, out, ptype == "refusal")
                    text = part.get("text") or part.get("refusal")
                    if text:
                        out.append(BlockDelta(state.index, text))
                    self._close_part(state, out, part)

    def _close_open(self, out: list[Event]) -> None:
        for state in self._items.values():
            if state.index >= 0:
                out.append(BlockStop(state.index))
        self._items.clear()

    def _finish(self, event: Any, out: list[Event], stop: StopReason) -> None:
        self._close_open(out)
        out.append(UsageUpdate(_usage(event["response"].get("usage"))))
        out.append(Finish(stop))
        self.done = True

    def _completed(self, event: Any, out: list[Event]) -> None:
        if self._saw_call:
            stop = StopReason.TOOL_CALLS
        else:
            stop = StopReason.REFUSAL if self._refused else StopReason.END_TURN
        self._finish(event, out, stop)

    def _incomplete(self, event: Any, out: list[Event]) -> None:
        reason = (event["response"].get("incomplete_details") or {}).get("reason")
        self._finish(event, out, INCOMPLETE_REASONS.get(reason, StopReason.END_TURN))

    def _failed(self, event: Any, out: list[Event]) -> None:
        self._error(event["response"].get("error") or {}, out)

    def _error_event(self, event: Any, out: list[Event]) -> None:
        error = event.get("error")
        self._error(error if isinstance(error, dict) else event, out)  # older streams: fields at top level

    def _error(self, error: Mapping[str, Any], out: list[Event]) -> None:
        code = error.get("code")
        etype = error.get("type") or code or ""
        message = KEY_ECHO.redact(str(error.get("message") or etype or "response failed"))
        self._fail(out, error_category(error, ErrorCategory.SERVER), message, type=etype, code=code)


_HANDLERS: dict[str, Handler] = {
    "response.output_text.delta": ResponsesStreamDecoder._text_delta,
    "response.refusal.delta": ResponsesStreamDecoder._refusal_delta,
    "response.reasoning_summary_text.delta": ResponsesStreamDecoder._summary_delta,
    "response.function_call_arguments.delta": ResponsesStreamDecoder._arguments_delta,
    "response.custom_tool_call_input.delta": ResponsesStreamDecoder._arguments_delta,
    "response.reasoning_summary_part.added": ResponsesStreamDecoder._summary_part_added,
    "response.content_part.added": ResponsesStreamDecoder._part_added,
    "response.content_part.done": ResponsesStreamDecoder._part_done,
    "response.output_item.added": ResponsesStreamDecoder._item_added,
    "response.output_item.done": ResponsesStreamDecoder._item_done,
    "response.created": ResponsesStreamDecoder._created,
    "response.completed": ResponsesStreamDecoder._completed,
    "response.incomplete": ResponsesStreamDecoder._incomplete,
    "response.failed": ResponsesStreamDecoder._failed,
    "error": ResponsesStreamDecoder._error_event,
}

TERMINAL_STATUSES = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


def decode_response(body: bytes, target: Target, request: Request | None = None) -> list[Event]:
    """A Responses JSON body replayed through the stream decoder's handlers (each output item
    arrives whole), so both paths give the same events."""
    response = loads_or_none(body)
    terminal = TERMINAL_STATUSES.get(response.get("status")) if isinstance(response, dict) else None
    if terminal is None:
        return [
            StreamError(UpstreamError(ErrorCategory.PROTOCOL, "Responses body is not a finished response"))
        ]
    decoder = ResponsesStreamDecoder(target)
    out: list[Event] = []
    decoder.handle({"type": "response.created", "response": response}, out)
    for output_index, item in enumerate(response.get("output") or ()):
        decoder.handle({"type": "response.output_item.done", "output_index": output_index, "item": item}, out)
    decoder.handle({"type": terminal, "response": response}, out)
    return out
