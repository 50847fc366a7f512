"""Encode canonical answer events as Gemini `GenerateContentResponse`s: one chunk per piece of
content for a stream (SSE with `alt=sse`, else one JSON array, as Google streams both), and the
whole answer as the fold of the same events.

Gemini delivers a function call whole, so a call's argument deltas are held until its block
stops. The last chunk carries `finishReason` and `usageMetadata`: Gemini CLI retries a stream that
ends without a finish reason.

Thought signatures: a Gemini-issued one is handed over as Google issued it (the client's history
then replays natively); any other family's continuity is sealed (gateway.transcript.seal), so only
this gateway reads it back.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from gateway.ingress.gemini.decode import SIGNATURE
from gateway.ingress.gemini.errors import error_json
from gateway.transcript.assembler import unfold
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
from gateway.transcript.model import AssistantTurn, Continuity, StopReason, Usage
from gateway.transcript.seal import Sealer

FINISH_REASONS = {
    StopReason.END_TURN: "STOP",
    StopReason.TOOL_CALLS: "STOP",
    StopReason.STOP_SEQUENCE: "STOP",
    StopReason.PAUSE_TURN: "STOP",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.CONTENT_FILTER: "SAFETY",
    StopReason.REFUSAL: "SAFETY",
    StopReason.ERROR: "OTHER",
}
# upstream failure category (in-stream errors) -> HTTP status of Google's error object
CATEGORY_STATUS = {
    "invalid_request": 400,
    "continuity": 400,
    "pairing": 400,
    "too_large": 400,
    "auth": 401,
    "permission": 403,
    "not_found": 404,
    "rate_limit": 429,
    "quota": 429,
    "overloaded": 503,
    "timeout": 504,
}


def continuity_token(meta: Continuity, sealer: Sealer) -> str:
    if meta.kind == "gemini":
        signature = meta.data.get(SIGNATURE)
        if isinstance(signature, str) and signature:
            return signature
    # thoughtSignature is bytes on Google's wire (the SDKs check its base64): the sealed token's
    # own bytes, encoded
    return base64.b64encode(sealer.seal(meta).encode()).decode()


def usage_json(usage: Usage) -> dict[str, int]:
    """Gemini counts thoughts apart from the candidates; canonical output includes them."""
    candidates = max(0, usage.output_tokens - usage.reasoning_tokens)
    out = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": candidates,
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if usage.reasoning_tokens:
        out["thoughtsTokenCount"] = usage.reasoning_tokens
    if usage.cache_read_tokens:
        out["cachedContentTokenCount"] = usage.cache_read_tokens
    return out


def error_object(error: UpstreamError) -> dict[str, Any]:
    status = CATEGORY_STATUS.get(error.category.value, 500)
    retry = str(max(1, round(error.retry_after))) if error.retry_after is not None and status == 429 else None
    return error_json(status, error.message, error.code, retry)


class _Call:
    __slots__ = ("id", "name", "args")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.args: list[str] = []


_MARK = "\x00text\x00"


class AnswerParts:
    """Canonical events in, Gemini parts out; the finish reason and usage at the end."""

    __slots__ = ("id", "model", "_thoughts", "_sealer", "_kinds", "_calls", "_usage", "_finish", "_templates")

    def __init__(self, response_id: str, model: str, include_thoughts: bool, sealer: Sealer) -> None:
        self.id = response_id
        self.model = model
        self._thoughts = include_thoughts
        self._sealer = sealer
        self._kinds: dict[int, BlockKind] = {}
        self._calls: dict[int, _Call] = {}
        self._usage: Usage | None = None
        self._finish: StopReason | None = None
        self._templates: dict[BlockKind, tuple[bytes, bytes]] = {}

    def delta_template(self, event: BlockDelta) -> tuple[bytes, bytes] | None:
        """The rendered chunk of a shown text or thought delta around its text's JSON string
        (what `response(feed(event))` renders, rendered once per kind with a placeholder); None
        for the other deltas (`feed` handles them)."""
        kind = self._kinds[event.index]
        template = self._templates.get(kind)
        if template is None:
            if kind is BlockKind.TEXT:
                part: dict[str, Any] = {"text": _MARK}
            elif kind is BlockKind.REASONING and self._thoughts:
                part = {"text": _MARK, "thought": True}
            else:
                return None
            before, mark, after = orjson.dumps(self.response([part], final=False)).partition(
                orjson.dumps(_MARK)
            )
            if not mark:  # pragma: no cover - the placeholder is in the rendering above
                return None
            template = self._templates[kind] = (before, after)
        return template

    def feed(self, event: Event) -> list[dict[str, Any]]:
        t = type(event)
        if t is BlockDelta:
            kind = self._kinds[event.index]
            if kind is BlockKind.TOOL_CALL:
                self._calls[event.index].args.append(event.text)
                return []
            if not event.text:
                return []
            if kind is BlockKind.REASONING:
                return [{"text": event.text, "thought": True}] if self._thoughts else []
            return [{"text": event.text}]
        if t is BlockStart:
            self._kinds[event.index] = event.kind
            if event.kind is BlockKind.TOOL_CALL:
                self._calls[event.index] = _Call(event.id, event.name)
            return []
        if t is BlockStop:
            return self._stop(event)
        if t is UsageUpdate:
            self._usage = event.usage
        elif t is Finish:
            self._finish = event.stop_reason
        return []

    def _stop(self, event: BlockStop) -> list[dict[str, Any]]:
        kind = self._kinds[event.index]
        meta = event.meta
        if kind is BlockKind.TOOL_CALL:
            call = self._calls.pop(event.index)
            raw = "".join(call.args)
            args = orjson.loads(raw) if raw.strip() else {}
            if type(args) is not dict:  # a custom tool's free text: Gemini's args are an object
                args = {"input": args}
            part: dict[str, Any] = {"functionCall": {"name": call.name, "args": args, "id": call.id}}
            if meta is not None:
                part["thoughtSignature"] = continuity_token(meta, self._sealer)
            return [part]
        if meta is None:
            return []
        if kind is BlockKind.REASONING:
            if not self._thoughts:
                return []  # the store keeps it: a client that asked for no thoughts gets none
            return [{"text": "", "thought": True, "thoughtSignature": continuity_token(meta, self._sealer)}]
        return [{"text": "", "thoughtSignature": continuity_token(meta, self._sealer)}]

    def response(self, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [candidate]}
        if final:
            candidate["finishReason"] = FINISH_REASONS[self._finish or StopReason.END_TURN]
            out["usageMetadata"] = usage_json(self._usage or Usage())
        out["modelVersion"] = self.model
        out["responseId"] = self.id
        return out


def _block_part(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One block's parts as Google gives a whole answer: its text in one part, the block's
    signature on it (a function call is one part already)."""
    if not parts or "functionCall" in parts[0]:
        return parts
    text = "".join(p.get("text", "") for p in parts)
    merged: dict[str, Any] = {"text": text}
    if parts[0].get("thought"):
        merged["thought"] = True
    signature = parts[-1].get("thoughtSignature")
    if signature is not None:
        merged["thoughtSignature"] = signature
    return [merged]


def answer_json(parts: AnswerParts, turn: AssistantTurn) -> dict[str, Any]:
    by_block: dict[int, list[dict[str, Any]]] = {}
    for event in unfold(turn):
        out = parts.feed(event)
        if out:
            by_block.setdefault(event.index, []).extend(out)  # only block events make parts
    collected = [part for block in by_block.values() for part in _block_part(block)]
    return parts.response(collected, final=True)


class GeminiStreamEncoder:
    """`alt=sse`: one `data:` event per chunk. Otherwise Google's JSON array, one element per chunk."""

    keepalive_seconds = None

    def __init__(self, parts: AnswerParts, sse: bool) -> None:
        self._parts = parts
        self._sse = sse
        self._first = True
        self.content_type = "text/event-stream" if sse else "application/json"

    def _frame(self, payload: dict[str, Any]) -> bytes:
        return self._framed(orjson.dumps(payload))

    def _framed(self, data: bytes) -> bytes:
        if self._sse:
            return b"data: " + data + b"\r\n\r\n"
        if self._first:
            self._first = False
            return data
        return b",\r\n" + data

    def start(self) -> bytes:
        return b"" if self._sse else b"["

    def event(self, event: Event) -> bytes | None:
        if type(event) is BlockDelta and event.text:  # nearly every event: no dicts
            template = self._parts.delta_template(event)
            if template is not None:
                return self._framed(template[0] + orjson.dumps(event.text) + template[1])
        parts = self._parts.feed(event)
        return self._frame(self._parts.response(parts, final=False)) if parts else None

    def finish(self) -> bytes:
        return self._frame(self._parts.response([], final=True)) + (b"" if self._sse else b"]")

    def error(self, error: UpstreamError) -> bytes:
        return self._frame(error_object(error)) + (b"" if self._sse else b"]")

    def keepalive(self) -> bytes:
        return b""
