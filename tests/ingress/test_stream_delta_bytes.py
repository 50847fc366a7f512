"""Stream encoders write the deltas of an open block from pre-rendered byte halves: the bytes are
exactly what rendering each event's JSON object writes (the dict path every other event takes)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.ingress.gemini.encode import AnswerParts, GeminiStreamEncoder
from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder, sse
from gateway.ingress.ndjson import NdjsonEncoder
from gateway.ingress.responses import stream as responses_stream
from gateway.ingress.responses.output import Answering
from gateway.ingress.responses.stream import ResponsesStreamEncoder
from gateway.ingress.responses.tools import ToolNames
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
# the Responses encoder also has refusals and custom tool calls (their input as raw text)
CUSTOM = "custom_call"
RESPONSES_KINDS = [*KINDS, BlockKind.REFUSAL, CUSTOM]


def _start(index: int, kind: BlockKind | str) -> BlockStart:
    if kind == CUSTOM:
        return BlockStart(index, BlockKind.TOOL_CALL, f"call_{index}", "apply_patch", True)
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


def _responses(canonical: list, summaries: bool) -> bytes:
    answering = Answering({"model": "m"}, ToolNames({}, {}), summaries, encrypted=False)
    encoder = ResponsesStreamEncoder(answering, "resp_abc", 7, SEALER)
    return encoder.start() + b"".join(encoder.event(e) or b"" for e in canonical) + encoder.finish()


def _responses_pair(canonical: list, summaries: bool, monkeypatch) -> tuple[bytes, bytes]:
    fast = _responses(canonical, summaries)
    with monkeypatch.context() as patch:
        patch.setattr(responses_stream, "delta_template", lambda *_: None)  # the dict path only
        slow = _responses(canonical, summaries)
    return fast, slow


@pytest.mark.parametrize("summaries", [False, True])
@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("kind", RESPONSES_KINDS)
def test_responses_deltas_are_the_event_objects_rendered(kind, interleave, summaries, monkeypatch):
    blocks = [(kind, TEXTS), (BlockKind.TEXT, TEXTS[::-1]), (kind, ["", "x"])]
    fast, slow = _responses_pair(_canonical(blocks, interleave), summaries, monkeypatch)
    assert fast == slow
    assert fast.count(b"response.output_text.delta") > 2


@given(
    st.lists(
        st.tuples(
            st.sampled_from(RESPONSES_KINDS), st.lists(st.sampled_from([*TEXTS, "x" * 40]), max_size=5)
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
    st.booleans(),
)
def test_responses_any_stream_is_byte_identical_to_the_dict_path(blocks, interleave, summaries):
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _responses_pair(_canonical(blocks, interleave), summaries, monkeypatch)
    assert fast == slow


def _gemini(canonical: list, thoughts: bool, sse_framing: bool) -> bytes:
    encoder = GeminiStreamEncoder(AnswerParts("r1", 'group "m"', thoughts, SEALER), sse_framing)
    return encoder.start() + b"".join(encoder.event(e) or b"" for e in canonical) + encoder.finish()


@given(BLOCKS, st.booleans(), st.booleans(), st.booleans())
def test_gemini_any_stream_is_byte_identical_to_the_dict_path(blocks, interleave, thoughts, sse_framing):
    # Gemini's calls carry an arguments object: their fragments make one
    blocks = [(kind, ['{"a":', " 1}"] if kind is BlockKind.TOOL_CALL else texts) for kind, texts in blocks]
    canonical = _canonical(blocks, interleave)
    fast = _gemini(canonical, thoughts, sse_framing)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(AnswerParts, "delta_template", lambda *_: None)  # the dict path only
        slow = _gemini(canonical, thoughts, sse_framing)
    assert fast == slow


@pytest.mark.parametrize("kind", [BlockKind.TEXT, BlockKind.REASONING, BlockKind.REFUSAL])
@pytest.mark.parametrize("text", [t for t in TEXTS if t])
def test_ndjson_delta_lines_are_the_line_objects_rendered(kind, text):
    encoder = NdjsonEncoder(lambda kind, meta: "token")
    encoder.event(BlockStart(0, BlockKind.TEXT))
    encoder.event(BlockStart(1, kind))
    line = encoder.event(BlockDelta(1, text))
    expected = {
        "type": {"text": "text", "reasoning": "thinking", "refusal": "refusal"}[kind.value],
        "index": 1,
    }
    assert line == orjson.dumps({**expected, "text": text}, option=orjson.OPT_APPEND_NEWLINE)
