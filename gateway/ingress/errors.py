"""Client-facing errors (OpenAI's error body, and the Anthropic envelope for the Messages dialect),
and JSON safety checks on input."""

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


def openai_error_body(exc: ClientError) -> bytes:
    """`{"error": {"message", "type", "param", "code"}}`: Chat Completions and Responses."""
    return exc.to_json()


# Anthropic's error types by status (its documented set; a status it does not document takes the
# type of its class: another 4xx is an invalid request, another 5xx an api_error)
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error_body(exc: ClientError) -> bytes:
    """`{"type": "error", "error": {"type", "message"}}`: the Messages dialect's envelope, whose
    SDKs pick their exception class from `error.type`."""
    kind = _ANTHROPIC_TYPES.get(exc.status) or ("api_error" if exc.status >= 500 else "invalid_request_error")
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": exc.message}})


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
    if type(value) is not dict and type(value) is not list:
        return  # a scalar document (`null`, `5`, `"x"`): its dialect says what it expected
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
