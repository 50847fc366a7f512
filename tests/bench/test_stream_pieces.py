"""bench/stream_pieces.py works: the streamed answer it decodes and encodes is the whole answer's
(the same events, the same text to the client), and each step is measured (never a timing
assertion)."""

from __future__ import annotations

import orjson

from bench import stream_pieces
from gateway.transcript.events import BlockDelta, Finish, MessageStart, UsageUpdate


def test_the_stream_decodes_to_the_whole_answers_events():
    events = stream_pieces.decode()
    assert events == stream_pieces.whole_decode()
    assert [type(e) for e in (events[0], events[-2], events[-1])] == [MessageStart, UsageUpdate, Finish]
    assert [e.text for e in events if type(e) is BlockDelta] == ["tok "]


def test_the_stream_and_the_whole_answer_say_the_same():
    lines = [line[6:] for line in stream_pieces.encode().split(b"\n\n") if line.startswith(b"data: {")]
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in map(orjson.loads, lines) if c["choices"]
    )
    assert text == orjson.loads(stream_pieces.whole_encode())["choices"][0]["message"]["content"] == "tok "


def test_every_step_is_measured():
    assert all(stream_pieces.measure(step, 1) > 0 for step in stream_pieces.STEPS.values())
