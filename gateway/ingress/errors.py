"""Client-facing errors (OpenAI's error body, and the Anthropic envelope for the Messages dialect),
and JSON safety checks on input."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from gateway.transcript.events import CONTEXT_OVERFLOW


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
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}
        # machine-readable detail a dialect's envelope carries (Anthropic's `error.details`)
        self.details = details

    def body(self) -> dict[str, Any]:
        message = self.message
        if self.code == CONTEXT_OVERFLOW:  # whichever family overflowed, in OpenAI's words
            message = context_overflow_message(message)
        return {"error": {"message": message, "type": self.type, "param": self.param, "code": self.code}}

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
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# Claude Code compacts the conversation only on this wording ("prompt is too long: N tokens > M
# maximum", whose numbers it reads)
PROMPT_TOO_LONG = "prompt is too long"
_NUMBERS = re.compile(r"\d[\d,]*")


def anthropic_error(exc: ClientError) -> tuple[int, bytes]:
    """(status, body) in Anthropic's envelope `{"type": "error", "error": {"type", "message"}}`,
    whose SDKs pick their exception class from `error.type`. Every target overloaded is 529
    `overloaded_error`; a context overflow from any provider is a 400 whose message says "prompt
    is too long"."""
    status, message = exc.status, exc.message
    if exc.code == CONTEXT_OVERFLOW:
        status, message = 400, prompt_too_long(message)
    elif status == 503:
        status = 529
    kind = _ANTHROPIC_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    error: dict[str, Any] = {"type": kind, "message": message}
    if exc.details is not None:
        error["details"] = exc.details
    return status, orjson.dumps({"type": "error", "error": error})


def prompt_too_long(message: str) -> str:
    """The wording Claude Code acts on, with the provider's own figures when it gave two (used,
    then the limit, in every provider's phrasing but OpenAI's, which names the limit first)."""
    if message.lower().startswith(PROMPT_TOO_LONG):
        return message
    figures = overflow_figures(message)
    if figures is not None:
        used, limit = figures
        return f"{PROMPT_TOO_LONG}: {used} tokens > {limit} maximum ({message})"
    return f"{PROMPT_TOO_LONG} ({message})"


def overflow_figures(message: str) -> tuple[int, int] | None:
    """(used, limit) when a provider's overflow message names both (every provider's phrasing
    but OpenAI's names the used count first; the larger number is the used one either way)."""
    numbers = [int(n.replace(",", "")) for n in _NUMBERS.findall(message)]
    numbers = [n for n in numbers if n >= 100]  # drop message indexes, status codes
    if len(numbers) >= 2:
        return max(numbers[:2]), min(numbers[:2])
    return None


# OpenAI's overflow wording: "This model's maximum context length is 128000 tokens. However, your
# messages resulted in 130000 tokens. Please reduce the length of the messages." (Chat, code
# context_length_exceeded); clients and frameworks match "maximum context length"
OPENAI_OVERFLOW = "maximum context length"


def context_overflow_message(message: str) -> str:
    """A provider's overflow message in OpenAI's words, with its figures when it gave them."""
    if OPENAI_OVERFLOW in message.lower():
        return message
    figures = overflow_figures(message)
    if figures is not None:
        used, limit = figures
        return (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{used} tokens. Please reduce the length of the messages. ({message})"
        )
    return (
        "This model's maximum context length was exceeded. Please reduce the length of the messages. "
        f"({message})"
    )


MAX_ECHOED = 200  # characters of a client's value an error message quotes


def echo(value: str, limit: int = MAX_ECHOED) -> str:
    """A client's value as an error message quotes it: bounded, so a huge id or header is not
    sent back (and logged) in full."""
    return value if len(value) <= limit else value[:limit] + "..."


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


def check_depth(value: Any, limit: int, skip: str | None = None, start: int = 1) -> None:
    """Reject JSON nested deeper than `limit`. `skip`: a top-level field whose list is not walked
    (the transcript: gateway/ingress/memo.py checks its items, each only when it is new). `start`:
    the depth `value` is at in its body."""
    if type(value) is not dict and type(value) is not list:
        return  # a scalar document (`null`, `5`, `"x"`): its dialect says what it expected
    if skip is not None and type(value) is dict and type(value.get(skip)) is list:
        if limit < 2:
            raise invalid(f"JSON nesting deeper than {limit} levels")
        value = {k: v for k, v in value.items() if k != skip}
    if nesting(value, start, limit) > limit:
        raise invalid(f"JSON nesting deeper than {limit} levels")


def nesting(value: Any, start: int = 1, past: int | None = None) -> int:
    """The depth of the deepest container in `value`, `value` itself at depth `start` (a scalar:
    `start - 1`; `[]` or `{}` at 1: 1; `[[1]]`: 2), walked iteratively (a hostile body cannot blow
    the stack); with `past`, the walk stops at the first container deeper than it (its depth)."""
    if type(value) is not dict and type(value) is not list:
        return start - 1
    deepest = 0
    stack = [(value, start)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > deepest:
            deepest = depth
            if past is not None and depth > past:
                return depth
        deeper = depth + 1
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, deeper))
    return deepest


def parse_json_body(raw: bytes, max_depth: int, skip: str | None = None) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from None
    return depth_checked(value, raw, max_depth, skip)


def depth_checked(value: Any, raw: bytes, max_depth: int, skip: str | None = None) -> Any:
    """`value`, parsed from `raw`, once no value in it is nested deeper than `max_depth`."""
    # no value is nested deeper than the body has opening brackets (those inside strings only
    # add to the count): a body with no more than the limit needs no walk (a small request). A
    # large body is walked without counting: the walk visits no more containers than the count
    # would find (and fewer with `skip`), and the count costs ~0.3 ms a MiB
    if len(raw) > _COUNTED_BYTES or raw.count(b"{") + raw.count(b"[") > max_depth:
        check_depth(value, max_depth, skip)
    return value


# the largest body whose opening brackets are counted before its walk (`depth_checked`)
_COUNTED_BYTES = 16 << 10
