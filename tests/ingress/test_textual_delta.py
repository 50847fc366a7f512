"""The server-tools wrapper's `delta` (what the relay calls for a lone delta, the wrapped encoder
itself while no server tool call is open) writes what its `event` writes for that delta, for any
sequence of events, server tool calls, results and citations among them, for each dialect it
wraps."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.chat.encode import ChatStreamEncoder
from gateway.ingress.ndjson import NdjsonEncoder
from gateway.ingress.responses.output import Answering
from gateway.ingress.responses.stream import ResponsesStreamEncoder
from gateway.ingress.responses.tools import ToolNames
from gateway.ingress.textual import ServerToolsAsText
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Event, Finish
from gateway.transcript.model import Citation, Continuity, ServerToolResult, StopReason
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"s" * 32)
OWN = Continuity("o", "o", "openai_responses", "m", {"id": "ws_1"})
OTHER = Continuity("a", "a", "anthropic", "m", {"encrypted_index": "x"})

EVENTS = st.sampled_from(
    [
        BlockStart(0, BlockKind.TEXT),
        BlockDelta(0, "It is sunny."),
        BlockDelta(0, ""),
        BlockStop(0),
        BlockStop(0, None, (Citation("https://w.example", "W", "sunny"),)),
        BlockStop(0, None, (Citation("https://w.example", "W", "sunny", OWN),)),
        BlockStart(1, BlockKind.SERVER_TOOL_CALL, "srv_1", "web_search"),
        BlockDelta(1, '{"query":'),
        BlockDelta(1, '"paris"}'),
        BlockStop(1),
        BlockStop(1, OWN),
        BlockStop(1, OTHER),
        BlockStart(
            2,
            BlockKind.SERVER_TOOL_RESULT,
            "srv_1",
            "web_search",
            result=ServerToolResult("srv_1", "web_search", text="found"),
        ),
        BlockStart(
            2,
            BlockKind.SERVER_TOOL_RESULT,
            "srv_1",
            "web_search",
            result=ServerToolResult("srv_1", "web_search", meta=OWN),
        ),
        BlockStop(2),
        BlockStart(3, BlockKind.SERVER_TOOL_CALL, "srv_2", "web_search"),
        BlockDelta(3, "{}"),
        BlockStop(3),
        BlockStart(4, BlockKind.REASONING),
        BlockDelta(4, "thinking"),
        Finish(StopReason.END_TURN),
    ]
)

WRAPPED = {
    "chat": lambda: ServerToolsAsText(ChatStreamEncoder("c", "m", True, SEALER, 0)),
    "responses": lambda: ServerToolsAsText(
        ResponsesStreamEncoder(
            Answering({"model": "m"}, ToolNames({}, {}), True, encrypted=False), "resp_1", 7, SEALER
        ),
        "openai_responses",
    ),
    "ndjson": lambda: ServerToolsAsText(NdjsonEncoder(lambda kind, meta: "token")),
}


def _written(wrapper: Any, events: list[Event], by_delta: bool) -> list[Any]:
    out: list[Any] = []
    for event in events:
        try:
            if by_delta and type(event) is BlockDelta:
                out.append(wrapper.delta(event))
            else:
                out.append(wrapper.event(event))
        except Exception as exc:  # an order no upstream sends may fail an encoder: alike
            out.append(type(exc))
            break
    return out


@settings(max_examples=300)
@given(st.lists(EVENTS, max_size=12), st.sampled_from(sorted(WRAPPED)))
def test_a_delta_is_written_as_event_writes_it(events: list[Event], dialect: str) -> None:
    make = WRAPPED[dialect]
    assert _written(make(), events, True) == _written(make(), events, False)


def test_a_server_tool_call_s_input_is_gathered_not_passed_on() -> None:
    wrapper = WRAPPED["chat"]()
    inner = wrapper.delta
    wrapper.event(BlockStart(1, BlockKind.SERVER_TOOL_CALL, "srv_1", "web_search"))
    assert wrapper.delta(BlockDelta(1, '{"query":"paris"}')) is None
    assert wrapper.delta != inner
    assert b"web_search" in (wrapper.event(BlockStop(1)) or b"")
    assert wrapper.delta == inner, "back to the encoder's own once no call is open"
