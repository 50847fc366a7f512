"""The relay pushed by the upstream connection (`Relay._step` called from its `data_received`
once the headers are out): every arrival written once and in order, a full client buffer stops
the pushing until drained (the upstream's bytes wait in its bounded buffer meanwhile), and an
upstream failure, a stall, an answer the upstream broke and a client gone end the relay as the
pulled relay does. Over the real `Upstream` and `Connection` (llhttp), fed in place of a socket."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiohttp.client_exceptions import ClientConnectionResetError
from aiohttp.http_writer import StreamWriter
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from gateway.providers.base import HttpRequest
from gateway.routing.answer import EventStream, IdMapper
from gateway.stream_relay import Relay
from gateway.transcript.assembler import Assembler, AssemblyError
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
)
from gateway.transcript.model import StopReason
from gateway.upstream import MAX_STREAM_CHUNK, UPSTREAM_READ_BUFFER, Timeouts, Upstream, client_session
from gateway.upstream_connection import Connection
from gateway.upstream_http import Response
from tests.routing.test_event_stream import TARGET

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"


def body(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in pieces)


END = b"0\r\n\r\n"


class Pool:
    def give_back(self, connection: object) -> None:
        pass

    def forget(self, connection: object) -> None:
        pass


class Socket:
    """The upstream connection's transport: whether it was paused or aborted."""

    def __init__(self) -> None:
        self.paused = False
        self.aborted = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def abort(self) -> None:
        self.aborted = True


class Decoder:
    """Each line is one delta; "!" is an event the upstream broke (a delta of a block never
    started, which the assembler refuses); the end closes the block."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[Event]:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        return [BlockDelta(9 if line == b"!" else 0, line.decode()) for line in lines]

    def finish(self) -> list[Event]:
        return [BlockStop(0), Finish(StopReason.END_TURN)]


class Encoder:
    def event(self, event: Event) -> bytes | None:
        return f"<{event.text}>".encode() if type(event) is BlockDelta else None


class ClientSide:
    """The client's transport and protocol as aiohttp's writer sees them: what was sent, in how
    many writes; `full` makes the next write fill the buffer (writing paused until `drained`)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.full = False
        self.closing = False
        self.writing_paused = False
        self._paused = False
        self._resumed = asyncio.Event()
        self.transport = self

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        if self.full:
            self.full = False
            self.writing_paused = self._paused = True
            self._resumed.clear()

    def writelines(self, chunks: list[bytes]) -> None:
        self.write(b"".join(chunks))

    def is_closing(self) -> bool:
        return self.closing

    async def _drain_helper(self) -> None:
        await self._resumed.wait()

    def drained(self) -> None:
        self.writing_paused = self._paused = False
        self._resumed.set()

    def text(self) -> bytes:
        """The chunked body's payload past the opening (the first write holds the headers and
        the opening, and what came with them)."""
        _, _, sent = b"".join(self.writes).partition(b"\r\n\r\n")
        out = b""
        while sent:
            size, _, rest = sent.partition(b"\r\n")
            n = int(size, 16)
            out += rest[:n]
            sent = rest[n + 2 :]
        assert out.startswith(b"<head>"), "the opening goes out first"
        return out[len(b"<head>") :]


class Exchange:
    usage = None
    ttft = 1.0

    def __init__(self, client: ClientSide, writer: StreamWriter) -> None:
        self.http = SimpleNamespace(protocol=client, writer=writer)

    def saw(self, event: Event) -> None:
        pass


class Stack:
    """A relay over a streamed upstream answer whose headers are in, the client's headers out."""

    def __init__(self, idle: float = 60.0) -> None:
        self.socket = Socket()
        self.connection = Connection(Pool(), ("http", "up.invalid", 80), 2 * UPSTREAM_READ_BUFFER)
        self.connection.connection_made(self.socket)  # type: ignore[arg-type]
        self.connection._active = True  # noqa: SLF001 - as once its request is written
        self.connection.data_received(HEAD)
        response = Response(None, None, b"")  # type: ignore[arg-type]
        response._connection = self.connection  # noqa: SLF001 - as `start` leaves it
        # a client of its own: its book holds the stream's idle watchdog (nothing is sent)
        self.upstream = Upstream(
            client_session(), HttpRequest("http://up.invalid/", {}, b""), Timeouts(idle=idle)
        )
        self.upstream._response = response  # noqa: SLF001 - as `__aenter__` leaves it
        self.stream = EventStream(IdMapper(TARGET), self.upstream, Decoder())  # type: ignore[arg-type]
        self.stream.unread([BlockStart(0, BlockKind.TEXT)])
        self.client = ClientSide()
        self.writer = StreamWriter(self.client, asyncio.get_running_loop())  # type: ignore[arg-type]
        self.writer.enable_chunking()
        self.relay = Relay(self, Encoder(), Assembler(), Exchange(self.client, self.writer))  # type: ignore[arg-type]

    async def write(self, data: bytes) -> None:  # the response's write: the headers go with it
        if not self.writer._headers_written:  # noqa: SLF001
            await self.writer.write_headers("HTTP/1.1 200 OK", CIMultiDict())
        await self.writer.write(data)

    def start(self) -> asyncio.Task[object]:
        return asyncio.create_task(self.relay.run(SimpleNamespace(stream=self.stream), b"<head>"))  # type: ignore[arg-type]

    def arrive(self, data: bytes) -> None:
        self.connection.data_received(data)

    async def relaying(self) -> asyncio.Task[object]:
        """The relay started, its first delta written (with the head and the headers): pushed."""
        task = self.start()
        self.arrive(body(b"a\n"))
        await self.pushed()
        return task

    async def pushed(self) -> None:
        """Until the relay waits pushed (the connection calls it at the next arrival)."""
        for _ in range(50):
            if self.connection._sink is not None:  # noqa: SLF001
                return
            await asyncio.sleep(0)
        raise AssertionError("the relay was never pushed")


async def test_each_arrival_is_written_at_once_in_the_connections_callback():
    stack = Stack()
    task = stack.start()
    stack.arrive(body(b"a\n"))
    await stack.pushed()  # the first write went out: from now on each arrival is pushed
    stack.arrive(body(b"b\n"))
    assert stack.client.text() == b"<a><b>", "written within the arrival's own callback"
    stack.arrive(body(b"c\n", b"d\n") + body(b"e\n"))  # one read, three body pieces: one write
    assert stack.client.text() == b"<a><b><c><d><e>"
    writes = len(stack.client.writes)
    stack.arrive(END)
    assert await task is None
    assert len(stack.client.writes) == writes and stack.relay.held == b"", "nothing after the end"
    assert stack.connection._sink is None  # noqa: SLF001 - the connection went back to futures


async def test_a_full_client_buffer_stops_the_pushing_until_drained():
    stack = Stack()
    task = await stack.relaying()
    stack.client.full = True
    stack.arrive(body(b"b\n"))  # written, and the client's buffer is full now
    stack.arrive(body(b"c\n"))
    stack.arrive(body(b"d\n"))
    await asyncio.sleep(0)
    assert stack.client.text() == b"<a><b>", "nothing more written while the client is full"
    assert stack.connection._sink is None  # noqa: SLF001 - the upstream's bytes wait, bounded
    stack.client.drained()
    await stack.pushed()
    assert stack.client.text() == b"<a><b><c><d>", "what waited went out first, in order"
    stack.arrive(body(b"e\n") + END)
    assert await task is None
    assert stack.client.text() == b"<a><b><c><d><e>"


async def test_an_upstream_failure_while_pushed_ends_the_relay_with_its_error():
    stack = Stack()
    task = await stack.relaying()
    stack.connection.connection_lost(ConnectionResetError("reset"))
    error = await task
    assert error is not None and error.category is ErrorCategory.CONNECTION
    assert stack.client.text() == b"<a>"


async def test_a_stall_while_pushed_ends_the_relay_with_the_idle_timeout():
    stack = Stack(idle=0.05)
    task = await stack.relaying()
    error = await asyncio.wait_for(task, 10)
    assert error is not None and error.category is ErrorCategory.TIMEOUT
    assert stack.socket.aborted


async def test_an_event_the_upstream_broke_while_pushed_is_raised_after_what_came_before():
    stack = Stack()
    task = await stack.relaying()
    stack.arrive(body(b"b\n!\nc\n"))
    with pytest.raises(AssemblyError):
        await task
    assert stack.client.text() == b"<a><b>"


async def test_a_broken_event_alone_in_its_arrival_is_raised_after_what_came_before():
    # one delta an arrival (nearly every chunk: the relay's shortest way), the broken one too
    stack = Stack()
    task = await stack.relaying()
    stack.arrive(body(b"b\n"))
    stack.arrive(body(b"!\n"))
    stack.arrive(body(b"c\n"))
    with pytest.raises(AssemblyError):
        await asyncio.wait_for(task, 10)
    assert stack.client.text() == b"<a><b>"
    assert stack.client.writes[-1].endswith(b"<b>\r\n")  # "b" went out in its own arrival


async def test_a_client_gone_while_pushed_raises_the_writes_error():
    stack = Stack()
    task = await stack.relaying()
    stack.client.closing = True
    stack.arrive(body(b"b\n"))
    with pytest.raises(ClientConnectionResetError):
        await task
    assert stack.socket.aborted, "the upstream answer abandoned: the provider stops"


async def test_a_stall_after_a_pushed_arrival_ends_the_relay_with_the_idle_timeout():
    # the arrival's one take found bytes and nothing more was taken: while pushed, the stream
    # waits for the upstream all the same
    stack = Stack(idle=0.05)
    task = await stack.relaying()
    stack.arrive(body(b"b\n"))
    error = await asyncio.wait_for(task, 10)
    assert error is not None and error.category is ErrorCategory.TIMEOUT
    assert stack.client.text() == b"<a><b>"
    assert stack.socket.aborted


async def test_each_arrival_is_taken_once_and_more_than_one_takes_worth_whole():
    stack = Stack()
    task = await stack.relaying()
    takes = []
    take = stack.connection.take

    def counted(n: int) -> object:
        takes.append(n)
        return take(n)

    stack.upstream._take = counted  # noqa: SLF001 - the connection's take, as the stream holds it
    stack.arrive(body(b"b\n"))
    stack.arrive(body(b"c\n"))
    assert takes == [MAX_STREAM_CHUNK] * 2, "one take an arrival: none only to find nothing in"
    line = b"x" * 99 + b"\n"
    big = line * (MAX_STREAM_CHUNK // len(line) + 50)  # over one take's bound, in one read
    stack.arrive(body(big))
    assert len(takes) == 4, "taken again at once while more was in"
    assert stack.client.text() == b"<a><b><c>" + b"".join(b"<%b>" % line[:-1] for _ in big.splitlines())
    stack.arrive(body(b"d\n") + END)  # the last bytes and the end in one read
    assert await asyncio.wait_for(task, 10) is None
    assert stack.client.text().endswith(b"<d>")
    assert stack.connection._sink is None  # noqa: SLF001


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([b"b", b"cc", b"x" * 5000]), min_size=1, max_size=20),
    st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=20),
    st.booleans(),
)
def test_any_split_of_the_arrivals_reaches_the_client_whole_and_in_order(
    lines: list[bytes], cuts: list[int], end_alone: bool
) -> None:
    # arrivals of one line or many (past one take's bound), the end with the last bytes or
    # alone: each line once, in order, and the relay ends with the answer
    async def run() -> None:
        stack = Stack()
        task = await stack.relaying()
        rest = [line + b"\n" for line in lines]
        arrivals = []
        for cut in cuts:
            if not rest:
                break
            arrivals.append(body(*rest[:cut]))
            rest = rest[cut:]
        if rest:
            arrivals.append(body(*rest))
        if end_alone:
            arrivals.append(END)
        else:
            arrivals[-1] += END
        for arrival in arrivals:
            stack.arrive(arrival)
            await asyncio.sleep(0)
        assert await asyncio.wait_for(task, 10) is None
        assert stack.client.text() == b"<a>" + b"".join(b"<%b>" % line for line in lines)
        assert stack.connection._sink is None  # noqa: SLF001

    asyncio.run(run())
