"""Client-facing errors in the OpenAI error body shape, and JSON safety checks on input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


class ClientError(Exception):
    """An error answered to the client: `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def to_json(self) -> bytes:
        return orjson.dumps(self.body())


def invalid(message: str, param: str | None = None, code: str | None = None) -> ClientError:
    return ClientError(400, f"{param}: {message}" if param else message, param=param, code=code)


def json_path(loc: Iterable[Any]) -> str:
    """A pydantic error location as a JSON path: ("messages", 3, "content") -> messages[3].content"""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def check_depth(value: Any, limit: int) -> None:
    """Reject JSON nested deeper than `limit` (iteratively: a hostile body cannot blow the stack)."""
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            raise invalid(f"JSON nesting deeper than {limit} levels")
        deeper = depth + 1
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, deeper))


def parse_json_body(raw: bytes, max_depth: int) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from None
    check_depth(value, max_depth)
    return value
