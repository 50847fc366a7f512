"""The provider-agnostic NDJSON event stream: what any ingress answers, instead of its dialect's
SSE, to a streamed request that sends `Accept: application/x-ndjson` (a UI, `curl | jq`).

One JSON object per line, written as the upstream produces it. `index` is the block's position in
the answer, in the order blocks started: the position the block takes in the assistant turn the
gateway records (and in the history the client sends back).

    {"type":"thinking","index","text"}               a reasoning delta
    {"type":"text","index","text"}                   a text delta (a block that completes without
                                                     any text gets one line with "" for its kind)
    {"type":"tool_call","index","id","name","arguments"}
                                                     a complete call; `arguments` is the parsed object
    {"type":"thinking_signature","index","signature"}
                                                     the continuity token of block `index` (reasoning,
                                                     or the text / call a provider signed), once the
                                                     block completed: the client sends it back with
                                                     that block
    {"type":"usage","input_tokens",...}              the cumulative usage so far
    {"type":"end","finish_reason","usage"}           the last line of a complete answer
    {"type":"error","error":{"type","message"}}      the last line of an answer that failed after
                                                     its first byte

The encoder is dialect-free: the ingress codec only says which continuity token its clients send
back (`IngressCodec.continuity_token`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

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
from gateway.transcript.model import Continuity, StopReason, Usage

CONTENT_TYPE = "application/x-ndjson"

# the continuity token a client of the request's dialect sends back for a block
TokenFor = Callable[[BlockKind, Continuity], str]


class ToolArgumentsError(ValueError):
    """A completed tool call whose arguments are not a JSON object: the upstream broke the
    function-calling contract after the commit point (the stream ends with an error line)."""


def accepts_ndjson(accept: str) -> bool:
    """Whether an Accept header asks for NDJSON: listed (q > 0) and not ranked below SSE."""
    accept = accept.lower()
    if "ndjson" not in accept:
        return False
    ndjson = sse = 0.0
    for media_range in accept.split(","):
        kind, *params = media_range.split(";")
        kind = kind.strip()
        if kind not in (CONTENT_TYPE, "text/event-stream"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if kind == CONTENT_TYPE:
            ndjson = max(ndjson, q)
        else:
            sse = max(sse, q)
    return ndjson > 0 and ndjson >= sse


def usage_fields(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


# the `type` of a text-like block's lines
_LINE_TYPES = {BlockKind.TEXT: "text", BlockKind.REASONING: "thinking", BlockKind.REFUSAL: "refusal"}


class _Block:
    __slots__ = ("position", "kind", "line", "id", "name", "custom", "parts", "shown", "head")

    def __init__(self, position: int, kind: BlockKind, id: str, name: str, custom: bool) -> None:
        self.position = position
        self.kind = kind
        self.line = _LINE_TYPES.get(kind, "")  # its delta lines' type (tool calls have none)
        self.id = id
        self.name = name
        self.custom = custom  # a custom (freeform) tool's call: its input is text, not JSON
        self.parts: list[str] = []  # a tool call's argument fragments, until it completes
        self.shown = False  # a line named the block
        # its delta line up to the text: the bytes `_line` writes before the text's JSON string
        self.head = (
            b'{"type":' + orjson.dumps(self.line) + b',"index":' + str(position).encode() + b',"text":'
        )


class NdjsonEncoder:
    """Per-answer state: event block index -> position, kind, and a tool call's arguments."""

    __slots__ = ("_token", "_blocks", "_usage", "_stop", "_calls")

    content_type = CONTENT_TYPE
    # NDJSON has no comment line: a keep-alive would be an event every client must skip
    keepalive_seconds = None

    def __init__(self, token: TokenFor) -> None:
        self._token = token
        self._blocks: dict[int, _Block] = {}
        self._usage: Usage | None = None
        self._stop: StopReason | None = None
        self._calls = 0

    def start(self) -> bytes:
        return b""

    def event(self, event: Event) -> bytes | None:
        t = type(event)
        if t is BlockDelta:
            block = self._blocks.get(event.index)
            if block is None or not event.text:
                return None
            if block.kind is BlockKind.TOOL_CALL:
                block.parts.append(event.text)
                return None
            block.shown = True
            return block.head + orjson.dumps(event.text) + b"}\n"
        if t is BlockStart:
            self._blocks[event.index] = _Block(
                len(self._blocks), event.kind, event.id, event.name, event.custom
            )
            return None
        if t is BlockStop:
            block = self._blocks.get(event.index)
            if block is None:
                return None
            if block.kind is BlockKind.TOOL_CALL:
                out = self._tool_call(block)
            elif not block.shown:
                # a block with no text (encrypted or redacted reasoning, a signed empty text part):
                # the client still learns its kind, and keeps it in its history
                out = _line({"type": block.line, "index": block.position, "text": ""})
            else:
                out = b""
            if event.meta is not None:
                signature = self._token(block.kind, event.meta)
                out += _line({"type": "thinking_signature", "index": block.position, "signature": signature})
            return out or None
        if t is UsageUpdate:
            self._usage = event.usage
            return _line({"type": "usage", **usage_fields(event.usage)})
        if t is Finish:
            self._stop = event.stop_reason
        return None

    def _tool_call(self, block: _Block) -> bytes:
        raw = "".join(block.parts)
        block.parts.clear()
        self._calls += 1
        if block.custom:  # free text, exactly as the model wrote it
            line = {"type": "tool_call", "index": block.position, "id": block.id, "name": block.name}
            return _line({**line, "input": raw})
        raw = raw.strip() or "{}"
        try:
            arguments = orjson.loads(raw)
        except orjson.JSONDecodeError:
            arguments = None
        if type(arguments) is not dict:
            raise ToolArgumentsError(f"the arguments of tool call {block.name!r} are not a JSON object")
        return _line(
            {
                "type": "tool_call",
                "index": block.position,
                "id": block.id,
                "name": block.name,
                "arguments": arguments,
            }
        )

    def finish(self) -> bytes:
        stop = self._stop or StopReason.END_TURN
        if self._calls and stop is StopReason.END_TURN:
            stop = StopReason.TOOL_CALLS  # the client runs the calls it was sent, whatever the label
        usage = usage_fields(self._usage or Usage())
        return _line({"type": "end", "finish_reason": stop.value, "usage": usage})

    def error(self, error: UpstreamError) -> bytes:
        return _line({"type": "error", "error": {"type": error.category.value, "message": error.message}})

    def keepalive(self) -> bytes:
        """Never asked for (keepalive_seconds is None); an empty write if it were."""
        return b""
