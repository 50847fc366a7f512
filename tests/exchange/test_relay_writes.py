"""The relay's writes: the dialect's opening goes out in the same write as the first events when
they were read already (before the commit point), with every event in without a wait, and at once
when none is in (never held back waiting for the upstream), and the keep-alive written after a quiet interval until the relay
stops it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiohttp.client_exceptions import ClientConnectionResetError
from aiohttp.http_writer import StreamWriter
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from gateway.routing.answer import EventStream, IdMapper
from gateway.stream_relay import Relay, body_frames
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, Event, Finish
from gateway.transcript.model import StopReason
from tests.routing.test_event_stream import TARGET, LineDecoder

HEAD = b"<head>"


class Writes:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(data)


class Encoder:
    def event(self, event: Event) -> bytes | None:
        return f"<{event.text}>".encode() if type(event) is BlockDelta else None


class Exchange:
    usage = None
    ttft = None
    http = SimpleNamespace(protocol=SimpleNamespace(writing_paused=False), writer=None)

    def saw(self, event: Event) -> None:
        pass


class GatedUpstream:
    def __init__(self, chunks: list[bytes], gate: asyncio.Event) -> None:
        self._chunks, self._gate = list(chunks), gate

    def take(self) -> bytes | asyncio.Future[None]:
        if not self._gate.is_set():
            return asyncio.ensure_future(self._gate.wait())
        return self._chunks.pop(0) if self._chunks else b""

    def drained(self) -> bool:
        return self._gate.is_set() and not self._chunks

    async def __aexit__(self, *exc: object) -> None:
        pass


def _relay(stream: EventStream, assembler: Assembler | None = None) -> tuple[Relay, Writes, SimpleNamespace]:
    response = Writes()
    relay = Relay(response, Encoder(), assembler or Assembler(), Exchange())  # type: ignore[arg-type]
    return relay, response, SimpleNamespace(stream=stream)


@pytest.mark.parametrize("ending", [[], [Finish(StopReason.END_TURN)]], ids=["content", "ending"])
async def test_the_head_shares_the_first_write_with_events_read_before_the_commit(ending: list[Event]):
    """Bytes still to come from the upstream (they may be long): nothing is held back for them,
    not even an ending read before them."""
    gate = asyncio.Event()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([b"b"], gate), LineDecoder())  # type: ignore[arg-type]
    stream.unread([BlockStart(0, BlockKind.TEXT), BlockDelta(0, "a"), *ending])
    relay, response, answer = _relay(stream)
    task = asyncio.create_task(relay.run(answer, HEAD))  # type: ignore[arg-type]
    for _ in range(5):
        await asyncio.sleep(0)
    assert response.writes == [HEAD + b"<a>"], "written before waiting for the upstream"
    gate.set()
    assert await task is None
    assert (response.writes, relay.held) == ([HEAD + b"<a>"], b"<b>"), "the rest came with the end"


async def test_what_is_in_without_a_wait_goes_out_in_one_write():
    """A stream whose next bytes are in already (as the commit point often leaves it): one write
    for the head, what was read before the commit and what followed, not one a batch."""
    gate = asyncio.Event()
    gate.set()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([b"b", b"c"], gate), LineDecoder())  # type: ignore[arg-type]
    stream.unread([BlockStart(0, BlockKind.TEXT), BlockDelta(0, "a")])
    relay, response, answer = _relay(stream)
    assert await relay.run(answer, HEAD) is None  # type: ignore[arg-type]
    assert (response.writes, relay.held) == ([], HEAD + b"<a><b><c>"), "held for the ending's write"


async def test_the_head_goes_at_once_when_no_event_is_in_yet():
    gate = asyncio.Event()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([b"b"], gate), LineDecoder())  # type: ignore[arg-type]
    assembler = Assembler()
    assembler.add(BlockStart(0, BlockKind.TEXT))  # relayed earlier: nothing is in now
    relay, response, answer = _relay(stream, assembler)
    task = asyncio.create_task(relay.run(answer, HEAD))  # type: ignore[arg-type]
    for _ in range(5):
        await asyncio.sleep(0)
    assert response.writes == [HEAD], "written before the upstream sent anything"
    gate.set()
    await task
    assert (response.writes, relay.held) == ([HEAD], b"<b>")


async def test_an_answer_without_events_still_gets_its_head():
    stream = EventStream(IdMapper(TARGET), events=[])
    relay, response, answer = _relay(stream)
    stream.unread([])
    assert await relay.run(answer, HEAD) is None  # type: ignore[arg-type]
    assert (response.writes, relay.held) == ([], HEAD), "held for the ending's write"


async def test_the_end_of_an_answer_read_whole_is_held_for_the_ending():
    """The last batch (a Finish) once the upstream's body is read whole: nothing is left to wait
    for, so its bytes go out with the stream's ending (answer_stream writes `held` with it)."""
    gate = asyncio.Event()
    gate.set()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([], gate), LineDecoder())  # type: ignore[arg-type]
    stream.unread([BlockStart(0, BlockKind.TEXT), BlockDelta(0, "a"), Finish(StopReason.END_TURN)])
    relay, response, answer = _relay(stream)
    assert await relay.run(answer, HEAD) is None  # type: ignore[arg-type]
    assert (response.writes, relay.held) == ([], HEAD + b"<a>")


async def test_a_batch_that_does_not_end_the_answer_is_held_when_the_end_is_in_too():
    """The upstream's end is in with it (the decoder's finish adds the Finish): no wait follows."""
    gate = asyncio.Event()
    gate.set()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([], gate), LineDecoder())  # type: ignore[arg-type]
    stream.unread([BlockStart(0, BlockKind.TEXT), BlockDelta(0, "a")])
    relay, response, answer = _relay(stream)
    assert await relay.run(answer, HEAD) is None  # type: ignore[arg-type]
    assert (response.writes, relay.held) == ([], HEAD + b"<a>")


class PingingEncoder(Encoder):
    def keepalive(self) -> bytes:
        return b"<ping>"


async def _until(condition, limit: float = 10.0) -> None:
    """Polls `condition` (a bound on a loaded machine, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + limit
    while not condition():
        assert loop.time() < ends, "condition never met"
        await asyncio.sleep(0.005)


async def test_a_silent_upstream_gets_keepalives_until_the_relay_stops_them():
    gate = asyncio.Event()
    stream = EventStream(IdMapper(TARGET), GatedUpstream([b"b"], gate), LineDecoder())  # type: ignore[arg-type]
    stream.unread([BlockStart(0, BlockKind.TEXT)])
    response = Writes()
    relay = Relay(response, PingingEncoder(), Assembler(), Exchange())  # type: ignore[arg-type]
    relay.keep_alive(0.01)
    task = asyncio.create_task(relay.run(SimpleNamespace(stream=stream)))  # type: ignore[arg-type]
    await _until(lambda: response.writes.count(b"<ping>") >= 2)  # again after the first ping
    gate.set()
    await task
    relay.stop_keeping_alive()
    written = len(response.writes)
    assert relay.held == b"<b>", "came with the end: held for the ending's write"
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert len(response.writes) == written, "a keep-alive after the relay stopped them"


async def test_a_keepalive_that_cannot_be_written_ends_the_keepalives():
    class Gone(Writes):
        async def write(self, data: bytes) -> None:
            self.writes.append(data)
            raise ConnectionResetError

    response = Gone()
    relay = Relay(response, PingingEncoder(), Assembler(), Exchange())  # type: ignore[arg-type]
    relay.keep_alive(0.01)
    await _until(lambda: bool(response.writes))
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert response.writes == [b"<ping>"]
    relay.stop_keeping_alive()


class RecordingTransport:
    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data

    def writelines(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.sent += chunk

    def is_closing(self) -> bool:
        return False


class WriterProtocol:
    _paused = False
    writing_paused = False

    def __init__(self) -> None:
        self.transport = RecordingTransport()


def _chunked_writer() -> StreamWriter:
    writer = StreamWriter(WriterProtocol(), asyncio.get_running_loop())  # type: ignore[arg-type]
    writer.enable_chunking()
    return writer


async def _headers_out(writer: StreamWriter) -> None:
    await writer.write_headers("HTTP/1.1 200 OK", CIMultiDict({"Content-Type": "text/event-stream"}))
    await writer.write(b"first")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=5000), max_size=8))
def test_body_frames_sends_what_aiohttp_sends(chunks: list[bytes]) -> None:
    async def both() -> None:
        theirs, ours = _chunked_writer(), _chunked_writer()
        await _headers_out(theirs)
        await _headers_out(ours)
        frame = body_frames(ours)
        assert frame is not None
        for chunk in chunks:
            await theirs.write(chunk)
            frame(chunk)
        await theirs.write_eof()
        await ours.write_eof()
        assert ours.protocol.transport.sent == theirs.protocol.transport.sent  # type: ignore[attr-defined]
        assert ours.output_size == theirs.output_size

    asyncio.run(both())


async def test_body_frames_leaves_other_bodies_to_aiohttp():
    writer = _chunked_writer()
    assert body_frames(writer) is None, "the headers are not out yet"
    await _headers_out(writer)
    assert body_frames(writer) is not None
    compressed = _chunked_writer()
    compressed.enable_compression("gzip")
    await _headers_out(compressed)
    assert body_frames(compressed) is None
    plain = StreamWriter(WriterProtocol(), asyncio.get_running_loop())  # type: ignore[arg-type]
    await _headers_out(plain)
    assert body_frames(plain) is None, "not chunked"
    assert body_frames(SimpleNamespace(chunked=True)) is None, "not aiohttp's writer"


async def test_a_closed_connection_fails_the_framed_write_as_aiohttps():
    writer = _chunked_writer()
    await _headers_out(writer)
    frame = body_frames(writer)
    assert frame is not None
    writer.protocol.transport.is_closing = lambda: True  # type: ignore[attr-defined]
    with pytest.raises(ClientConnectionResetError):
        frame(b"x")
    with pytest.raises(ClientConnectionResetError):
        await writer.write(b"x")
