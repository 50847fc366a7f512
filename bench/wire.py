"""The load generator's HTTP/1.1 client: keep-alive connections on asyncio protocols, answers
parsed by llhttp (httptools), requests written as one pre-rendered block. It replaced aiohttp's
client in the load generator because the rig's core (the stub and the load generator share one
while the relay under test has the other) saturated in bursts: at c=64 with a 20 ms upstream,
aiohttp's client spent ~95 us a request and a burst of 64 answers held the stub's core for ~6 ms,
so the direct path itself reached only ~0.8 of the no-queue bound. This client costs a fraction
of that; what it sends is what aiohttp's sent (the same headers: bench/load.py `DEFAULT_HEADERS`).

Only what the bench needs: POST with a body, 200 or not, a whole body or each read of a streamed
one handed to a sink as it arrives. A connection that fails or closes mid-answer fails its caller.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

# what a read of a streamed body is handed to: the bytes, and when the read returned
Sink = Callable[[bytes, float], None]
# a whole request: its bytes, or its head and its (large) body, written together
Request = bytes | tuple[bytes, bytes]


class WireError(Exception):
    """The connection failed, closed before the answer was complete, or the answer is not HTTP."""


class _Connection(asyncio.Protocol):
    __slots__ = ("transport", "parser", "waiter", "parts", "sink", "now", "closed", "lost")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.parts: list[bytes] = []
        self.sink: Sink | None = None
        self.now = 0.0
        self.closed = False  # no further request may use it (closed, or the server said close)
        self.lost = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.sink is not None:
            self.now = time.perf_counter()  # one time per read: events read together are 0 apart
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(WireError(f"bad answer: {exc}"))
            self.transport.close()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(WireError(f"connection lost: {exc!r}" if exc else "server closed the connection"))
        if not self.lost.done():
            self.lost.set_result(None)

    # -- llhttp callbacks
    def on_body(self, body: bytes) -> None:
        if self.sink is not None:
            self.sink(body, self.now)
        else:
            self.parts.append(body)

    def on_message_complete(self) -> None:
        if not self.parser.should_keep_alive():
            self.closed = True
            self.transport.close()  # type: ignore[union-attr]
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            body = b"".join(self.parts)
            self.parts.clear()
            waiter.set_result((self.parser.get_status_code(), body))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    # -- one exchange
    def send(self, request: Request, sink: Sink | None) -> asyncio.Future[tuple[int, bytes]]:
        self.waiter = waiter = asyncio.get_running_loop().create_future()
        self.sink = sink
        if type(request) is bytes:
            self.transport.write(request)  # type: ignore[union-attr]
        else:
            self.transport.writelines(request)  # type: ignore[union-attr]
        return waiter


class Client:
    """Up to `limit` keep-alive connections to one origin (as aiohttp's TCPConnector(limit=N)):
    a request takes an idle connection, or opens one while fewer than `limit` are open, or waits
    for one to come back. Used as `async with Client(url, limit) as client`."""

    def __init__(self, origin: str, limit: int) -> None:
        parts = urlsplit(origin)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.limit = limit
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._waiting: list[asyncio.Future[None]] = []

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in list(self._open):
            if conn.transport is not None:
                conn.transport.close()
        for conn in list(self._open):
            await conn.lost
        self._open.clear()
        self._idle.clear()

    async def _acquire(self) -> _Connection:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
                self._open.discard(conn)
            if len(self._open) < self.limit:
                return await self._connect()
            wait = asyncio.get_running_loop().create_future()
            self._waiting.append(wait)
            await wait

    async def _connect(self) -> _Connection:
        conn = _Connection()
        self._open.add(conn)
        try:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_connection(lambda: conn, self.host, self.port)
        except OSError as exc:
            self._open.discard(conn)
            self._wake()
            raise WireError(f"connect failed: {exc!r}") from exc
        conn.transport = transport  # uvloop may call connection_made after the connect returns
        return conn

    def _release(self, conn: _Connection) -> None:
        conn.sink = None
        if conn.closed:
            self._open.discard(conn)
        else:
            self._idle.append(conn)
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            wait = self._waiting.pop(0)
            if not wait.done():
                wait.set_result(None)
                return

    async def exchange(self, request: Request, sink: Sink | None = None) -> tuple[int, bytes]:
        """Send one whole request (head and body); the answer's status and body (with a sink, the
        body's reads go to the sink as they arrive and the body returned is empty)."""
        conn = await self._acquire()
        try:
            return await conn.send(request, sink)
        except BaseException:
            conn.closed = True  # an answer cut short leaves the connection in an unknown state
            if conn.transport is not None:
                conn.transport.close()
            raise
        finally:
            self._release(conn)


def request_head(url: str, headers: dict[str, str], length: int) -> bytes:
    """The request line and headers of a POST of `length` bytes to `url`."""
    parts = urlsplit(url)
    lines = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
