"""The chat stream encoder writes text and reasoning deltas from pre-rendered byte halves: the
bytes are exactly what rendering the chunk's JSON object writes."""

from __future__ import annotations

import orjson
import pytest

from gateway.ingress.chat.encode import ChatStreamEncoder
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart
from gateway.transcript.seal import Sealer

TEXTS = ["plain", 'quote " and \\ backslash', "line\nbreak\ttab", "\u2028 é 😀 \x00", "</script>"]


@pytest.mark.parametrize("kind", [BlockKind.TEXT, BlockKind.REASONING])
@pytest.mark.parametrize("text", TEXTS)
def test_a_delta_is_the_chunk_object_rendered(kind, text):
    encoder = ChatStreamEncoder("chatcmpl-1", 'group/model "x"', False, Sealer(b"k" * 32), 7)
    encoder.event(BlockStart(0, kind))
    chunk = encoder.event(BlockDelta(0, text))
    key = "content" if kind is BlockKind.TEXT else "reasoning_content"
    expected = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 7,
        "model": 'group/model "x"',
        "choices": [{"index": 0, "delta": {key: text}, "logprobs": None, "finish_reason": None}],
    }
    assert chunk == b"data: " + orjson.dumps(expected) + b"\n\n"
