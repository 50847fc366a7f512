"""The shape of nearly every Chat Completions stream chunk, typed for msgspec: choices whose
delta is text or reasoning text, a finish reason, a usage object; no error, refusal, tool call or
annotation. A usage is kept as its raw JSON (`msgspec.Raw`), read by orjson only when present
(a stream's last chunk or two), so its values are what the dict path reads, byte for byte.

msgspec decodes such a chunk without building the dicts of the fields nobody reads (a real
OpenAI chunk carries ids, fingerprints, obfuscation padding and per-choice filter results: 0.46
against orjson's 0.97 us for a 321-byte chunk). Every field the decoder reads is typed narrowly:
any other value (a refusal, a content list, a finish reason that is not a string, `index: true`...)
fails the typed decode and the chunk takes the dict path (`ChatStreamDecoder.on_chunk`), so the
events are the same either way (tests/providers/test_chat_text_chunk.py). What msgspec accepts
and orjson refuses: a number beyond a double's range in a field the gateway never reads (orjson
fails the whole chunk on it)."""

from __future__ import annotations

import msgspec


class TextDelta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    # present with any value but null: the dict path
    refusal: None = None
    tool_calls: None = None
    annotations: None = None


NO_USAGE = msgspec.Raw()  # the field absent (`null` is Raw(b"null"))


class TextChoice(msgspec.Struct):
    index: int = 0
    delta: TextDelta | None = None
    finish_reason: str | None = None
    usage: msgspec.Raw = NO_USAGE  # Kimi's usage inside the choice


class TextChunk(msgspec.Struct):
    choices: list[TextChoice] | None = None
    usage: msgspec.Raw = NO_USAGE
    error: None = None


class OpeningChunk(TextChunk):
    """A stream's first chunk (its MessageStart: the answer's id and model) of the same shape."""

    id: str | None = None
    model: str | None = None


DECODER = msgspec.json.Decoder(TextChunk)
OPENING = msgspec.json.Decoder(OpeningChunk)
# a chunk that is not of the shape, or not JSON at all (the dict path reports it as before);
# RecursionError: nesting deeper than msgspec follows (orjson's own limit then decides)
NOT_THE_SHAPE = (msgspec.DecodeError, RecursionError)
