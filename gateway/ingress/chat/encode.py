"""Encode canonical answer events as OpenAI Chat Completions: `chat.completion.chunk` SSE for
streaming clients, `chat.completion` JSON for the rest (a fold of the same events)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.ingress.errors import context_overflow_message
from gateway.ingress.reasoning_details import encode_details
from gateway.transcript.events import (
    CONTEXT_OVERFLOW,
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    Finish,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import AssistantTurn, Reasoning, StopReason, Text, ToolCall, Usage
from gateway.transcript.seal import Sealer

FINISH_REASONS = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.TOOL_CALLS: "tool_calls",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTENT_FILTER: "content_filter",
    # OpenAI answers a refusal with finish_reason "stop" and the text in `refusal`; a refusal
    # without such text (Anthropic's stop_reason "refusal") is reported as filtered content
    StopReason.REFUSAL: "content_filter",
    StopReason.PAUSE_TURN: "stop",
    StopReason.ERROR: "stop",
}


def finish_reason(stop: StopReason, refused: bool) -> str:
    return "stop" if refused and stop is StopReason.REFUSAL else FINISH_REASONS[stop]


DONE = b"data: [DONE]\n\n"


def usage_json(usage: Usage) -> dict[str, Any]:
    out = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
    if usage.cache_write_tokens:  # Anthropic's cache writes, under LiteLLM's name for them
        out["cache_creation_input_tokens"] = usage.cache_write_tokens
    return out


def error_json(error: UpstreamError) -> dict[str, Any]:
    if error.code == CONTEXT_OVERFLOW:  # OpenAI's own overflow form, whichever family overflowed
        message, kind, code = (
            context_overflow_message(error.message),
            "invalid_request_error",
            CONTEXT_OVERFLOW,
        )
    else:
        message, kind, code = error.message, "upstream_error", error.category.value
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# what follows a delta's one string in a chunk (see ChatStreamEncoder._text_head)
_DELTA_TAIL = b'},"logprobs":null,"finish_reason":null}]}\n\n'


class ChatStreamEncoder:
    """Per-response state: block index -> message position and tool-call index."""

    __slots__ = (
        "_sealer",
        "_head",
        "_include_usage",
        "_position",
        "_tool_index",
        "_kinds",
        "_call_ids",
        "_reasoning",
        "_usage",
        "_finish",
        "_refused",
        "_text_head",
        "_reasoning_head",
    )

    content_type = "text/event-stream"
    keepalive_seconds = None

    def __init__(
        self, response_id: str, model: str, include_usage: bool, sealer: Sealer, created: int | None = None
    ) -> None:
        self._sealer = sealer
        created = int(time.time()) if created is None else created
        # every chunk shares these fields: render the prefix once
        self._head = orjson.dumps(
            {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model}
        )[:-1]
        # a text or reasoning delta (nearly every chunk) is its JSON string between two
        # pre-rendered halves: the same bytes `_chunk` writes, without building its dicts
        self._text_head = b"data: " + self._head + b',"choices":[{"index":0,"delta":{"content":'
        self._reasoning_head = (
            b"data: " + self._head + b',"choices":[{"index":0,"delta":{"reasoning_content":'
        )
        self._include_usage = include_usage
        self._position: dict[int, int] = {}
        self._tool_index: dict[int, int] = {}
        self._kinds: dict[int, BlockKind] = {}
        self._call_ids: dict[int, str] = {}
        # reasoning text per block: a stateless client sends it back inside reasoning_details
        self._reasoning: dict[int, list[str]] = {}
        self._usage: Usage | None = None
        self._finish: StopReason | None = None
        self._refused = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + self._head + b',"choices":' + orjson.dumps([choice]) + b"}\n\n"

    def start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def event(self, event: Event) -> bytes | None:
        t = type(event)
        if t is BlockDelta:
            kind = self._kinds.get(event.index)
            if kind is BlockKind.TEXT:
                return self._text_head + orjson.dumps(event.text) + _DELTA_TAIL if event.text else None
            if kind is BlockKind.REASONING:
                if not event.text:
                    return None
                self._reasoning[event.index].append(event.text)
                return self._reasoning_head + orjson.dumps(event.text) + _DELTA_TAIL
            if kind is BlockKind.TOOL_CALL:
                if not event.text:
                    return None
                call = {"index": self._tool_index[event.index], "function": {"arguments": event.text}}
                return self._chunk({"tool_calls": [call]})
            if kind is BlockKind.REFUSAL:
                return self._chunk({"refusal": event.text}) if event.text else None
            return None
        if t is BlockStart:
            self._position[event.index] = len(self._position)
            self._kinds[event.index] = event.kind
            if event.kind is BlockKind.REASONING:
                self._reasoning[event.index] = []
            elif event.kind is BlockKind.REFUSAL:
                self._refused = True
            elif event.kind is BlockKind.TOOL_CALL:
                self._call_ids[event.index] = event.id
                index = self._tool_index[event.index] = len(self._tool_index)
                call = {
                    "index": index,
                    "id": event.id,
                    "type": "function",
                    "function": {"name": event.name, "arguments": ""},
                }
                return self._chunk({"tool_calls": [call]})
            return None
        if t is BlockStop:
            if event.meta is None:
                return None
            kind = self._kinds.get(event.index)
            position = self._position.get(event.index, 0)
            if kind is BlockKind.REASONING:
                block = Reasoning("".join(self._reasoning.get(event.index, ())), event.meta)
            elif kind is BlockKind.TOOL_CALL:
                block = ToolCall(self._call_ids.get(event.index, ""), "", "", event.meta)
            else:
                block = Text("", event.meta)
            entries = encode_details([block], self._sealer)
            for entry in entries:
                entry["index"] = position
            return self._chunk({"reasoning_details": entries}) if entries else None
        if t is UsageUpdate:
            self._usage = event.usage
            return None
        if t is Finish:
            self._finish = event.stop_reason
            return None
        return None

    def finish(self) -> bytes:
        out = self._chunk({}, finish_reason(self._finish or StopReason.END_TURN, self._refused))
        if self._include_usage:
            usage = usage_json(self._usage or Usage())
            out += b"data: " + self._head + b',"choices":[],"usage":' + orjson.dumps(usage) + b"}\n\n"
        return out + DONE

    def error(self, error: UpstreamError) -> bytes:
        return b"data: " + orjson.dumps(error_json(error)) + b"\n\n"

    def keepalive(self) -> bytes:
        return b": keepalive\n\n"


# the JSON orjson writes for a turn of one plain text block (or none): `completion_json`'s body
# with its strings and usage written alone (orjson writes a value the same wherever it stands)
_TEXT_FORM = (
    b'{"id":%b,"object":"chat.completion","created":%d,"model":%b,"choices":[{"index":0,"message":'
    b'{"role":"assistant","content":%b},"logprobs":null,"finish_reason":%b}],"usage":%b}'
)


def completion_json(
    turn: AssistantTurn, response_id: str, model: str, sealer: Sealer, created: int | None = None
) -> bytes:
    blocks = turn.blocks
    # nearly every answer without tools: one text (no refusal, no continuity to carry), or nothing
    if not blocks or (
        len(blocks) == 1 and type(block := blocks[0]) is Text and block.meta is None and not block.refusal
    ):
        dumps = orjson.dumps
        return _TEXT_FORM % (
            dumps(response_id),
            int(time.time()) if created is None else created,
            dumps(model),
            dumps(blocks[0].text if blocks else ""),
            dumps(finish_reason(turn.stop_reason, False)),
            dumps(usage_json(turn.usage)),
        )
    return completion_dict_json(turn, response_id, model, sealer, created)


def completion_dict_json(
    turn: AssistantTurn, response_id: str, model: str, sealer: Sealer, created: int | None = None
) -> bytes:
    """`completion_json` for any turn: the body built as a dict and written by orjson."""
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in turn.blocks:
        t = type(block)
        if t is Text:
            (refusals if block.refusal else texts).append(block.text)
        elif t is Reasoning:
            if block.text:
                reasoning.append(block.text)
        elif t is ToolCall:
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": block.arguments},
                }
            )
        else:  # pragma: no cover - assistant turns hold only these kinds
            raise TypeError(f"unexpected block in an assistant turn: {block!r}")
    content = "".join(texts) if texts or not (calls or refusals) else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusals:
        message["refusal"] = "".join(refusals)
    if reasoning:
        message["reasoning_content"] = "\n\n".join(reasoning)
    details = encode_details(turn.blocks, sealer)
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = calls
    body = {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(turn.stop_reason, bool(refusals)),
            }
        ],
        "usage": usage_json(turn.usage),
    }
    return orjson.dumps(body)
