"""A Chat Completions message validated a slice of its content parts per pydantic call, and the
request's first validation error found within as bounded a call.

pydantic-core never hands the GIL back during a call: one user message of 200,000 parts held it
~330 ms in the worker thread (gateway/offload.py) while the event loop waited, and the error of
such a message with one bad part, validated whole, ~0.6 s more. A slice takes ~3 ms.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from gateway.ingress.chat import wire as w

PARTS_PER_CALL = 2_000
# stands in for a message that passed, where only its place in the list matters
_VALID = {"role": "user", "content": ""}


def validated(raw: Any) -> w.Message:
    """`w.MESSAGE.validate_python(raw)`, a long content list in slices."""
    content = raw.get("content") if type(raw) is dict else None
    if type(content) is not list or len(content) <= PARTS_PER_CALL:
        return w.MESSAGE.validate_python(raw)
    message = w.MESSAGE.validate_python({**raw, "content": []})
    parts: list[w.UserPart] = []
    for start in range(0, len(content), PARTS_PER_CALL):
        parts += w.PARTS.validate_python(content[start : start + PARTS_PER_CALL])
    message.content = parts
    return message


def narrowed(body: dict[str, Any]) -> dict[str, Any]:
    """`body` cut to what decides its first validation error (errors come in field order: model,
    messages in order, the rest), so that validating it whole is one bounded call: the messages
    before the first that fails stand as a minimal valid message each (their indexes stay), that
    one's content list is its first failing slice, the messages after it go; when every message
    passes, one valid message stands for them all."""
    messages = body.get("messages")
    if type(messages) is not list or _parts(messages) <= PARTS_PER_CALL:
        return body
    for index, message in enumerate(messages):
        failing = _failing(message)
        if failing is not None:
            return {**body, "messages": [_VALID] * index + [failing]}
    return {**body, "messages": [_VALID]}


def _parts(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        content = message.get("content") if type(message) is dict else None
        total += len(content) if type(content) is list else 1
    return total


def _failing(message: Any) -> Any:
    """`message`, or as much of it as still fails as it does (None: it passes)."""
    content = message.get("content") if type(message) is dict else None
    if type(content) is not list or len(content) <= PARTS_PER_CALL:
        return None if _passes(message) else message
    for start in range(0, len(content), PARTS_PER_CALL):
        end = start + PARTS_PER_CALL
        try:
            w.PARTS.validate_python(content[start:end])
        except ValidationError:
            # the content union's first error names the field, not a part (its `str` branch
            # comes first): the failing slice alone fails as the whole list does
            return {**message, "content": content[start:end]}
    # every part passes: the rest of the message decides
    first = {**message, "content": content[:PARTS_PER_CALL]}
    return None if _passes(first) else first


def _passes(message: Any) -> bool:
    try:
        w.MESSAGE.validate_python(message)
    except ValidationError:
        return False
    return True
