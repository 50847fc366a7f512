"""Answers to custom tools sent in function form map back to custom calls."""

from __future__ import annotations

from gateway.routing.answer import CustomCallMapper, raw_input
from gateway.transcript.assembler import fold
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Finish
from gateway.transcript.model import StopReason, ToolCall


def test_the_function_form_comes_back_as_the_raw_text():
    mapper = CustomCallMapper({"apply_patch"})
    events = [
        BlockStart(0, BlockKind.TOOL_CALL, "toolu_1", "apply_patch"),
        BlockDelta(0, '{"input": "*** Begin'),
        BlockDelta(0, ' Patch\\n"}'),
        BlockStart(1, BlockKind.TOOL_CALL, "toolu_2", "search"),
        BlockDelta(1, '{"q": 1}'),
        BlockStop(1),
        BlockStop(0),
        Finish(StopReason.TOOL_CALLS),
    ]
    out = mapper(events[:3]) + mapper(events[3:])
    assert out[0] == BlockStart(0, BlockKind.TOOL_CALL, "toolu_1", "apply_patch", True)
    turn = fold(out)
    assert turn.blocks == [
        ToolCall("toolu_1", "apply_patch", "*** Begin Patch\n", custom=True),
        ToolCall("toolu_2", "search", '{"q": 1}'),
    ]


def test_arguments_that_do_not_follow_the_form_pass_as_they_are():
    assert raw_input("not json") == "not json"
    assert raw_input('{"other": 1}') == '{"other": 1}'
    assert raw_input('{"input": "x"}') == "x"
