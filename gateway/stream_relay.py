"""A streamed answer relayed to the client event by event, in its dialect (or NDJSON), as the
upstream's events arrive (gateway/answering.py sets the stream up and ends it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.client_exceptions import ClientConnectionResetError
from aiohttp.http_writer import StreamWriter

from gateway.ingress.base import StreamEncoder
from gateway.ingress.textual import ServerToolsAsText
from gateway.routing.answer import EventStream
from gateway.routing.engine import Answer
from gateway.transcript.assembler import Assembler, AssemblyError
from gateway.transcript.events import (
    BlockDelta,
    Event,
    Finish,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.reasoning import ReasoningFilter
from gateway.upstream import MAX_STREAM_CHUNK

if TYPE_CHECKING:
    from gateway.exchange import Exchange

# what an upstream that breaks its own answer format raises while its events are folded
FORMAT_ERRORS = (AssemblyError, TypeError, ValueError, KeyError)


def body_frames(writer: object) -> Callable[[bytes], None] | None:
    """A write of one chunk of a chunked body, framed here and handed to the transport: what
    aiohttp's `StreamResponse.write` sends for it, byte for byte, its output count kept, without
    its per-call checks (~0.6 us of a stream's chunk). Only once the headers are out, for a plain
    chunked body (no compression, declared length or write hooks); None otherwise, and aiohttp
    writes. aiohttp drains its buffer every 64 KiB written; the relay drains whenever the
    connection paused writing, after every write, which covers it."""
    if not (
        type(writer) is StreamWriter
        and writer.chunked
        and writer.length is None
        and writer.on_body_write is None
        and getattr(writer, "_compress", True) is None
        and getattr(writer, "_on_chunk_sent", True) is None
        and getattr(writer, "_headers_written", False)
    ):
        return None
    protocol = writer.protocol  # what the writer's `transport` property reads, read once here

    def frame(data: bytes) -> None:
        if not data:  # aiohttp writes nothing for it; framed, it would be the body's end
            return
        framed = b"%x\r\n%b\r\n" % (len(data), data)
        writer.output_size += len(framed)  # the access line's "answer started" check reads it
        transport = protocol.transport
        if transport is None or transport.is_closing():
            raise ClientConnectionResetError("Cannot write to closing transport")
        transport.write(framed)

    return frame


class Relay:
    """Writes an answer's events as they arrive (one write for what came without a wait). A client that
    reads slower than the answer comes holds the relay: while its connection's buffer is above
    the high-water mark nothing more is taken from the upstream (backpressure), so a stalled
    client costs one read plus that buffer until the write timeout ends it (gateway/server.py).

    Once the headers are out and aiohttp's writer takes plain chunked frames (`body_frames`), the
    relay is pushed: the upstream connection calls `_step` at each arrival (once per socket read,
    from its `data_received`), which decodes, encodes and writes what came there and then, while
    `run` waits on one future until the answer ended, failed or the client's buffer filled (it
    then drains it and is pushed again). A chunk then costs no task wake-up, no future and no
    coroutine resumed; before that (the first write, or another writer) `run` pulls."""

    __slots__ = (
        "_response",
        "_encoder",
        "_assembler",
        "_exchange",
        "_hide",
        "_last",
        "_interval",
        "_timer",
        "_ping",
        "held",
        "_stream",
        "_frame",
        "_first",
        "_timing",
        "_failed",
        "_broken",
        "_done",
        "_wrapper",
        "_protocol",
    )

    def __init__(
        self,
        response: web.StreamResponse,
        encoder: StreamEncoder,
        assembler: Assembler,
        exchange: Exchange,
        hide: ReasoningFilter | None = None,
    ) -> None:
        self._response = response
        self._encoder = encoder
        self._assembler = assembler
        self._exchange = exchange
        self._hide = hide  # set when the client does not see reasoning (it is still recorded)
        self._last = time.monotonic()  # when the upstream last produced something
        # the keep-alive (`keep_alive`): its interval, the timer that checks it, a ping being written
        self._interval = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._ping: asyncio.Task[None] | None = None
        # what `run` left for the caller to write ahead of the stream's ending (see there)
        self.held = b""
        # the run's state, shared by its pulls and its pushed steps: the stream, the framed
        # write (once the headers are out), what waits for the next write (the head, or an
        # ending held), whether the time to first token is still to be taken, how the relay
        # ended early (the upstream's error, the event the upstream broke), the pushed wait
        self._stream: EventStream | None = None
        self._frame: Callable[[bytes], None] | None = None
        self._first: list[bytes] = []
        self._timing = False
        self._failed: UpstreamError | None = None
        self._broken: Exception | None = None
        self._done: asyncio.Future[None] | None = None
        # a lone delta (nearly every chunk) goes to what the server-tools wrapper passes it to
        # (`ServerToolsAsText.delta`: the dialect's encoder itself, one call less)
        self._wrapper = encoder if type(encoder) is ServerToolsAsText else None
        # the client connection's protocol (aiohttp's `request.protocol`, a property), set by `run`
        self._protocol: Any = None

    async def run(self, answer: Answer, head: bytes = b"") -> UpstreamError | None:
        """Write `head` (the dialect's opening), relay every event; the stream's error, if it
        ends with one. A batch that ends the answer (a Finish) once the upstream's body is read
        whole (`EventStream.drained`: what is left comes without a wait) is not written but kept
        in `held`, for the caller to write with the stream's ending: one write and one packet
        less for an answer whose last events arrive with its end (a short answer often comes in
        one read)."""
        response, stream = self._response, answer.stream
        self._stream = stream
        # aiohttp drains only every 64 KiB written: the relay waits as soon as the buffer is full
        protocol, writer = self._exchange.http.protocol, self._exchange.http.writer
        self._protocol = protocol
        # the head goes out with the first events when they are in already (read before the
        # commit point: one write, one packet less per stream), never waiting for them
        self._first = [head] if head else []
        if head and not stream.ready():
            await response.write(head)
            self._first = []
        # the framed write once the headers are out (after `prepare`, or the head's write)
        frame = self._frame = body_frames(writer)
        # the time to first token is taken at the first content shown (`exchange.saw`): once it
        # is, the relay stops asking
        self._timing = self._exchange.ttft is None
        # the stream polled directly (not through `Answer.batches` nor `next_batch`): each batch
        # holds every event of what the upstream sent meanwhile. Released as soon as it ended,
        # as `batches` does
        poll = stream.poll
        # the bytes of batches that came without a wait, written together before the next wait
        # (a stream whose first batches are in at once, as the commit point leaves them: one
        # write and one send for all of them, not one each), written once they reach MAX_STREAM_CHUNK
        out: list[bytes] = []
        size = 0
        try:
            while (batch := poll()) is not None:
                if type(batch) is list:
                    data = self._handle(batch)
                    if data:
                        out.append(data)
                        size += len(data)
                    if self._failed is None and self._broken is None and size < MAX_STREAM_CHUNK:
                        continue
                # what came before an ending error goes out with its error event (the caller's
                # one write of `held`)
                if self._failed is not None:
                    self.held = b"".join(out)
                    return self._failed
                if self._broken is not None:
                    self.held = b"".join(out)
                    raise self._broken
                if out:
                    data = out[0] if len(out) == 1 else b"".join(out)
                    out.clear()
                    size = 0
                    if frame is not None:
                        frame(data)
                    else:
                        await response.write(data)
                        # from the second write on: the headers are out
                        frame = self._frame = body_frames(writer)
                if protocol.writing_paused:
                    await writer.drain()
                if type(batch) is list:  # written at the size bound: more may be in
                    continue
                # nothing in yet: the upstream connection's future (LATER only while pushed,
                # never seen here)
                if frame is None:
                    await batch
                    continue
                # pushed until the answer ends, fails or the client's buffer is full
                done = self._done = asyncio.get_running_loop().create_future()
                stream.on_arrival(self._step)
                try:
                    await done  # raises what broke a step (a client gone: the write's error)
                finally:
                    stream.on_arrival(None)
                if self._failed is not None:
                    return self._failed
                if self._broken is not None:
                    raise self._broken
                if protocol.writing_paused:
                    await writer.drain()
            # what came last without a wait, the head of an answer without events, and what the
            # drained upstream's end brought
            out += self._first
            self.held = b"".join(out)
        finally:
            await stream.aclose()
        return None

    def _step(self) -> bool:
        """An arrival while pushed: one batch of what is in relayed; True to be called again at
        once if anything is left to take (the connection knows: no second poll per arrival to
        find nothing), else at the next arrival. Once the relay must stop pushing (the answer's
        end, its failure, a full client buffer) `run` is woken and the step says False. Never
        raises into the connection: what a step raises, `run` raises."""
        done = self._done
        stream = self._stream
        assert done is not None and stream is not None and self._frame is not None
        try:
            batch = stream.poll()
            if type(batch) is list:
                data = self._handle(batch)
                if data:
                    self._frame(data)
                if self._failed is None and self._broken is None and not self._protocol.writing_paused:
                    return True
            elif batch is not None:  # nothing in (LATER): pushed again at the next arrival
                return False
        except Exception as exc:
            stream.on_arrival(None)
            if not done.done():
                done.set_exception(exc)
            return False
        stream.on_arrival(None)
        if not done.done():
            done.set_result(None)
        return False

    def _handle(self, batch: list[Event]) -> bytes:
        """A batch's events to the assembler and in the client's dialect: the bytes to write
        (with what waited for the next write), b"" when there are none or when they are held
        for the stream's ending. A StreamError sets `_failed`, an event the upstream broke sets
        `_broken`: what came before it is returned, to reach the client, and the relay ends."""
        if not batch:
            return b""
        if self._interval:  # only the keep-alive needs the time of the last batch
            self._last = time.monotonic()
        if (
            len(batch) == 1
            and type(event := batch[0]) is BlockDelta
            and self._hide is None
            and not self._timing
            and not self._first
        ):
            # nearly every chunk once the first content is out: one delta, shown, neither an
            # error nor an ending, nothing waiting: what the loop below does for it, without
            # its bookkeeping
            try:
                self._assembler.add(event)
                wrapper = self._wrapper
                return (self._encoder.event(event) if wrapper is None else wrapper.delta(event)) or b""
            except FORMAT_ERRORS as exc:
                self._broken = exc
                return b""
        encoder, assembler, exchange, hide = self._encoder, self._assembler, self._exchange, self._hide
        out, self._first = self._first, []
        for event in batch:
            t = type(event)
            if t is StreamError:
                self._failed = event.error
                return b"".join(out)
            if t is UsageUpdate:
                exchange.usage = event.usage
            try:
                assembler.add(event)
                shown = hide is None or hide.passes(event)
                chunk = encoder.event(event) if shown else None
            except FORMAT_ERRORS as exc:
                self._broken = exc
                return b"".join(out)
            if shown and self._timing:  # the first content is what the client sees
                exchange.saw(event)
                self._timing = exchange.ttft is None
            if chunk is not None:
                out.append(chunk)
        if not out:
            return b""
        # the answer's end with the upstream's read whole: held for the ending (`run`)
        if type(batch[-1]) is Finish and self._stream is not None and self._stream.drained():
            self._first = out
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def keep_alive(self, interval: float) -> None:
        """The dialect's keep-alive after `interval` seconds without upstream bytes (a long
        thinking phase), so clients and proxies do not time the stream out. A timer that checks
        the time of the last batch when it fires (one timer per quiet interval, no task per
        stream: a task only while a ping is written)."""
        self._interval = interval
        self._timer = asyncio.get_running_loop().call_later(interval, self._check)

    def stop_keeping_alive(self) -> None:
        self._interval = 0.0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._ping is not None:
            self._ping.cancel()
            self._ping = None

    def _check(self) -> None:
        self._timer = None
        if not self._interval:
            return
        loop = asyncio.get_running_loop()
        wait = self._last + self._interval - time.monotonic()
        if wait > 0:
            self._timer = loop.call_later(wait, self._check)
        else:
            self._ping = loop.create_task(self._send_ping())

    async def _send_ping(self) -> None:
        try:
            await self._response.write(self._encoder.keepalive())
        except (ConnectionError, RuntimeError):  # the client went away: the relay ends too
            return
        finally:
            self._ping = None
        self._last = time.monotonic()
        if self._interval:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._check)
