"""Encode canonical answer events as Anthropic Messages: the SSE sequence for streaming clients,
the Message JSON for the rest (a fold of the very same stream events: fold.py).

The wire allows one open content block at a time, while canonical events may interleave blocks
(parallel tool calls, reasoning beside text): a block that starts while another is open is
buffered and written once the open one stopped. A block's `content_block_start` waits for its
first content, so no empty text block reaches the client, and reasoning is known to be redacted
or signed when it opens.

Thinking signatures: an Anthropic-issued token is handed over in the provider's own form (the
client's history then replays natively to Anthropic); any other issuer's continuity is sealed
(gateway.transcript.seal), so only this gateway can read it back.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.ingress.echo_formats import anthropic_token
from gateway.transcript.estimate import estimate_input_tokens
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    Finish,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import (
    Citation,
    Continuity,
    Request,
    ServerToolCall,
    ServerToolResult,
    StopReason,
    Usage,
)
from gateway.transcript.render import call_text, citations_text, result_text
from gateway.transcript.seal import Sealer
from gateway.wire.anthropic_server import server_call_wire, wire_block, wire_citation

STOP_REASONS = {
    StopReason.END_TURN: "end_turn",
    StopReason.TOOL_CALLS: "end_turn",  # "tool_use" only when a tool_use block went out
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.CONTENT_FILTER: "refusal",
    StopReason.REFUSAL: "refusal",
    StopReason.PAUSE_TURN: "pause_turn",
    StopReason.ERROR: "end_turn",
}

# upstream failure category (in-stream errors) -> Anthropic error type
CATEGORY_TYPES = {
    "rate_limit": "rate_limit_error",
    "quota": "billing_error",
    "overloaded": "overloaded_error",
    "timeout": "timeout_error",
    "auth": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "invalid_request": "invalid_request_error",
    "continuity": "invalid_request_error",
    "pairing": "invalid_request_error",
}


def usage_json(usage: Usage) -> dict[str, int]:
    """Anthropic counts input without the cache reads and writes; canonical input includes them."""
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "input_tokens": max(0, usage.input_tokens - cached),
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def error_event(error: UpstreamError) -> dict[str, Any]:
    kind = CATEGORY_TYPES.get(error.category.value, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


class _Block:
    __slots__ = (
        "kind",
        "id",
        "name",
        "parts",
        "stopped",
        "meta",
        "wire",
        "args_sent",
        "citations",
        "result",
        "input",
        "delta_head",
    )

    def __init__(self, kind: BlockKind, id: str, name: str, result: ServerToolResult | None = None) -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.citations: tuple[Citation, ...] = ()
        self.result = result
        self.input: list[str] = []  # a server tool call's input, written when it stops
        self.parts: list[str] = []  # content that arrived while another block was open
        self.stopped = False
        self.meta: Continuity | None = None
        self.wire: int | None = None  # index on the wire once content_block_start went out
        self.args_sent = False
        self.delta_head: bytes | None = None  # its rendered delta event up to the text (on the wire)


class MessageEvents:
    """Canonical events in, Anthropic stream events (dicts) out."""

    __slots__ = (
        "_id",
        "_model",
        "_request",
        "_omit_thinking",
        "_sealer",
        "_blocks",
        "_active",
        "_queue",
        "_next_wire",
        "_started",
        "_usage",
        "_finish",
        "_tool_used",
    )

    def __init__(
        self, message_id: str, model: str, request: Request | None, omit_thinking: bool, sealer: Sealer
    ) -> None:
        self._id = message_id
        self._model = model
        self._request = request  # for the input estimate when usage comes only at the end
        self._omit_thinking = omit_thinking
        self._sealer = sealer
        self._blocks: dict[int, _Block] = {}
        self._active: int | None = None
        self._queue: list[int] = []
        self._next_wire = 0
        self._started = False
        self._usage: Usage | None = None
        self._finish: StopReason | None = None
        self._tool_used = False

    # -- the message envelope --------------------------------------------------------------------

    def head(self) -> list[dict[str, Any]]:
        """`message_start`, once, before anything else."""
        if self._started:
            return []
        self._started = True
        usage = self._usage
        if usage is not None and usage.input_tokens > 0:
            start_usage = usage_json(usage)  # the provider reported input before any content
        else:
            estimate = estimate_input_tokens(self._request) if self._request is not None else 0
            start_usage = usage_json(Usage(input_tokens=estimate))
        start_usage["output_tokens"] = 1
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        return [{"type": "message_start", "message": message}]

    def end(self) -> list[dict[str, Any]]:
        """Close what is still open (a complete answer has stopped every block), then
        message_delta with the stop reason derived from what went out, and message_stop."""
        out = self.head()
        if self._active is not None:
            out += self._close(self._blocks[self._active])
            self._active = None
        for index in self._queue:
            block = self._blocks[index]
            out += self._open(block)
            for part in block.parts:
                out += self._content(block, part)
            out += self._close(block)
        self._queue.clear()
        finish = self._finish or StopReason.END_TURN
        if self._tool_used and finish is not StopReason.MAX_TOKENS:
            # a tool_use block went out: the client must run it, whatever the provider said (a
            # call cut short by max_tokens is reported as such, as the API does)
            reason = "tool_use"
        else:
            reason = STOP_REASONS[finish]
        out.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": usage_json(self._usage or Usage()),
            }
        )
        out.append({"type": "message_stop"})
        return out

    # -- events ----------------------------------------------------------------------------------

    def feed(self, event: Event) -> list[dict[str, Any]]:
        t = type(event)
        if t is BlockDelta:
            block = self._blocks[event.index]
            if event.index == self._active:
                return self._content(block, event.text)
            if event.text:
                block.parts.append(event.text)
            return []
        if t is BlockStart:
            block = self._blocks[event.index] = _Block(event.kind, event.id, event.name, event.result)
            if self._active is None:
                self._active = event.index
                return self._open(block)
            self._queue.append(event.index)
            return []
        if t is BlockStop:
            block = self._blocks[event.index]
            block.stopped = True
            block.meta = event.meta
            block.citations = event.citations
            if event.index != self._active:
                return []
            out = self._close(block)
            self._active = None
            return out + self._drain()
        if t is UsageUpdate:
            self._usage = event.usage
        elif t is Finish:
            self._finish = event.stop_reason
        return []

    def rendered_delta(self, event: BlockDelta) -> bytes | None:
        """The SSE bytes of a delta to the block open on the wire, between pre-rendered halves
        (the bytes `feed` and `sse` write for it, without their dicts: nearly every event); None
        when `feed` has work to do (another block, a first content that opens the block, ...)."""
        if event.index != self._active or not event.text:
            return None
        block = self._blocks[event.index]
        head = block.delta_head
        if head is None:
            if block.wire is None:
                return None
            kind = block.kind
            if kind is BlockKind.TEXT:
                field = b'{"type":"text_delta","text":'
            elif kind is BlockKind.REASONING and not self._omit_thinking:
                field = b'{"type":"thinking_delta","thinking":'
            elif kind is BlockKind.TOOL_CALL:
                field = b'{"type":"input_json_delta","partial_json":'
                block.args_sent = True
            else:
                return None
            head = block.delta_head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                + str(block.wire).encode()
                + b',"delta":'
                + field
            )
        return head + orjson.dumps(event.text) + b"}}\n\n"

    def _drain(self) -> list[dict[str, Any]]:
        """Write the blocks that waited, in start order, up to the first one still open."""
        out: list[dict[str, Any]] = []
        while self._queue:
            index = self._queue.pop(0)
            block = self._blocks[index]
            out += self._open(block)
            for part in block.parts:
                out += self._content(block, part)
            block.parts.clear()
            if not block.stopped:
                self._active = index
                break
            out += self._close(block)
        return out

    # -- one block -------------------------------------------------------------------------------

    def _start(self, block: _Block, content_block: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.head()
        block.wire = self._next_wire
        self._next_wire += 1
        out.append({"type": "content_block_start", "index": block.wire, "content_block": content_block})
        return out

    def _open(self, block: _Block) -> list[dict[str, Any]]:
        if block.kind is BlockKind.TOOL_CALL:  # id and name are known at once
            self._tool_used = True
            return self._start(block, {"type": "tool_use", "id": block.id, "name": block.name, "input": {}})
        if block.kind is BlockKind.SERVER_TOOL_RESULT:
            return self._server_result(block)
        return []  # text and reasoning open with their first content; a server call when complete

    def _content(self, block: _Block, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        kind = block.kind
        if kind is BlockKind.TEXT:
            out = self._start(block, {"type": "text", "text": ""}) if block.wire is None else []
            delta = {"type": "text_delta", "text": text}
        elif kind is BlockKind.REASONING:
            if self._omit_thinking:
                return []
            out = self._start(block, _THINKING_START) if block.wire is None else []
            delta = {"type": "thinking_delta", "thinking": text}
        elif kind is BlockKind.SERVER_TOOL_CALL:  # written whole when it stops: its issuer decides how
            block.input.append(text)
            return []
        elif kind is BlockKind.SERVER_TOOL_RESULT:  # pragma: no cover - it has no deltas
            return []
        else:
            out = []
            block.args_sent = True
            delta = {"type": "input_json_delta", "partial_json": text}
        out.append({"type": "content_block_delta", "index": block.wire, "delta": delta})
        return out

    def _close(self, block: _Block) -> list[dict[str, Any]]:
        kind = block.kind
        out: list[dict[str, Any]] = []
        if kind is BlockKind.REASONING:
            out = self._close_reasoning(block)
        elif kind is BlockKind.SERVER_TOOL_CALL:
            out = self._server_call(block)
        elif kind is BlockKind.TEXT and block.citations:
            out = self._citations(block)
        elif kind is BlockKind.TOOL_CALL and not block.args_sent:
            # a call without arguments still carries one empty fragment, as the API sends it
            delta = {"type": "input_json_delta", "partial_json": ""}
            out.append({"type": "content_block_delta", "index": block.wire, "delta": delta})
        if block.wire is not None:
            out.append({"type": "content_block_stop", "index": block.wire})
        return out

    def _server_call(self, block: _Block) -> list[dict[str, Any]]:
        """Anthropic's own server_tool_use goes to the client as such (its history then replays
        natively); another issuer's is text, which any target reads."""
        call = ServerToolCall(block.id, block.name, "".join(block.input), block.meta)
        if wire_block(block.meta) is None:
            return self._text_block(block, call_text(call))
        wire = server_call_wire(call)
        arguments = orjson.dumps(wire.pop("input")).decode()
        out = self._start(block, {**wire, "input": {}})
        delta = {"type": "input_json_delta", "partial_json": arguments}
        out.append({"type": "content_block_delta", "index": block.wire, "delta": delta})
        return out

    def _server_result(self, block: _Block) -> list[dict[str, Any]]:
        result = block.result
        assert result is not None  # the assembler's contract: it starts whole
        wire = wire_block(result.meta)
        if wire is None:
            return self._text_block(block, result_text(result))
        return self._start(block, wire)

    def _citations(self, block: _Block) -> list[dict[str, Any]]:
        """Anthropic's citations as citations_delta events; another issuer's as a sources list."""
        wires = [wire_citation(c.meta) for c in block.citations]
        if any(w is None for w in wires):
            return self._content(block, "\n\n" + citations_text(block.citations))
        out = self._start(block, {"type": "text", "text": ""}) if block.wire is None else []
        for wire in wires:
            delta = {"type": "citations_delta", "citation": wire}
            out.append({"type": "content_block_delta", "index": block.wire, "delta": delta})
        return out

    def _text_block(self, block: _Block, text: str) -> list[dict[str, Any]]:
        out = self._start(block, {"type": "text", "text": ""})
        out.append(
            {
                "type": "content_block_delta",
                "index": block.wire,
                "delta": {"type": "text_delta", "text": text},
            }
        )
        return out

    def _close_reasoning(self, block: _Block) -> list[dict[str, Any]]:
        meta = block.meta
        token = anthropic_token(meta)
        if token is not None and token[0] == "redacted":
            if block.wire is not None:  # pragma: no cover - redacted thinking has no text
                raise ValueError("reasoning with text closed as redacted thinking")
            return self._start(block, {"type": "redacted_thinking", "data": token[1]})
        if token is not None:
            signature = token[1]
        else:
            signature = self._sealer.seal(meta) if meta is not None else ""
        out: list[dict[str, Any]] = []
        if block.wire is None:
            if not signature:
                return out  # no text shown and nothing to carry back: no block
            out = self._start(block, _THINKING_START)
        if signature:
            delta = {"type": "signature_delta", "signature": signature}
            out.append({"type": "content_block_delta", "index": block.wire, "delta": delta})
        return out


_THINKING_START = {"type": "thinking", "thinking": "", "signature": ""}


def sse(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


PING = sse({"type": "ping"})


class MessagesStreamEncoder:
    """The SSE stream: every event with its `event:` line; a ping after 15 s without upstream
    bytes (a long thinking phase) so clients and proxies keep the connection."""

    __slots__ = ("_events",)

    content_type = "text/event-stream"
    keepalive_seconds = 15.0

    def __init__(self, events: MessageEvents) -> None:
        self._events = events

    def start(self) -> bytes:
        # message_start waits for the first content: input tokens a provider reports before it
        # (Anthropic, Gemini) go into it instead of an estimate
        return b""

    def event(self, event: Event) -> bytes | None:
        if type(event) is BlockDelta:
            rendered = self._events.rendered_delta(event)
            if rendered is not None:
                return rendered
        out = self._events.feed(event)
        if not out:
            return None
        return b"".join(sse(e) for e in out)

    def finish(self) -> bytes:
        return b"".join(sse(e) for e in self._events.end())

    def error(self, error: UpstreamError) -> bytes:
        return b"".join(sse(e) for e in (*self._events.head(), error_event(error)))

    def keepalive(self) -> bytes:
        return b"".join(sse(e) for e in self._events.head()) + PING
