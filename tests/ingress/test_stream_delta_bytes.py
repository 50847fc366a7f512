"""Stream encoders write the deltas of an open block from pre-rendered byte halves: the bytes are
exactly what rendering each event's JSON object writes (the dict path every other event takes)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder, sse
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Finish
from gateway.transcript.model import StopReason
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"s" * 32)
TEXTS = [
    "plain",
    "",
    'quote " and \\ backslash',
    "line\nbreak\ttab",
    "\u2028 é 😀 \x00",
    "</script>",
    '{"a": 1',
]
KINDS = [BlockKind.TEXT, BlockKind.REASONING, BlockKind.TOOL_CALL]


def _start(index: int, kind: BlockKind) -> BlockStart:
    if kind is BlockKind.TOOL_CALL:
        return BlockStart(index, kind, f"call_{index}", "lookup")
    return BlockStart(index, kind)


def _canonical(blocks: list[tuple[BlockKind, list[str]]], interleave: bool) -> list:
    """Blocks one after the other, or all started first with their deltas interleaved (the
    encoder then buffers all but the first)."""
    out: list = []
    if interleave:
        out += [_start(i, kind) for i, (kind, _) in enumerate(blocks)]
        longest = max((len(texts) for _, texts in blocks), default=0)
        for n in range(longest):
            out += [BlockDelta(i, texts[n]) for i, (_, texts) in enumerate(blocks) if n < len(texts)]
        out += [BlockStop(i) for i in range(len(blocks))]
    else:
        for i, (kind, texts) in enumerate(blocks):
            out += [_start(i, kind), *(BlockDelta(i, t) for t in texts), BlockStop(i)]
    return [*out, Finish(StopReason.END_TURN)]


def _messages_pair(canonical: list, omit: bool) -> tuple[bytes, bytes]:
    encoder = MessagesStreamEncoder(MessageEvents("msg_1", "m", None, omit, SEALER))
    fast = encoder.start() + b"".join(encoder.event(e) or b"" for e in canonical) + encoder.finish()
    events = MessageEvents("msg_1", "m", None, omit, SEALER)  # the dict path only
    slow = b"".join(sse(d) for e in canonical for d in events.feed(e)) + b"".join(map(sse, events.end()))
    return fast, slow


@pytest.mark.parametrize("omit", [False, True])
@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_messages_deltas_are_the_event_objects_rendered(kind, interleave, omit):
    blocks = [(kind, TEXTS), (BlockKind.TEXT, TEXTS[::-1]), (kind, ["", "x"])]
    fast, slow = _messages_pair(_canonical(blocks, interleave), omit)
    assert fast == slow
    assert b"text_delta" in fast


BLOCKS = st.lists(
    st.tuples(st.sampled_from(KINDS), st.lists(st.sampled_from([*TEXTS, "x" * 40]), max_size=5)),
    min_size=1,
    max_size=4,
)


@given(BLOCKS, st.booleans(), st.booleans())
def test_messages_any_stream_is_byte_identical_to_the_dict_path(blocks, interleave, omit):
    fast, slow = _messages_pair(_canonical(blocks, interleave), omit)
    assert fast == slow
