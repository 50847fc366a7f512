from __future__ import annotations

import pytest

from gateway.transcript.assembler import Assembler, AssemblyError, fold
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Finish,
    MessageStart,
    UsageUpdate,
)
from gateway.transcript.model import Continuity, Reasoning, StopReason, Text, ToolCall, Usage

META = Continuity("claude", "claude", "anthropic", "m", {"signature": "s"})


def test_blocks_keep_start_order_when_they_finish_out_of_order():
    turn = fold(
        [
            MessageStart("r1", "m"),
            BlockStart(0, BlockKind.REASONING),
            BlockStart(1, BlockKind.TOOL_CALL, "t1", "f"),
            BlockStart(2, BlockKind.TEXT),
            BlockDelta(2, "hel"),
            BlockDelta(1, '{"a"'),
            BlockDelta(0, "think"),
            BlockDelta(2, "lo"),
            BlockDelta(1, ":1}"),
            BlockStop(2),
            BlockStop(1),
            BlockStop(0, META),
            UsageUpdate(Usage(10, 5)),
            Finish(StopReason.TOOL_CALLS),
        ]
    )
    assert turn.blocks == [Reasoning("think", META), ToolCall("t1", "f", '{"a":1}'), Text("hello")]
    assert turn.stop_reason is StopReason.TOOL_CALLS
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (10, 5)
    assert (turn.response_id, turn.model) == ("r1", "m")


def test_tool_call_without_arguments_gets_an_empty_object():
    turn = fold(
        [
            BlockStart(0, BlockKind.TOOL_CALL, "t", "f"),
            BlockDelta(0, ""),
            BlockStop(0),
            Finish(StopReason.TOOL_CALLS),
        ]
    )
    assert turn.blocks == [ToolCall("t", "f", "{}")]


@pytest.mark.parametrize(
    "events",
    [
        [BlockDelta(0, "x")],
        [BlockStart(0, BlockKind.TEXT), BlockStart(0, BlockKind.TEXT)],
        [BlockStop(3)],
        [BlockStart(0, BlockKind.TEXT), BlockStop(0), BlockDelta(0, "late")],
    ],
)
def test_protocol_violations_are_errors(events):
    assembler = Assembler()
    with pytest.raises(AssemblyError):
        for event in events:
            assembler.add(event)


@pytest.mark.parametrize("deltas", [255, 256, 257, 513, 1000])
def test_a_long_block_is_kept_whole_across_the_joins_of_its_deltas(deltas):
    # deltas are joined in groups as they come (a long answer's deltas are not kept one object
    # each): every count around a group's edge gives back the exact text, interleaved blocks too
    events = [
        MessageStart("r1", "m"),
        BlockStart(0, BlockKind.TEXT),
        BlockStart(1, BlockKind.TOOL_CALL, "t", "f"),
    ]
    for n in range(deltas):
        events += [BlockDelta(0, f"{n},"), BlockDelta(1, f"[{n}]")]
    events += [BlockStop(0), BlockStop(1), Finish(StopReason.END_TURN)]
    turn = fold(events)
    assert turn.blocks == [
        Text("".join(f"{n}," for n in range(deltas))),
        ToolCall("t", "f", "".join(f"[{n}]" for n in range(deltas))),
    ]
