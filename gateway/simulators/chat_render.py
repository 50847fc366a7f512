"""How the Chat Completions simulators shape an answer: SSE chunks and non-streamed bodies.

Everything provider-specific comes in as data (`ChatRendering`); the renderer never asks which
provider it is rendering for.
"""

from __future__ import annotations

import random
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from gateway.simulators.base import Reply, split_text, sse_frame

ALNUM = string.ascii_letters + string.digits
_rng = random.Random()


def random_token(length: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choices(alphabet, k=length))


@dataclass(frozen=True)
class Usage:
    prompt: int
    completion: int
    reasoning: int
    cached: int = 0  # of `prompt`, read from the provider's prompt cache


@dataclass(frozen=True)
class RenderedCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatRendering:
    """How one provider shapes its answer, stream and body."""

    completion_id: Callable[[], str]
    tool_call_id: Callable[[list[dict], int, str], str]  # (request messages, n-th call of reply, name)
    usage: Callable[[Usage], dict]
    role_delta: Callable[[bool], dict]  # (thinking) -> first delta
    content_delta: Callable[[str, bool], dict]  # (text, thinking)
    finish_delta: Callable[[bool], dict]  # (thinking)
    message: Callable[[str, str, list[RenderedCall], bool], dict]  # (text, reasoning, calls, thinking)
    usage_placement: str  # "trailing" (if stream_options.include_usage) | "finish" | "choice"
    chunk_extra: Mapping[str, Any] = field(default_factory=dict)
    choice_extra: Mapping[str, Any] = field(default_factory=dict)
    body_extra: Mapping[str, Any] = field(default_factory=dict)
    null_usage_on_chunks: bool = False
    tool_calls_whole: bool = False  # one chunk with every call complete, no index (Mistral)
    role_merges_into_tool_delta: bool = False  # OpenAI: a call-only answer opens with role+call
    reasoning_delta: Callable[[str], dict] | None = None  # None: the provider never streams reasoning
    reasoning_close: dict | None = None  # delta that ends the reasoning (Mistral's empty thinking chunk)
    refusals: bool = False  # a declining model answers in `refusal` (OpenAI); else it says so as text


def reasoning_content_message(
    text: str, reasoning: str, calls: list[RenderedCall], is_thinking: bool
) -> dict:
    """A non-streamed assistant message of the reasoning_content dialects (DeepSeek, Kimi): the
    reasoning travels beside the content, and tool calls keep their stream index."""
    out: dict = {"role": "assistant", "content": text}
    if is_thinking:
        out["reasoning_content"] = reasoning
    if calls:
        out["tool_calls"] = [
            {
                "index": n,
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for n, c in enumerate(calls)
        ]
    return out


def estimate_tokens(chars: int) -> int:
    return max(1, chars // 4)


class ReplyRenderer:
    """Renders one Reply for one request in a provider's stream or body format."""

    def __init__(self, r: ChatRendering, thinking: bool, body: dict, reply: Reply, prompt_chars: int) -> None:
        self.r = r
        self.model = body["model"]
        self.refusal = reply.refusal if r.refusals else None
        if reply.refusal is not None and not r.refusals:
            reply = replace(reply, text=reply.refusal)
        self.reply = reply
        self.thinking = thinking
        self.reasoning = reply.reasoning if self.thinking else ""
        self.calls = [
            RenderedCall(
                r.tool_call_id(body["messages"], n, call.name),
                call.name,
                orjson.dumps(call.arguments).decode(),
            )
            for n, call in enumerate(reply.tool_calls)
        ]
        generated = (
            len(reply.text) + len(self.reasoning) + sum(len(c.name) + len(c.arguments) for c in self.calls)
        )
        reasoning_tokens = estimate_tokens(len(self.reasoning)) if self.reasoning else 0
        self.usage = Usage(
            estimate_tokens(prompt_chars) + reply.cache_read,
            estimate_tokens(generated) + reasoning_tokens,
            reasoning_tokens,
            reply.cache_read,
        )
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.id = r.completion_id()
        self.created = int(time.time())
        if reply.stop == "length":
            self.finish_reason = "length"
        else:
            self.finish_reason = "tool_calls" if self.calls else "stop"

    def body(self) -> dict:
        r = self.r
        message = r.message(self.reply.text, self.reasoning, self.calls, self.thinking)
        if self.refusal is not None:
            message["content"], message["refusal"] = None, self.refusal
        choice = {
            "index": 0,
            "message": message,
            **r.choice_extra,
            "finish_reason": self.finish_reason,
        }
        usage = r.usage(self.usage)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
            **r.body_extra,
        }

    def _chunk(self, delta: dict, finish_reason: str | None = None, usage: dict | None = None) -> bytes:
        r = self.r
        choice = {"index": 0, "delta": delta, **r.choice_extra, "finish_reason": finish_reason}
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **r.chunk_extra,
            "choices": [choice],
        }
        if usage is not None and r.usage_placement == "choice":
            choice["usage"] = usage
        elif usage is not None and r.usage_placement == "finish":
            chunk["usage"] = usage
        elif r.null_usage_on_chunks:
            chunk["usage"] = None
        return sse_frame(chunk)

    def frames(self) -> list[bytes]:
        r = self.r
        deltas: list[dict] = [r.role_delta(self.thinking)]
        if self.reasoning:
            if r.reasoning_delta is None:
                raise ValueError(f"{self.model}: a reasoning answer in a dialect without reasoning deltas")
            deltas += [
                r.reasoning_delta(piece) for piece in split_text(self.reasoning, self.reply.chunk_size)
            ]
            if r.reasoning_close is not None:
                deltas.append(r.reasoning_close)
        deltas += [
            r.content_delta(piece, self.thinking)
            for piece in split_text(self.reply.text, self.reply.chunk_size)
        ]
        if self.refusal is not None:
            deltas += [{"refusal": piece} for piece in split_text(self.refusal, self.reply.chunk_size)]
        finish = r.finish_delta(self.thinking)
        if r.tool_calls_whole and self.calls:
            # the calls ride on the finishing chunk, complete and without index
            finish = {
                **finish,
                "content": None,
                "tool_calls": [
                    {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in self.calls
                ],
            }
        else:
            for index, c in enumerate(self.calls):
                head = {
                    "index": index,
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": ""},
                }
                deltas.append({"tool_calls": [head]})
                for piece in split_text(c.arguments, self.reply.chunk_size):
                    deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        if r.role_merges_into_tool_delta and len(deltas) > 1 and "tool_calls" in deltas[1]:
            deltas[0:2] = [{**deltas[0], "content": None, "tool_calls": deltas[1]["tool_calls"]}]
        usage = r.usage(self.usage)
        frames = [self._chunk(delta) for delta in deltas]
        if r.usage_placement == "trailing":
            frames.append(self._chunk(finish, self.finish_reason))
        else:
            frames.append(self._chunk(finish, self.finish_reason, usage))
        if r.usage_placement == "choice" or (r.usage_placement == "trailing" and self.include_usage):
            trailing = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                **r.chunk_extra,
                "choices": [],
                "usage": usage,
            }
            frames.append(sse_frame(trailing))
        frames.append(b"data: [DONE]\n\n")
        return frames
