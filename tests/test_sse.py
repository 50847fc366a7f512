from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.sse import SSELineTooLong, SSEParser

STREAM = b'event: message_start\ndata: {"a":1}\n\n: keep-alive\n\ndata: x\ndata: y\n\nevent: ping\ndata: {}\r\n\r\n'
EXPECTED = [("message_start", '{"a":1}'), ("", "x\ny"), ("ping", "{}")]


def test_frames_events_with_multiline_data_comments_and_crlf():
    parser = SSEParser()
    assert parser.feed(STREAM) + parser.finish() == EXPECTED


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM)), max_size=20))
def test_any_chunking_gives_the_same_events(cuts):
    parser = SSEParser()
    out, last = [], 0
    for cut in sorted(set(cuts)):
        out += parser.feed(STREAM[last:cut])
        last = cut
    out += parser.feed(STREAM[last:]) + parser.finish()
    assert out == EXPECTED


def test_final_event_without_blank_line_is_delivered_at_finish():
    parser = SSEParser()
    assert parser.feed(b"data: last") == []
    assert parser.finish() == [("", "last")]


def test_line_longer_than_the_limit_is_refused():
    parser = SSEParser(max_line=16)
    with pytest.raises(SSELineTooLong):
        parser.feed(b"data: " + b"x" * 32)
    with pytest.raises(SSELineTooLong):
        SSEParser(max_line=16).feed(b"data: " + b"x" * 32 + b"\n\n")


def test_an_event_of_many_data_lines_is_bounded_as_a_whole():
    parser = SSEParser(max_line=64, max_event=100)
    with pytest.raises(SSELineTooLong):
        parser.feed(b"data: " + b"x" * 40 + b"\n" + (b"data: " + b"y" * 40 + b"\n") * 3)
    fine = SSEParser(max_line=64, max_event=100)
    assert fine.feed(b"data: a\ndata: b\n\n") == [("", "a\nb")]


EVENT_LINES = st.lists(
    st.sampled_from(
        [
            b"data: ",
            b"data:",
            b"data: {}",
            b"data: a:b",
            b"data:  x",
            b"event: e",
            b": c",
            b"",
            b"\r",
            b"id: 1",
        ]
    ),
    max_size=8,
)


@given(EVENT_LINES, st.lists(st.integers(min_value=1, max_value=80), max_size=6))
def test_whole_event_chunks_frame_as_byte_by_byte_feeding(lines, cuts):
    """The one-event fast path gives the events the line-by-line framing gives."""
    stream = b"".join(line + b"\n" for line in lines) + b"data: tail\n\n"
    slow = SSEParser()
    expected = [e for i in range(len(stream)) for e in slow.feed(stream[i : i + 1])] + slow.finish()
    fast, out, last = SSEParser(), [], 0
    for cut in sorted({c for c in cuts if c < len(stream)}):
        out += fast.feed(stream[last:cut])
        last = cut
    out += fast.feed(stream[last:]) + fast.finish()
    assert out == expected
    whole = SSEParser()
    assert whole.feed(b"data: one\n\n") + whole.feed(b"data: \xc3\n\n") == [("", "one"), ("", "\ufffd")]


def test_the_one_event_fast_path_keeps_the_limits():
    with pytest.raises(SSELineTooLong):
        SSEParser(max_line=16).feed(b"data: " + b"x" * 32 + b"\n\n")
    with pytest.raises(SSELineTooLong):
        SSEParser(max_line=64, max_event=10).feed(b"data: " + b"x" * 32 + b"\n\n")
    assert SSEParser(max_line=10).feed(b"data: abcd\n\n") == [("", "abcd")]


FRAMES = st.lists(
    st.tuples(
        st.sampled_from([b"", b"event: message_delta\n", b"event: \n", b"event: \xff\n", b"event:x\n"]),
        st.sampled_from(
            [b"data: {}", b"data: a: b", b"data: \xc3", b"data:x", b"data: ", b"id: 1", b"", b"xdata: q"]
        ),
        st.sampled_from([b"\n\n", b"\n", b"\n\n\n"]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=400)
@example([(b"", b"data: {}", b"\n"), (b"", b"xdata: q", b"\n\n")], (4096, 4096))
@example([(b"event: message_delta\n", b"data: {}", b"\n\n")], (19, 4096))
@given(
    FRAMES,
    st.tuples(
        st.one_of(st.just(4096), st.integers(min_value=4, max_value=24)),
        st.one_of(st.just(4096), st.integers(min_value=0, max_value=6)),
    ),
)
def test_chunks_of_whole_frames_frame_as_byte_by_byte_feeding(frames, limits):
    """A chunk of several `[event:]data:` frames (the walk by offsets) against the line framing,
    the limits included."""
    chunk = b"".join(name + data + end for name, data, end in frames)

    def framed(pieces: list[bytes]) -> list | str:
        parser = SSEParser(*limits)
        try:
            return [e for piece in pieces for e in parser.feed(piece)] + parser.finish()
        except SSELineTooLong:
            return "too long"

    assert framed([chunk]) == framed([chunk[i : i + 1] for i in range(len(chunk))])
