"""One keep-alive connection to a provider (`upstream_http.py`'s pool holds them): it writes a
call, parses the answer with llhttp (httptools) as it arrives and hands the body over, one answer
at a time. Past twice the read buffer held it stops reading its socket (TCP then throttles the
provider) and resumes once drained. A gzip/deflate body (asked for identity, but a provider may
compress anyway) is inflated as it arrives: no compressed byte reaches a decoder.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from collections.abc import Callable
from typing import Protocol

import httptools

# idle pooled connections older than this are closed (aiohttp's keepalive_timeout)
KEEPALIVE_SECONDS = 15.0
# the most one socket read of a compressed answer may inflate to (a bomb is refused, not held)
MAX_INFLATED = 64 * 1024 * 1024


class HttpError(Exception):
    """A broken exchange: the connection failed, closed early or the answer is not HTTP."""


class ConnectError(HttpError):
    pass


class ServerDisconnectedError(HttpError):
    pass


class PayloadError(HttpError):
    pass


class ConnectionTimeoutError(TimeoutError):
    pass


class SocketTimeoutError(TimeoutError):
    """The wait for the next bytes of an answer (or its headers) passed its limit; named and
    worded as aiohttp's, so the error text a stalled provider gives is the one it always gave."""


# what a failed call raises (ssl errors are OSErrors)
FAILURES = (HttpError, TimeoutError, OSError)


class Later:
    """What `Connection.take` hands a reader pushed by its arrivals (`on_arrival`) when nothing
    is in: it hears of the next one (no future to await, none made)."""

    __slots__ = ()


LATER = Later()


def read_timeout() -> SocketTimeoutError:
    return SocketTimeoutError("Timeout on reading data from socket")


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Pool(Protocol):
    """What a connection tells its pool: pool me again (an answer read whole), forget me (lost)."""

    def give_back(self, connection: Connection) -> None: ...
    def forget(self, connection: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One socket to a provider and the answer it is reading (one at a time)."""

    def __init__(self, pool: Pool, key: tuple[str, str, int], high: int) -> None:
        self._pool = pool
        self.key = key
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._high = high
        self.idle_since = 0.0
        self._lost = False
        self._active = False  # between a request sent and its answer's end
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the last exchange
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self._headers_done = False
        self._interim = False
        self.complete = False
        self._keep_alive = False
        self._close_delimited = False
        self._decoder: zlib._Decompress | None = None
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._paused = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        # who hears of arrivals in place of a waiter (`on_arrival`), and a wake-up held while
        # llhttp parses one read (heard once, after it)
        self._sink: Callable[[], object] | None = None
        self._feeding = False
        self._woken = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self._active:  # bytes nobody asked for: the connection is not to be trusted
            self.abort()
            return
        self._feeding = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # a callback's own error (an unsupported encoding...) is raised as its context
            cause = exc.__context__
            self.fail(cause if isinstance(cause, HttpError) else HttpError(f"invalid HTTP answer: {exc}"))
        finally:
            self._feeding = False
        if self._woken:  # every body piece of this read, or its end, told at once
            self._woken = False
            self._notify()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._pool.forget(self)
        if not self._active or self.complete or self._error is not None:
            return
        if self._headers_done and self._close_delimited and exc is None:
            self._body_end()  # the body is what came before the close
        elif self._headers_done:
            detail = f": {describe(exc)}" if exc is not None else ""
            self._set_error(PayloadError(f"Response payload is not completed{detail}"))
        else:
            detail = f" ({describe(exc)})" if exc is not None else ""
            self._set_error(ServerDisconnectedError(f"Server disconnected{detail}"))

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one call: the connection is out of step
            raise HttpError("bytes past the end of the answer")
        self.raw_headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self._interim = True
            return
        self.status = status
        self._keep_alive = self._parser.should_keep_alive()
        length = chunked = False
        for name, value in self.raw_headers:
            lower = name.lower()
            if lower == b"content-length":
                length = True
            elif lower == b"transfer-encoding":
                # not `in`: bytes' `__contains__` formats a TypeError first (~1.9k instructions)
                chunked = value.lower().find(b"chunked") >= 0
            elif lower == b"content-encoding":
                self._decoder = _decoder(value)
        self._close_delimited = not (length or chunked or status in (204, 304))
        self._headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._decoder is not None:
            decoder = self._decoder
            try:
                body = decoder.decompress(body, MAX_INFLATED)
            except zlib.error as exc:
                raise HttpError(f"undecodable compressed answer: {exc}") from None
            if decoder.unconsumed_tail:  # one socket read must not inflate without bound
                raise HttpError(f"compressed answer inflating past {MAX_INFLATED} bytes at once")
            if not body:
                return
        self._chunks.append(body)
        self._size += len(body)
        if self._size > self._high and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        # `_wake` inline: a streamed chunk's one callback of llhttp's
        if self._feeding:
            self._woken = True
        else:
            self._notify()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._body_end()

    # the exchange

    async def exchange(self, data: bytes | tuple[bytes, bytes], loop: asyncio.AbstractEventLoop) -> None:
        """Write the request (`data`: its bytes, or its head and body, written together) and
        wait for the answer's headers (bounded by whoever `fail`s it: the caller's watchdog or
        deadline). `loop`: the running loop, kept for the waits of the answer's reads."""
        self._active = True
        self._loop = loop
        transport = self._transport
        assert transport is not None
        if type(data) is bytes:
            transport.write(data)
        else:
            transport.writelines(data)
        if self._headers_done or self._error is not None:
            self._raise_error()
            return
        try:
            while not self._headers_done:
                self._raise_error()
                self._waiter = loop.create_future()
                await self._waiter
        finally:
            self._waiter = None
        self._raise_error()

    def take(self, n: int) -> bytes | asyncio.Future[None] | Later:
        """At most `n` bytes of the body already in (every piece held, joined, up to `n`); b""
        at its end. With nothing in yet: a future to await before taking again (the reader's
        one wait: whoever relays the body awaits it directly, no coroutine of ours between), or
        LATER for a reader pushed by the arrivals (`on_arrival`). A failed answer raises its
        error, ahead of any bytes still held."""
        if self._error is not None:
            raise self._error
        chunks = self._chunks
        if not chunks:
            if self.complete:
                return b""
            if self._sink is not None:
                return LATER
            loop = self._loop or asyncio.get_running_loop()  # (a test's connection sent nothing)
            waiter = self._waiter = loop.create_future()
            return waiter
        chunk = chunks.popleft()
        if len(chunk) > n:
            chunks.appendleft(chunk[n:])
            chunk = chunk[:n]
        elif chunks and len(chunk) + len(chunks[0]) <= n:
            pieces = [chunk]
            size = len(chunk)
            while chunks and size + len(chunks[0]) <= n:
                piece = chunks.popleft()
                pieces.append(piece)
                size += len(piece)
            chunk = b"".join(pieces)
        self._size -= len(chunk)
        if self._paused and self._size <= self._high // 2:
            self._paused = False
            if self._transport is not None and not self._lost:
                self._transport.resume_reading()
        return chunk

    def on_arrival(self, sink: Callable[[], object] | None) -> None:
        """Call `sink` (never raising) at each arrival of the answer (bytes, its end, its
        failure: once per socket read) instead of waking an awaited future; None: back to
        futures. A relay pushed this way takes and writes in the connection's own callback. A
        sink that returns a true value took once and is called again at once while anything is
        left to take; one that returns a false value hears of the next arrival."""
        self._sink = sink

    def fail(self, error: BaseException) -> None:
        """End the answer with `error` (raised to whoever reads it) and drop the connection."""
        self._set_error(error)
        self.abort()

    def finish(self) -> None:
        """The caller is done with the answer: pooled again if it was read to the end."""
        if self.complete and self._keep_alive and self._error is None and not self._lost and not self._chunks:
            self._active = False
            self._reset()
            self._pool.give_back(self)
        else:
            self.abort()

    @property
    def drained(self) -> bool:
        """The answer is in whole and every byte of it was read: a read now ends it at once."""
        return self.complete and not self._chunks and self._error is None

    def reusable(self, now: float) -> bool:
        return not self._lost and now - self.idle_since < KEEPALIVE_SECONDS

    def abort(self) -> None:
        self._lost = True
        if self._transport is not None:
            self._transport.abort()

    # internals

    def _body_end(self) -> None:
        if self._decoder is not None:
            rest = self._decoder.flush()
            self._decoder = None
            if rest:
                self._chunks.append(rest)
                self._size += len(rest)
        self.complete = True
        self._wake()

    def _set_error(self, error: BaseException) -> None:
        if self._error is None and not self.complete:
            self._error = error
            self._wake()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        if self._feeding:
            self._woken = True
        else:
            self._notify()

    def _notify(self) -> None:
        sink = self._sink
        if sink is not None:
            # called again at once while it took and something is left to take (more than one
            # take's worth, the answer's end, its failure): a pushed reader takes once per call,
            # never a second time only to find nothing in
            while sink() and (self._chunks or self.complete or self._error is not None):
                pass
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # cancelled: its reader went away
                waiter.set_result(None)


def _decoder(value: bytes) -> zlib._Decompress | None:
    coding = value.strip().lower()
    if coding in (b"", b"identity"):
        return None
    if coding in (b"gzip", b"x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if coding == b"deflate":
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib-wrapped (what "deflate" means)
    raise HttpError(f"unsupported content encoding {coding.decode('latin-1')!r}")
