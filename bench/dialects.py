"""The sweep's agent transcript (bench/workloads.py, Chat messages) as each client dialect sends
it: Codex's Responses `input` (store false, the whole list every turn, appended to) and Gemini
CLI's `contents` (the same), so bench/turns.py measures their warm turns too. A message is written
the same way on every turn (a function of the message alone), so a turn's list opens with the
last turn's bytes, as the apps' do (both append: checked with the real CLIs through tests/e2e).
The answer comes back in the dialect and goes on as a Chat message, from which the next turn's
body is written again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class Dialect:
    path: Callable[[str], str]  # the gateway's path for a model
    body: Callable[[str, Messages, Messages], bytes]  # model, Chat messages, Chat tools
    answer: Callable[[dict[str, Any]], dict[str, Any]]  # the answer as a Chat assistant message


def _chat_answer(answer: dict[str, Any]) -> dict[str, Any]:
    return answer["choices"][0]["message"]


def _chat_body(model: str, messages: Messages, tools: Messages) -> bytes:
    return orjson.dumps({"model": model, "messages": messages, "tools": tools})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or ())


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _responses_items(message: dict[str, Any]) -> Messages:
    role = message["role"]
    if role in ("system", "user"):
        kind = "input_text"
        role = "developer" if role == "system" else role
        return [
            {"type": "message", "role": role, "content": [{"type": kind, "text": _text(message["content"])}]}
        ]
    if role == "tool":
        return [
            {"type": "function_call_output", "call_id": message["tool_call_id"], "output": message["content"]}
        ]
    items: Messages = []
    if message.get("reasoning_content"):
        summary = [{"type": "summary_text", "text": message["reasoning_content"]}]
        items.append({"type": "reasoning", "summary": summary})
    if message.get("content"):
        text = [{"type": "output_text", "text": _text(message["content"]), "annotations": []}]
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    return items


def _responses_body(model: str, messages: Messages, tools: Messages) -> bytes:
    listed = [
        {"type": "function", "name": t["function"]["name"], "description": t["function"]["description"]}
        | {"parameters": t["function"]["parameters"], "strict": False}
        for t in tools
    ]
    items = [item for message in messages for item in _responses_items(message)]
    body = {"model": model, "input": items, "tools": listed, "store": False, "stream": False}
    return orjson.dumps(body)


def _responses_answer(answer: dict[str, Any]) -> dict[str, Any]:
    calls = [
        _call(item["call_id"], item["name"], item["arguments"])
        for item in answer["output"]
        if item["type"] == "function_call"
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _gemini_contents(messages: Messages) -> tuple[Messages, Messages]:
    system: Messages = []
    contents: Messages = []
    names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        if role == "system":
            system.append({"text": _text(message["content"])})
        elif role == "user":
            contents.append({"role": "user", "parts": [{"text": _text(message["content"])}]})
        elif role == "tool":
            call_id = message["tool_call_id"]
            response = {"name": names[call_id], "id": call_id, "response": {"output": message["content"]}}
            contents.append({"role": "user", "parts": [{"functionResponse": response}]})
        else:
            parts: Messages = []
            if message.get("content"):
                parts.append({"text": _text(message["content"])})
            for call in message.get("tool_calls") or ():
                function = call["function"]
                names[call["id"]] = function["name"]
                args = orjson.loads(function["arguments"] or "{}")
                parts.append({"functionCall": {"name": function["name"], "args": args, "id": call["id"]}})
            contents.append({"role": "model", "parts": parts})
    return system, contents


def _gemini_body(model: str, messages: Messages, tools: Messages) -> bytes:
    system, contents = _gemini_contents(messages)
    declarations = [{k: t["function"][k] for k in ("name", "description", "parameters")} for t in tools]
    body = {
        "contents": contents,
        "systemInstruction": {"parts": system},
        "tools": [{"functionDeclarations": declarations}],
    }
    return orjson.dumps(body)


def _gemini_answer(answer: dict[str, Any]) -> dict[str, Any]:
    parts = answer["candidates"][0]["content"]["parts"]
    calls = [
        _call(
            p["functionCall"].get("id") or f"call_{n}",
            p["functionCall"]["name"],
            orjson.dumps(p["functionCall"].get("args") or {}).decode(),
        )
        for n, p in enumerate(parts)
        if "functionCall" in p
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


DIALECTS = {
    "chat": Dialect(lambda model: "/v1/chat/completions", _chat_body, _chat_answer),
    "responses": Dialect(lambda model: "/v1/responses", _responses_body, _responses_answer),
    "gemini": Dialect(lambda model: f"/v1beta/models/{model}:generateContent", _gemini_body, _gemini_answer),
}
