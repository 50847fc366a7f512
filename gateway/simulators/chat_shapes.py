"""The body shape of a Chat Completions request, common to the chat simulators (openai_chat,
mistral, kimi, deepseek): fields, types, messages, tool calls, tools and tool_choice, checked in
the order the APIs report them. A problem is a `ShapeIssue`, which each dialect words its own way
(`ChatDialect.shape_rejection`); its conversation rules run after (`chat_family`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.simulators.chat_family import ChatDialect

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class ShapeIssue:
    """One structural problem in a request body; each dialect words it its own way."""

    kind: str  # "missing" | "type" | "value" | "empty" | "extra"
    path: Path
    expected: str = ""  # "a string", "an array"...; for "value": the supported values
    got: Any = None


def dotted(path: Path) -> str:
    """OpenAI's JSON path spelling: messages[1].tool_calls[0].function.name"""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


STRING = "a string"
ARRAY = "an array"
OBJECT = "an object"
BOOLEAN = "a boolean"
NUMBER = "a number"
INTEGER = "an integer"
CONTENT = "one of a string or array of objects"

_CHECKS: dict[str, Callable[[Any], bool]] = {
    STRING: lambda v: isinstance(v, str),
    ARRAY: lambda v: isinstance(v, list),
    OBJECT: lambda v: isinstance(v, dict),
    BOOLEAN: lambda v: isinstance(v, bool),
    NUMBER: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    INTEGER: lambda v: isinstance(v, int) and not isinstance(v, bool),
    CONTENT: lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(p, dict) for p in v)),
}

# Optional top-level parameters every dialect checks the type of when present.
_PARAM_TYPES = {
    "stream": BOOLEAN,
    "stream_options": OBJECT,
    "max_tokens": INTEGER,
    "max_completion_tokens": INTEGER,
    "temperature": NUMBER,
    "top_p": NUMBER,
    "tools": ARRAY,
    "n": INTEGER,
    "seed": INTEGER,
}


def _typed(value: Any, expected: str, path: Path) -> ShapeIssue | None:
    return None if _CHECKS[expected](value) else ShapeIssue("type", path, expected, value)


def _field(obj: dict, key: str, expected: str, path: Path, required: bool = True) -> ShapeIssue | None:
    if obj.get(key) is None:
        return ShapeIssue("missing", path + (key,)) if required else None
    return _typed(obj[key], expected, path + (key,))


def check_shape(body: Any, dialect: ChatDialect) -> ShapeIssue | None:
    """The first structural problem of a chat completions body, in the order the APIs report."""
    if not isinstance(body, dict):
        return ShapeIssue("type", (), OBJECT, body)
    if dialect.allowed_params is not None:
        for key in body:
            if key not in dialect.allowed_params:
                return ShapeIssue("extra", (key,), got=body[key])
    issue = _field(body, "model", STRING, ())
    if issue:
        return issue
    issue = _field(body, "messages", ARRAY, ())
    if issue:
        return issue
    if not body["messages"]:
        return ShapeIssue("empty", ("messages",))
    for key, expected in _PARAM_TYPES.items():
        if body.get(key) is not None and (issue := _typed(body[key], expected, (key,))):
            return issue
    if isinstance(body.get("stop"), (int, float, bool, dict)):
        return ShapeIssue("type", ("stop",), "one of a string or array of strings", body["stop"])
    for i, message in enumerate(body["messages"]):
        if issue := _check_message(message, ("messages", i), dialect):
            return issue
    for i, tool in enumerate(body.get("tools") or ()):
        if issue := _check_tool(tool, ("tools", i), dialect):
            return issue
    return _check_tool_choice(body, dialect)


def _check_message(message: Any, path: Path, dialect: ChatDialect) -> ShapeIssue | None:
    if not isinstance(message, dict):
        return ShapeIssue("type", path, OBJECT, message)
    issue = _field(message, "role", STRING, path)
    if issue:
        return issue
    role = message["role"]
    if role not in dialect.roles:
        return ShapeIssue("value", path + ("role",), ", ".join(f"'{r}'" for r in dialect.roles), role)
    calls = message.get("tool_calls")
    content_required = not (role == "assistant" and calls)
    if role == "assistant" and not calls and message.get("content") is None:
        return ShapeIssue("missing", path + ("content",))
    if issue := _field(message, "content", CONTENT, path, required=content_required):
        return issue
    for p, part in enumerate(message.get("content") if isinstance(message.get("content"), list) else ()):
        if issue := _field(part, "type", STRING, path + ("content", p)):
            return issue
        kind = part["type"]
        allowed = dialect.content_parts.get(role, ("text",))
        if kind not in allowed:
            expected = ", ".join(f"'{k}'" for k in allowed)
            return ShapeIssue("value", path + ("content", p, "type"), expected, kind)
        if kind == "text" and (issue := _field(part, "text", STRING, path + ("content", p))):
            return issue
    if role == "tool" and (issue := _field(message, "tool_call_id", STRING, path)):
        return issue
    if calls is not None and role == "assistant":
        if issue := _typed(calls, ARRAY, path + ("tool_calls",)):
            return issue
        for c, call in enumerate(calls):
            if issue := _check_call(call, path + ("tool_calls", c), dialect):
                return issue
    return None


def _check_call(call: Any, path: Path, dialect: ChatDialect) -> ShapeIssue | None:
    if not isinstance(call, dict):
        return ShapeIssue("type", path, OBJECT, call)
    if issue := _field(call, "id", STRING, path):
        return issue
    if issue := _field(call, "type", STRING, path, required=dialect.tool_call_type_required):
        return issue
    if "type" in call and call["type"] != "function":
        return ShapeIssue("value", path + ("type",), "'function'", call["type"])
    if issue := _field(call, "function", OBJECT, path):
        return issue
    function = call["function"]
    if issue := _field(function, "name", STRING, path + ("function",)):
        return issue
    return _field(function, "arguments", STRING, path + ("function",))


def _check_tool(tool: Any, path: Path, dialect: ChatDialect) -> ShapeIssue | None:
    if not isinstance(tool, dict):
        return ShapeIssue("type", path, OBJECT, tool)
    if issue := _field(tool, "type", STRING, path, required=dialect.tool_call_type_required):
        return issue
    if tool.get("type", "function") != "function":
        return ShapeIssue("value", path + ("type",), "'function'", tool["type"])
    if issue := _field(tool, "function", OBJECT, path):
        return issue
    function = tool["function"]
    if issue := _field(function, "name", STRING, path + ("function",)):
        return issue
    if issue := _field(function, "description", STRING, path + ("function",), required=False):
        return issue
    return _field(function, "parameters", OBJECT, path + ("function",), required=False)


def _check_tool_choice(body: dict, dialect: ChatDialect) -> ShapeIssue | None:
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in dialect.tool_choice_modes:
            supported = ", ".join(f"'{m}'" for m in dialect.tool_choice_modes)
            return ShapeIssue("value", ("tool_choice",), supported, choice)
        return None
    if not isinstance(choice, dict):
        return ShapeIssue("type", ("tool_choice",), "one of a string or object", choice)
    if issue := _field(choice, "function", OBJECT, ("tool_choice",)):
        return issue
    return _field(choice["function"], "name", STRING, ("tool_choice", "function"))
