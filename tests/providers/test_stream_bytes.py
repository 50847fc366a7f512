"""A stream decoder handed the bytes of a one-event chunk (`SSEStreamDecoder.on_data`: msgspec or
orjson read them without a UTF-8 decode first) gives exactly the events of the path it replaces:
the SSE parser's decoded (name, data) pairs fed to `on_event`. Recorded streams and generated
chunks, with invalid UTF-8 (decoded with replacements on the old path) and frames split anywhere."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import anthropic, gemini, openai_responses
from gateway.providers.base import SSEStreamDecoder
from gateway.sse import SSELineTooLong
from gateway.transcript.events import ErrorCategory
from tests.conftest import fixture_path
from tests.providers.test_chat_text_chunk import CHUNK, OPENING
from tests.providers.test_openai_compat import ADAPTERS, chunk_lines, target

ALL = {
    **ADAPTERS,
    "gemini": gemini.ADAPTER,
    "anthropic": anthropic.ADAPTER,
    "openai_responses": openai_responses.ADAPTER,
}


def _old_feed(decoder: SSEStreamDecoder, chunk: bytes) -> list:
    """`SSEStreamDecoder.feed` as it was: every event framed and decoded by the SSE parser."""
    out: list = []
    try:
        frames = decoder._sse.feed(chunk)  # noqa: SLF001 - the path being compared
    except SSELineTooLong as exc:
        return decoder._fail(out, ErrorCategory.PROTOCOL, str(exc))  # noqa: SLF001
    for name, data in frames:
        if decoder.failed:
            break
        decoder.on_event(name, data, out)
    return out


def _decode(kind: str, chunks: list[bytes], old: bool) -> tuple[list, bool, bool]:
    decoder = ALL[kind].stream_decoder(target(kind))
    events: list = []
    for chunk in chunks:
        events += _old_feed(decoder, chunk) if old else decoder.feed(chunk)
    events += decoder.finish()
    return events, decoder.failed, decoder.done


def _same(kind: str, chunks: list[bytes]) -> list:
    new = _decode(kind, chunks, old=False)
    assert new == _decode(kind, chunks, old=True)
    return new[0]


def _frames(lines: list[str | bytes]) -> list[bytes]:
    return [b"data: " + (line if isinstance(line, bytes) else line.encode()) + b"\n\n" for line in lines]


@pytest.mark.parametrize(
    ("kind", "folder", "name"),
    [
        ("openai_chat", "openai-chat", "openai-text.chunks.txt"),
        ("deepseek", "deepseek", "deepseek-reasoning.chunks.txt"),
        ("mistral", "mistral", "mistral-tool-call.chunks.txt"),
        ("kimi", "moonshotai", "moonshotai-usage-live.chunks.txt"),
        ("gemini", "google", "google-tool-call-gemini3.chunks.txt"),
        ("gemini", "google", "google-reasoning-gemini3.chunks.txt"),
    ],
)
def test_recorded_one_event_chunks_decode_alike(kind, folder, name):
    lines = chunk_lines(fixture_path(folder, name))
    done = ["[DONE]"] if kind != "gemini" else []
    assert len(_same(kind, _frames([*lines, *done]))) > 3


# bytes that are not UTF-8, or only part of a character: the old path decoded them with U+FFFD
BAD = st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\x80"])


@st.composite
def corrupted(draw, line: bytes) -> bytes:
    """`line`, sometimes with a bad byte sequence put somewhere (inside a string, mostly)."""
    if not draw(st.booleans()):
        return line
    at = draw(st.integers(min_value=0, max_value=len(line)))
    return line[:at] + draw(BAD) + line[at:]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(CHUNK, max_size=6), st.booleans(), st.sampled_from(sorted(ADAPTERS)))
def test_any_chat_chunk_decodes_alike(data, chunks, done, kind):
    lines = [data.draw(corrupted(orjson.dumps(c))) for c in (OPENING, *chunks)]
    _same(kind, _frames([*lines, *([b"[DONE]"] if done else [])]))


GEMINI_LINES = chunk_lines(fixture_path("google", "google-reasoning-gemini3.chunks.txt")) + chunk_lines(
    fixture_path("google", "google-tool-call-gemini3.chunks.txt")
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(st.sampled_from(GEMINI_LINES), max_size=6))
def test_any_gemini_chunk_decodes_alike(data, lines):
    _same("gemini", _frames([data.draw(corrupted(line.encode())) for line in lines]))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(CHUNK, max_size=4), st.sampled_from(sorted(ALL)))
def test_frames_split_anywhere_decode_alike(data, chunks, kind):
    """Chunks that are not one whole event (split frames, several frames, comments, CRLF) take
    the parser's line framing on both paths; those that are take the bytes path."""
    body = (
        b"".join(_frames([orjson.dumps(c) for c in (OPENING, *chunks)])) + b": ping\r\n\r\ndata: [DONE]\n\n"
    )
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=8)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    _same(kind, pieces)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(CHUNK, max_size=5), st.sampled_from(sorted(ADAPTERS)))
def test_chunks_of_several_whole_events_decode_alike(data, chunks, kind):
    """A chunk of several whole events (a stream's first read: its opening and first content;
    its last: the finish, the usage and [DONE]) hands each event's bytes to `on_data`: the events
    of the parser's decoded pairs, invalid UTF-8 and the opening chunk's typed decode included."""
    frames = _frames([data.draw(corrupted(orjson.dumps(c))) for c in (OPENING, *chunks)] + [b"[DONE]"])
    cuts = sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=len(frames) - 1), max_size=3))))
    pieces = [b"".join(frames[a:b]) for a, b in zip([0, *cuts], [*cuts, len(frames)], strict=True)]
    _same(kind, pieces)


def test_named_events_of_a_whole_chunk_decode_alike():
    """Anthropic's named events, several in one chunk: decoded for `on_event` as before."""
    lines = chunk_lines(fixture_path("anthropic", "anthropic-tool-no-args.chunks.txt"))
    frames = [f"event: {orjson.loads(line)['type']}\ndata: {line}\n\n".encode() for line in lines]
    assert len(_same("anthropic", [b"".join(frames[:3]), b"".join(frames[3:])])) > 3
