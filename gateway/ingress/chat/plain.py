"""Chat Completions messages of the plain shapes an agent sends turn after turn (string content,
function tool calls, no other fields) recognised and decoded from the parsed JSON itself.

A message of such a shape passes the wire models' validation (gateway/ingress/chat/wire.py), so
validating it builds pydantic objects only to be read once: ~2.5 us a message, most of a long
transcript's first decode. Any other shape (content parts, cache marks, echoed tokens, unknown
fields, a value of another type) goes through pydantic as before. Both paths end in the same
checks (`tool_call`, `assistant_end`); tests/ingress/test_chat_plain.py compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.ingress.errors import invalid
from gateway.ingress.reasoning_details import assistant_blocks, plain_blocks
from gateway.transcript.model import Block, Continuity, Message, Reasoning, Role, Text, ToolCall, ToolResult
from gateway.transcript.seal import Sealer

_ROLE_KEYS = frozenset({"role", "content"})
_TOOL_KEYS = frozenset({"role", "tool_call_id", "content"})
_ASSISTANT_KEYS = frozenset({"role", "content", "tool_calls", "refusal", "reasoning_content"})
_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_TEXT_ROLES = frozenset({"user", "system", "developer"})
_SYSTEM, _USER, _ASSISTANT, _TOOL = Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL


def plain(raw: Any) -> bool:
    """Whether `raw` (one item of `messages`) has a plain shape: `plain_message` decodes it."""
    if type(raw) is not dict:
        return False
    role = raw.get("role")
    if role == "tool":
        call_id = raw.get("tool_call_id")
        return (
            raw.keys() <= _TOOL_KEYS
            and type(call_id) is str
            and call_id != ""
            and type(raw.get("content")) is str
        )
    if role == "assistant":
        if not raw.keys() <= _ASSISTANT_KEYS:
            return False
        for name in ("content", "refusal", "reasoning_content"):
            value = raw.get(name)
            if value is not None and type(value) is not str:
                return False
        calls = raw.get("tool_calls")
        return calls is None or (type(calls) is list and all(map(_plain_call, calls)))
    return (
        type(role) is str
        and role in _TEXT_ROLES
        and raw.keys() <= _ROLE_KEYS
        and type(raw.get("content")) is str
    )


def _plain_call(call: Any) -> bool:
    if type(call) is not dict or not call.keys() <= _CALL_KEYS:
        return False
    call_id, function = call.get("id"), call.get("function")
    if type(call_id) is not str or call_id == "" or type(function) is not dict:
        return False
    if "type" in call and (type(call["type"]) is not str or call["type"] != "function"):
        return False
    arguments = function.get("arguments", "")
    return function.keys() <= _FUNCTION_KEYS and type(function.get("name")) is str and type(arguments) is str


def plain_message(raw: dict[str, Any], where: str, sealer: Sealer) -> tuple[Message, int]:
    """A message `plain` accepted, decoded as its validated wire model is (decode.py `_message`)."""
    role = raw["role"]
    content = raw.get("content")
    if role == "tool":
        return Message(_TOOL, (ToolResult(raw["tool_call_id"], content, False, (), None),)), 0
    if role == "user":
        return Message(_USER, (Text(content),)), 0
    if role != "assistant":
        return Message(_SYSTEM, (Text(content),) if content else ()), 0
    calls = [
        (call["id"], call["function"]["name"], call["function"].get("arguments", ""))
        for call in raw.get("tool_calls") or ()
    ]
    return assistant_message(content, raw.get("refusal"), raw.get("reasoning_content"), calls, where, sealer)


def assistant_message(
    content: str | None,
    refusal: str | None,
    reasoning_content: str | None,
    calls: Sequence[tuple[str, str, str]],
    where: str,
    sealer: Sealer,
) -> tuple[Message, int]:
    """A plain assistant message from its fields, read from a dict (`plain_message`) or a Struct
    (typed.py `typed_message`): its calls as (id, name, arguments)."""
    text = content or ""
    if not text and refusal:
        text = refusal
    seen: set[str] = set()
    decoded = [tool_call(i, name, args, None, seen, where, j) for j, (i, name, args) in enumerate(calls)]
    return plain_end(text, content, decoded, reasoning_content, where)


def tool_call(
    call_id: str, name: str, args: str, signature: Continuity | None, seen: set[str], where: str, j: int
) -> ToolCall:
    """Call `j` of an assistant message (its id not among `seen`, which it joins; its arguments
    JSON or blank)."""
    if call_id in seen:
        raise invalid(
            f"duplicate tool call id {call_id!r}",
            param=f"{where}.tool_calls[{j}].id",
            code="invalid_value",
        )
    seen.add(call_id)
    if not arguments_ok(args):
        raise invalid(
            "tool call arguments must be a JSON string",
            param=f"{where}.tool_calls[{j}].function.arguments",
            code="invalid_value",
        )
    return ToolCall(call_id, name, args or "{}", signature)


def arguments_ok(args: str) -> bool:
    """Whether a call's `arguments` are JSON text or blank (what `tool_call` refuses otherwise).
    Parsed first: arguments are almost always JSON text, and blank text never parses."""
    try:
        orjson.loads(args)
    except orjson.JSONDecodeError:
        return not args.strip()
    return True


def assistant_end(
    text: str,
    content: Any,
    calls: list[ToolCall],
    reasoning_content: str | None,
    details: list[dict[str, Any]] | None,
    echoed: list[Reasoning],
    sealer: Sealer,
    where: str,
) -> tuple[Message, int]:
    """An assistant message from its text, calls and reasoning, and the echoed tokens ignored."""
    if not details and not echoed:
        return plain_end(text, content, calls, reasoning_content, where)
    try:
        blocks, ignored = assistant_blocks(text, calls, reasoning_content, details, sealer, echoed)
    except ValueError as exc:
        raise invalid(str(exc), param=f"{where}.reasoning_details", code="invalid_value") from None
    return _ended(blocks, content, where), ignored


def plain_end(
    text: str, content: Any, calls: Sequence[ToolCall], reasoning_content: str | None, where: str
) -> tuple[Message, int]:
    """`assistant_end` of a message with no reasoning details and no echoed reasoning (a plain
    shape's: plain.py, typed.py), none of its tokens ignored."""
    return _ended(plain_blocks(text, calls, reasoning_content), content, where), 0


def _ended(blocks: tuple[Block, ...], content: Any, where: str) -> Message:
    if blocks:
        return Message(_ASSISTANT, blocks)
    if content is None or content == []:
        raise invalid(
            "assistant message needs content or tool_calls",
            param=f"{where}.content",
            code="missing_required_parameter",
        )
    # `content: ""`: an empty model reply echoed back, which OpenAI accepts. It stays an empty
    # turn in the transcript; repair drops it (counted) for providers that refuse one.
    blank: tuple[Block, ...] = (Text(""),)
    return Message(_ASSISTANT, blank)
