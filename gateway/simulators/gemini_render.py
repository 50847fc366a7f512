"""How the Gemini simulator answers: stream chunks and bodies, and the thought signatures it issues.

Gemini 3 models sign the first function call of a response, or a text answer through a final
(often empty) text part. Signatures bind the model and the content they cover.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.simulators.base import Reply, SimulatorState, split_text
from gateway.simulators.chat_render import random_token


def signs(model: str) -> bool:
    """Gemini 3 models issue and require thought signatures."""
    return "gemini-3" in model


def thinking_config(req: dict) -> dict:
    return req.get("generationConfig", {}).get("thinkingConfig", {})


def canonical_args(args: dict | None) -> str:
    return orjson.dumps(args or {}, option=orjson.OPT_SORT_KEYS).decode()


def call_covers(model: str, name: str, args: dict | None) -> tuple[str, ...]:
    """What a function call's signature is bound to."""
    return (model, "functionCall", name, canonical_args(args))


def text_covers(model: str, text: str) -> tuple[str, ...]:
    """What a text answer's signature is bound to: the answer's whole visible text."""
    return (model, "text", text)


def _tokens(chars: int) -> int:
    return max(1, chars // 4)


class ReplyRenderer:
    def __init__(self, state: SimulatorState, model: str, req: dict, reply: Reply, prompt_chars: int) -> None:
        self.model = model
        self.reply = reply
        config = thinking_config(req)
        thinks = signs(model) or ("gemini-2.5" in model and int(config.get("thinkingBudget", -1)) != 0)
        self.thoughts = reply.reasoning if thinks and config.get("includeThoughts") is True else ""
        self.calls = [
            {
                "id": random_token(8, "abcdefghijklmnopqrstuvwxyz0123456789"),
                "name": c.name,
                "args": c.arguments,
            }
            for c in reply.tool_calls
        ]
        self.call_signature = (
            state.sign(*call_covers(model, self.calls[0]["name"], self.calls[0]["args"]))
            if self.calls and signs(model)
            else None
        )
        self.text_signature = (
            state.sign(*text_covers(model, reply.text)) if signs(model) and not self.calls else None
        )
        generated = len(reply.text) + sum(len(c["name"]) + len(canonical_args(c["args"])) for c in self.calls)
        prompt, candidates = _tokens(prompt_chars) + reply.cache_read, _tokens(generated)
        self.usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if reply.cache_read:  # implicit caching: part of the prompt came from the cache
            self.usage["cachedContentTokenCount"] = reply.cache_read
        if thinks and reply.reasoning:
            self.usage["thoughtsTokenCount"] = _tokens(len(reply.reasoning))
            self.usage["totalTokenCount"] += self.usage["thoughtsTokenCount"]
        self.finish = "MAX_TOKENS" if reply.stop == "length" else "STOP"
        self.response_id = random_token(23)

    def _call_part(self, n: int, call: dict) -> dict:
        part: dict[str, Any] = {"functionCall": call}
        if n == 0 and self.call_signature is not None:
            part["thoughtSignature"] = self.call_signature
        return part

    def _response(self, parts: list[dict], finish: bool) -> dict:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish:
            candidate["finishReason"] = self.finish
        candidate["index"] = 0
        return {
            "candidates": [candidate],
            "usageMetadata": self.usage,
            "modelVersion": self.model,
            "responseId": self.response_id,
        }

    def chunks(self) -> list[dict]:
        size = self.reply.chunk_size
        chunks = [
            self._response([{"text": t, "thought": True}], False) for t in split_text(self.thoughts, size)
        ]
        chunks += [self._response([{"text": t}], False) for t in split_text(self.reply.text, size)]
        chunks += [self._response([self._call_part(n, c)], False) for n, c in enumerate(self.calls)]
        last: dict[str, Any] = {"text": ""}
        if self.text_signature is not None:
            last["thoughtSignature"] = self.text_signature
        chunks.append(self._response([last], True))
        return chunks

    def body(self) -> dict:
        parts: list[dict[str, Any]] = [{"text": self.thoughts, "thought": True}] if self.thoughts else []
        if self.reply.text or (not self.calls and self.text_signature is None):
            parts.append({"text": self.reply.text})
        parts += [self._call_part(n, c) for n, c in enumerate(self.calls)]
        if self.text_signature is not None:
            if self.reply.text:
                parts[-1]["thoughtSignature"] = self.text_signature
            else:
                parts.append({"text": "", "thoughtSignature": self.text_signature})
        return self._response(parts, True)
