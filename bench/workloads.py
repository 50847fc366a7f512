"""The requests the bench sends: a small chat request, and agent transcripts of an exact length
(reasoning, tool calls, 2 KB tool results, 20 tools) in OpenAI Chat Completions form. The same
bodies go direct to the upstream stub and through the gateway; only `model` differs."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

SMALL = [{"role": "user", "content": "What is six times seven?"}]
TOOL_COUNT = 20
RESULT_BYTES = 2048
_FILLER = (
    "def handler(request):\n    data = parse(request.body)\n    if not data.valid:\n"
    "        return error(400, data.problems)\n    return ok(compute(data))\n"
)


def small_body(model: str, stream: bool = False) -> bytes:
    body: dict[str, Any] = {"model": model, "messages": SMALL}
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def tools() -> list[dict[str, Any]]:
    """20 function tools with small JSON schemas, as a coding agent declares them."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i:02d}",
                "description": f"Tool number {i}: reads, edits or runs something in the workspace.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "a workspace path"},
                        "pattern": {"type": "string"},
                        "limit": {"type": "integer", "minimum": 1},
                    },
                    "required": ["path"],
                },
            },
        }
        for i in range(TOOL_COUNT)
    ]


def tool_result(seed: str, index: int) -> str:
    """2 KB of file-like text, different for every result (nothing is trivially shared)."""
    head = f"# {seed} result {index}\n"
    body = _FILLER * (RESULT_BYTES // len(_FILLER) + 1)
    return (head + body)[:RESULT_BYTES]


def agent_messages(count: int, seed: str) -> list[dict[str, Any]]:
    """Exactly `count` messages of an agent session: a system prompt and a task (both carry `seed`,
    so every seed is a session of its own), then tool round trips (an assistant turn with
    reasoning_content and one tool call, its 2 KB result), with a short text answer and a user
    follow-up every tenth round. The last message is a tool result or a user message."""
    if count < 2:
        raise ValueError("an agent transcript has at least a system prompt and a task")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You are a coding agent working in repository {seed}."},
        {"role": "user", "content": f"Task {seed}: fix the failing tests in src/."},
    ]
    # providers' call ids are unique per call: ids shared between sessions (the seed's first
    # characters name the path and size, not the session) let a memo keyed by message bytes find
    # another session's assistant turns, which real traffic never offers
    session = hashlib.sha256(seed.encode()).hexdigest()[:8]
    step = 0
    while len(messages) < count:
        call_id = f"call_{session}{step:016d}"[:29]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": f"Step {step}: the next thing to look at is file {step % 37}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": f"tool_{step % TOOL_COUNT:02d}",
                            "arguments": orjson.dumps({"path": f"src/mod_{step}.py", "limit": 200}).decode(),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": tool_result(seed, step)})
        if step % 10 == 9:
            messages.append({"role": "assistant", "content": f"Progress after step {step}: 3 tests fixed."})
            messages.append({"role": "user", "content": "Good, continue."})
        step += 1
    del messages[count:]
    if messages[-1]["role"] == "assistant":  # a request ends with what the model answers next
        messages[-1] = {"role": "user", "content": "Continue."}
    return messages


def agent_body(model: str, messages: list[dict[str, Any]], tool_defs: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": model, "messages": messages, "tools": tool_defs})


def next_turn(messages: list[dict[str, Any]], answer: dict[str, Any], seed: str) -> list[dict[str, Any]]:
    """Turn N+1 of an agent loop: turn N's messages, the assistant message exactly as it came back
    (a tool call), and that call's result."""
    call_id = answer["tool_calls"][0]["id"]
    result = {"role": "tool", "tool_call_id": call_id, "content": tool_result(seed, len(messages))}
    return [*messages, answer, result]
