"""The shape of nearly every whole Chat Completions answer, typed for msgspec, and its events
made at once: one choice whose message is text (or nothing) and a finish reason, a usage; no
error, reasoning, refusal, tool call, annotation or per-choice usage. Such a body is what the
general path (`ChatStreamDecoder.on_chunk` over the body as one big delta, then `end_body`)
reads as MessageStart, the text block, its stop, the usage and the Finish: the same events are
made here without the stream decoder's state (~40k of the ~53k instructions a small body took,
`decode_response`). Any other body, or one msgspec cannot read as this shape, takes the general
path (tests/providers/test_chat_text_body.py: the same events or the same error either way).

A usage is kept as its raw JSON (`msgspec.Raw`), read by orjson, so its values are what the
general path reads. What msgspec accepts and orjson refuses, as for stream chunks
(text_chunk.py): a number beyond a double's range in a field the gateway never reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from gateway.providers.openai_compat.decode import FINISH_REASONS, usage_of
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    Finish,
    MessageStart,
    UsageUpdate,
)
from gateway.transcript.model import StopReason

if TYPE_CHECKING:
    from gateway.providers.openai_compat.adapter import ChatDialect

ABSENT = msgspec.Raw()  # the field absent (`null` is Raw(b"null"))


class TextMessage(msgspec.Struct):
    content: str | None = None
    # empty (or null) as the general path skips them; anything in them: the general path
    reasoning_content: str | None = None
    refusal: str | None = None
    tool_calls: list[Any] | None = None
    annotations: list[Any] | None = None


class TextChoice(msgspec.Struct):
    index: int = 0
    message: TextMessage | None = None
    finish_reason: str | None = None
    usage: msgspec.Raw = ABSENT  # Kimi's usage inside the choice: the general path


class TextBody(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    choices: list[TextChoice] | None = None
    usage: msgspec.Raw = ABSENT
    error: None = None


DECODER = msgspec.json.Decoder(TextBody)
# a body not of the shape, not JSON, not UTF-8, or nested deeper than msgspec follows
NOT_THE_SHAPE = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)


def text_events(body: bytes, dialect: ChatDialect) -> list[Event] | None:
    """The events of a whole answer of the shape; None for any other (the general path reads
    it). A usage that is no object raises as the general path's does (AttributeError...)."""
    try:
        typed = DECODER.decode(body)
    except NOT_THE_SHAPE:
        return None
    choices = typed.choices
    if not choices or len(choices) != 1:
        return None
    choice = choices[0]
    message = choice.message
    if choice.index != 0 or not choice.finish_reason or choice.usage:
        return None
    if message is not None and (
        message.reasoning_content or message.refusal or message.tool_calls or message.annotations
    ):
        return None
    usage: Any = None
    if typed.usage:
        try:
            usage = orjson.loads(memoryview(typed.usage))
        except orjson.JSONDecodeError:  # the general path refuses the whole body, as before
            return None
    out: list[Event] = [MessageStart(typed.id or "", typed.model or "")]
    content = message.content if message is not None else None
    if content:
        out += (BlockStart(0, BlockKind.TEXT), BlockDelta(0, content), BlockStop(0, None, ()))
    if usage:
        out.append(UsageUpdate(usage_of(dialect, usage)))
    out.append(Finish(FINISH_REASONS.get(choice.finish_reason) or StopReason.END_TURN))
    return out
