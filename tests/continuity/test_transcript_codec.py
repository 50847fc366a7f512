"""Kept transcripts (previous_response_id) and recorded turns round-trip every block kind."""

from __future__ import annotations

from gateway.continuity.codec import decode_transcript, decode_turn, encode_transcript, encode_turn
from gateway.transcript.model import (
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
)

META = Continuity("claude", "claude", "anthropic", "m", {"signature": "s"})
TRANSCRIPT = (
    Message(
        Role.USER,
        (
            Text("hi"),
            Image("https://x/a.png", "low"),
            Document("data:application/pdf;base64,JV", title="a.pdf"),
        ),
    ),
    Message(
        Role.ASSISTANT,
        (
            Reasoning("think", META),
            Text("ok", META),
            ToolCall("call_1", "f", "{}"),
            ToolCall("call_2", "p", "raw", custom=True),
        ),
    ),
    Message(
        Role.TOOL,
        (ToolResult("call_1", "r", True, (Image("https://x/b.png"),)), ToolResult("call_2", "done")),
    ),
    Message(Role.SYSTEM, (Text("be brief"),)),
)


def test_a_transcript_round_trips():
    assert decode_transcript(encode_transcript(TRANSCRIPT)) == TRANSCRIPT


def test_a_turn_keeps_its_custom_calls():
    blocks = TRANSCRIPT[1].blocks
    assert decode_turn(encode_turn(blocks)) == blocks


def test_unreadable_records_are_misses():
    assert decode_transcript(b"not json") is None
    assert decode_transcript(b"[2, []]") is None
    assert decode_turn(encode_transcript(TRANSCRIPT)) is None
