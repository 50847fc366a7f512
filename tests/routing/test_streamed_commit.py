"""The streamed attempt's commit loop (`attempt._streamed_attempt`, its checks written inline)
reaches the verdict the loop of `commits` and an error-finish check reached, for any batches of
events: the same failure, or the same events handed over, those read before the commit point put
back first."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.routing import answer
from gateway.routing.attempt import _empty_error_answer, _streamed_attempt, commits
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    MessageStart,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Message, Request, Role, StopReason, Text, Usage
from gateway.transcript.target import Target

TARGET = Target("p", "openai_chat", "gpt-4.1", "http://127.0.0.1:1/v1")
PREPARED = prepare(
    Request("g", (Message(Role.USER, (Text("hi"),)),), stream=True),
    TARGET,
    get_adapter("openai_chat").capabilities,
)

EVENTS = st.sampled_from(
    [
        MessageStart("m", "gpt-4.1"),
        BlockStart(0, BlockKind.TEXT),
        BlockDelta(0, ""),
        BlockDelta(0, "text"),
        BlockStop(0),
        BlockStart(1, BlockKind.REASONING),
        BlockDelta(1, "thought"),
        BlockStart(2, BlockKind.TOOL_CALL, "call_1", "f"),
        BlockDelta(2, "{}"),
        UsageUpdate(Usage(1, 2)),
        Finish(StopReason.END_TURN),
        Finish(StopReason.ERROR),
        StreamError(UpstreamError(ErrorCategory.SERVER, "first")),
        StreamError(UpstreamError(ErrorCategory.OVERLOADED, "second")),
    ]
)


class _Upstream:
    """The upstream's reads: batch N is the read b"N" (the decoder below decodes it), then its end."""

    status = 200

    def __init__(self, count: int) -> None:
        self._reads = [str(n).encode() for n in range(count)] + [b""]

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: Any) -> None:
        self._reads = []

    def close(self) -> None:
        self._reads = []

    def take(self) -> bytes:
        return self._reads.pop(0)

    def drained(self) -> bool:
        return len(self._reads) <= 1


class _Decoder:
    def __init__(self, batches: list[list[Event]]) -> None:
        self._batches = batches

    def feed(self, chunk: bytes) -> list[Event]:
        return list(self._batches[int(chunk)])

    def finish(self) -> list[Event]:
        return []


class _Adapter:
    def __init__(self, batches: list[list[Event]]) -> None:
        self._batches = batches

    def stream_decoder(self, target: Target, request: Request) -> _Decoder:
        return _Decoder(self._batches)


def reference(batches: list[list[Event]]) -> list[Event] | UpstreamError:
    """The loop as it was, over the batches, then the rest of the stream read on."""
    buffered: list[Event] = []
    committed = False
    at = 0
    while not committed and at < len(batches):
        for event in batches[at]:
            if type(event) is StreamError:
                if not committed:
                    return event.error
            elif not committed and type(event) is Finish and event.stop_reason is StopReason.ERROR:
                return _empty_error_answer(TARGET)
            buffered.append(event)
            committed = committed or commits(event)
        at += 1
    return buffered + [event for batch in batches[at:] for event in batch]


async def _attempt(batches: list[list[Event]]) -> list[Event] | UpstreamError:
    result = await _streamed_attempt(_Upstream(len(batches)), _Adapter(batches), TARGET, PREPARED, None)  # type: ignore[arg-type]
    if isinstance(result, UpstreamError):
        return result
    events: list[Event] = []
    while (batch := await result.next_batch()) is not None:
        events += batch
    return events


@settings(max_examples=300)
@given(st.lists(st.lists(EVENTS, max_size=5), max_size=5))
def test_the_inline_commit_loop_reaches_the_loop_s_verdict(batches: list[list[Event]]) -> None:
    minted = answer.mint_tool_call_id
    answer.mint_tool_call_id = lambda: "call_minted"  # type: ignore[assignment]
    try:
        found = asyncio.run(_attempt(batches))
        mapper = answer.IdMapper(TARGET)  # one per stream: a call's stop maps by its start
        expected = reference([mapper.all(list(b)) for b in batches])
    finally:
        answer.mint_tool_call_id = minted  # type: ignore[assignment]
    assert found == expected
