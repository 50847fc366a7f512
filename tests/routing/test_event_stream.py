"""`EventStream` on its own: batches per upstream chunk, events put back before the commit point
come first, a failure after the commit is heard once, tool-call ids are minted canonical ones, and
closing releases the upstream exactly once."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.routing.answer import EventStream, IdMapper
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
)
from gateway.transcript.model import NATIVE_ID, StopReason
from gateway.transcript.target import Target
from gateway.upstream import UpstreamFailure

TARGET = Target("p", "openai_chat", "gpt-4.1", "http://sim.invalid")
BROKEN = UpstreamError(ErrorCategory.CONNECTION, "reset")


class FakeUpstream:
    """The part of `Upstream` an EventStream uses: body chunks, then a failure if scripted."""

    def __init__(self, chunks: list[bytes], fail: bool = False) -> None:
        self._chunks = list(chunks)
        self._fail = fail
        self._arrived = False
        self.closed = 0
        self.waits = 0

    def take(self) -> bytes | asyncio.Future[None]:
        # each chunk arrives after a wait, as a socket's do: a future first, then the bytes
        if not self._arrived:
            self._arrived = True
            self.waits += 1
            arrival = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(arrival.set_result, None)
            return arrival
        self._arrived = False
        if self._chunks:
            return self._chunks.pop(0)
        if self._fail:
            raise UpstreamFailure(BROKEN)
        return b""

    def drained(self) -> bool:
        return not self._chunks and not self._fail

    async def __aexit__(self, *exc: object) -> None:
        self.closed += 1


class LineDecoder:
    """Each chunk is one line of text: one delta; the end is a Finish."""

    def feed(self, chunk: bytes) -> list[Event]:
        return [BlockDelta(0, chunk.decode())]

    def finish(self) -> list[Event]:
        return [BlockStop(0), Finish(StopReason.END_TURN)]


def stream_of(chunks: list[bytes], fail: bool = False) -> tuple[EventStream, FakeUpstream]:
    upstream = FakeUpstream(chunks, fail)
    return EventStream(IdMapper(TARGET), upstream, LineDecoder()), upstream  # type: ignore[arg-type]


async def batches(stream: EventStream) -> list[list[Event]]:
    out = []
    while (batch := await stream.next_batch()) is not None:
        out.append(batch)
    return out


async def test_one_batch_per_chunk_and_what_was_put_back_comes_first():
    stream, upstream = stream_of([b"a", b"b"])
    first = await stream.next_batch()
    opened = [MessageStart(), BlockStart(0, BlockKind.TEXT)]
    stream.unread([*opened, *first])
    rest = await batches(stream)
    assert rest == [
        [*opened, BlockDelta(0, "a")],
        [BlockDelta(0, "b")],
        [BlockStop(0), Finish(StopReason.END_TURN)],
    ]
    assert await stream.next_batch() is None
    assert upstream.waits == 3  # each of the two chunks and the end: the batch put back came at once
    await stream.aclose()
    await stream.aclose()  # safe twice
    assert upstream.closed == 1


async def test_poll_hands_the_wait_for_the_upstream_to_its_caller():
    stream, _ = stream_of([b"a"])
    stream.unread([MessageStart()])
    assert stream.poll() == [MessageStart()]  # put back: no wait
    arrival = stream.poll()
    assert isinstance(arrival, asyncio.Future) and not arrival.done()
    await arrival
    assert stream.poll() == [BlockDelta(0, "a")]
    await stream.poll()  # type: ignore[misc]
    assert stream.poll() == [BlockStop(0), Finish(StopReason.END_TURN)]
    assert stream.poll() is None
    await stream.aclose()


async def test_a_failure_after_the_commit_is_heard_once_and_ends_the_stream():
    stream, _ = stream_of([b"a"], fail=True)
    heard: list[UpstreamError] = []
    stream.after_commit(heard.append)
    got = await batches(stream)
    assert got == [[BlockDelta(0, "a")], [StreamError(BROKEN)]]
    assert heard == [BROKEN] and stream.error == BROKEN
    await stream.aclose()


async def test_a_failure_before_the_commit_is_left_to_the_attempt():
    stream, _ = stream_of([], fail=True)
    assert await stream.next_batch() == [StreamError(BROKEN)]
    assert stream.error is None  # the attempt moves on to another target: no failure of the answer
    await stream.aclose()


async def test_a_whole_answer_is_one_batch_with_canonical_call_ids():
    events: list[Event] = [
        BlockStart(0, BlockKind.TOOL_CALL, "call_native", "f"),
        BlockDelta(0, "{}"),
        BlockStop(0),
        Finish(StopReason.TOOL_CALLS),
    ]
    stream = EventStream(IdMapper(TARGET), events=events)
    (batch,) = await batches(stream)
    start, _, stop, _ = batch
    assert type(start) is BlockStart and start.id != "call_native" and start.name == "f"
    assert stop.meta is not None and stop.meta.data[NATIVE_ID] == "call_native"
    assert stop.meta.provider == TARGET.provider and stop.meta.model == TARGET.model
    await stream.aclose()


# any run of events a decoder may hand over: tool calls (with or without a native id) among text
_EVENTS = st.lists(
    st.one_of(
        st.builds(MessageStart, st.just("r"), st.just("m")),
        st.builds(
            BlockStart, st.integers(0, 3), st.sampled_from(list(BlockKind)), st.sampled_from(["", "n1"])
        ),
        st.builds(BlockDelta, st.integers(0, 3), st.sampled_from(["", "x"])),
        st.builds(BlockStop, st.integers(0, 3)),
        st.builds(Finish, st.just(StopReason.END_TURN)),
    ),
    max_size=12,
)


@given(st.lists(_EVENTS, max_size=4))
def test_a_batch_mapped_whole_is_each_event_mapped(batches):
    """`IdMapper.all` (no call per event that needs none) maps as mapping each event does, batch
    after batch (a tool call may start in one batch and stop in a later one)."""
    minted = iter(range(10**6))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gateway.routing.answer.mint_tool_call_id", lambda: f"call_{next(minted)}")
        whole, each = IdMapper(TARGET), IdMapper(TARGET)
        got = [whole.all(list(batch)) for batch in batches]
        minted = iter(range(10**6))
        assert got == [[each(e) for e in batch] for batch in batches]
