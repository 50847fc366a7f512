"""The HTTP/1.1 client behind `upstream.py` (its only user): a POST with a whole body, its answer
read as it arrives, over keep-alive connections pooled per (scheme, host, port).

Why not aiohttp's ClientSession: its per-request machinery (tracing hooks, cookie jar, middleware
chain, redirect loop, timer contexts, a response object built of several layers) cost ~80 us a
call where the exchange itself needs ~20. What is left is what a provider call needs: llhttp
(httptools) parses, asyncio's transport writes and reads, TLS is verified with SNI.

A connection goes back to the pool only when its answer was read to the end and the server kept
it alive; a body abandoned early closes its connection, which is how a client that hung up stops
the provider's generation. A streamed answer the caller stops pulling stops being read from the
socket past twice `read_buffer` bytes held (TCP then throttles the provider).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Mapping
from operator import methodcaller

from aiohappyeyeballs import AddrInfoType, start_connection
from yarl import URL

from gateway.bounded_cache import BoundedCache
from gateway.deadlines import Deadlines
from gateway.upstream_connection import (
    FAILURES,
    KEEPALIVE_SECONDS,
    ConnectError,
    Connection,
    ConnectionTimeoutError,
    HttpError,
    Later,
    describe,
    read_timeout,
)

__all__ = ["FAILURES", "HttpClient", "Response", "read_timeout"]

DNS_TTL_SECONDS = 300.0
_MAX_CACHED = 1024  # call heads made, names resolved: bounded caches
# a body this long or longer is written after its head by the transport, not joined to it first
_JOIN_MAX = 64 * 1024


class _Target:
    """One upstream URL as sent: pool key, address and the request head's fixed part."""

    __slots__ = ("key", "host", "port", "tls", "head")

    def __init__(self, url: str) -> None:
        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.raw_host:
            raise ValueError(f"not an http(s) URL: {parsed.scheme}://{parsed.raw_host}")
        self.host = parsed.raw_host
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.tls = parsed.scheme == "https"
        self.key = (parsed.scheme, self.host, self.port)
        host = f"[{self.host}]" if ":" in self.host else self.host
        if not parsed.is_default_port():
            host = f"{host}:{self.port}"
        self.head = f"POST {parsed.raw_path_qs} HTTP/1.1\r\nHost: {host}\r\n"


def _defaults(names: tuple[str, ...], user_agent: str) -> tuple[str, int]:
    """The framing lines a call with these header names gets added (aiohttp's defaults, but an
    identity encoding), and the count of lines the head then holds (for the line-break check)."""
    lower = {n.lower() for n in names}
    framing = lower & {"host", "content-length", "transfer-encoding", "connection"}
    if framing:  # the client writes these itself: a second copy would make the request ambiguous
        raise ValueError(f"an upstream request sets its framing header {sorted(framing)[0]!r} itself")
    extra = ""
    if "user-agent" not in lower:
        extra += f"User-Agent: {user_agent}\r\n"
    if "accept" not in lower:
        extra += "Accept: */*\r\n"
    if "accept-encoding" not in lower:
        # nothing to decompress on the hot path; a provider that compresses anyway is decoded
        extra += "Accept-Encoding: identity\r\n"
    if "content-type" not in lower:
        extra += "Content-Type: application/octet-stream\r\n"
    # request line, Host, the caller's headers, the extras, Content-Length, the blank line
    return extra, 2 + len(names) + extra.count("\n") + 2


class HttpClient:
    """The pool of provider connections; `close()` on shutdown. Upstream URLs come only from
    config: no proxy or netrc from the environment, no cookies."""

    def __init__(
        self, *, user_agent: str, read_buffer: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._user_agent = user_agent
        self._high = 2 * read_buffer
        self._ssl = ssl_context
        # (url, *header items) -> the target and the call's head up to its Content-Length value
        self._heads: BoundedCache[tuple[object, ...], tuple[_Target, bytes]] = BoundedCache(_MAX_CACHED)
        self._dns: BoundedCache[tuple[str, int], tuple[float, list[AddrInfoType]]] = BoundedCache(_MAX_CACHED)
        # per (scheme, host, port), in the order given back: see `_take`
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False
        # the `total` limits of the calls in flight and the idle watchdogs of the streams
        # (gateway/upstream.py), each behind one timer
        self.deadlines = Deadlines(methodcaller("expire"))
        self.idles = Deadlines(methodcaller("check_idle"))

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.abort()

    def request(self, url: str, headers: Mapping[str, str], body: bytes) -> Response:
        """A POST of `body` to `url`, not yet sent: `await response.start(...)` sends it."""
        # a provider's calls carry the same headers every time (its key, its version...): their
        # head up to the body's length is made and checked once
        key = (url, *headers.items())
        found = self._heads.get(key)
        if found is None:
            found = self._heads.keep(key, self._head(url, headers))
        target, head = found
        # one write either way; a long body is not copied behind its head (5.6 MB for an agent's
        # 5,000-message turn): the transport writes both (uvloop: one writev, no copy)
        if len(body) < _JOIN_MAX:
            return Response(self, target, b"%b%d\r\n\r\n%b" % (head, len(body), body))
        return Response(self, target, (b"%b%d\r\n\r\n" % (head, len(body)), body))

    def _head(self, url: str, headers: Mapping[str, str]) -> tuple[_Target, bytes]:
        """The target of `url` and a call's head with these headers, up to its Content-Length's
        value."""
        target = _Target(url)
        extra, lines = _defaults(tuple(headers), self._user_agent)
        head = "".join((target.head, *[f"{k}: {v}\r\n" for k, v in headers.items()], extra))
        # the Content-Length line and the blank line are added per call: not counted here
        if head.count("\n") != lines - 2 or head.count("\r") != lines - 2:
            # a header value holding a line break would smuggle a header; the value (a key
            # perhaps) is never named
            raise ValueError("an upstream request header holds a line break")
        return target, head.encode("utf-8") + b"Content-Length: "

    # the pool

    def _take(self, key: tuple[str, str, int], now: float) -> Connection | None:
        """The connection given back last that is still alive (the newest first, as Go's
        net/http pool does). Measured with the oldest first (aiohttp's order, cycling through
        every pooled connection): the bench sweep's 1,000-message warm turn +0.8 -> +1.3..2.3 ms
        above the floor, 5,000 warm +5 -> +10 ms, and the same with Linux's slow start after idle
        turned off (so not that: a connection just used is warm in the kernel's buffers and the
        caches; not established further). The cost: connections beyond the recent concurrency
        expire after the keep-alive time, and a later burst connects again for them (TLS with a
        provider)."""
        connections = self._idle.get(key)
        while connections:
            connection = connections.pop()
            if connection.reusable(now):
                return connection
            connection.abort()
        return None

    def give_back(self, connection: Connection) -> None:
        if self._closed:
            connection.abort()
            return
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        self._idle.setdefault(connection.key, []).append(connection)
        if self._sweep is None:
            self._sweep = loop.call_later(KEEPALIVE_SECONDS, self._swept)

    def forget(self, connection: Connection) -> None:
        connections = self._idle.get(connection.key)
        if connections and connection in connections:
            connections.remove(connection)

    def _swept(self) -> None:
        self._sweep = None
        now = asyncio.get_running_loop().time()
        for connections in self._idle.values():
            stale = [c for c in connections if not c.reusable(now)]
            for connection in stale:
                connections.remove(connection)
                connection.abort()
        if any(self._idle.values()):
            self._sweep = asyncio.get_running_loop().call_later(KEEPALIVE_SECONDS, self._swept)

    async def _addresses(self, host: str, port: int) -> list[AddrInfoType]:
        loop = asyncio.get_running_loop()
        cached = self._dns.get((host, port))
        if cached is not None and cached[0] > loop.time():
            return cached[1]
        # the resolver runs off the loop (asyncio's executor, or libuv's pool under uvloop)
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        self._dns.keep((host, port), (loop.time() + DNS_TTL_SECONDS, infos))
        return infos

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()  # verifies the chain and the host name
        return self._ssl

    async def _connect(self, target: _Target, within: float) -> Connection:
        loop = asyncio.get_running_loop()
        where = f"{target.host}:{target.port}"
        try:
            async with asyncio.timeout(within):
                addresses = await self._addresses(target.host, target.port)
                # Happy Eyeballs (RFC 8305) as aiohttp does: an address that does not answer
                # (an IPv6 route that drops packets) costs 0.25 s, not the whole connect timeout
                sock = await start_connection(addresses, happy_eyeballs_delay=0.25)
                connection = Connection(self, target.key, self._high)
                try:
                    await loop.create_connection(
                        lambda: connection,
                        sock=sock,
                        ssl=self._context() if target.tls else None,
                        server_hostname=target.host if target.tls else None,
                    )
                except BaseException:
                    sock.close()
                    raise
                return connection
        except TimeoutError:
            raise ConnectionTimeoutError(f"Connection timeout to {where}") from None
        except OSError as exc:  # the name did not resolve, no address answered, TLS refused
            raise ConnectError(f"Cannot connect to {where} [{describe(exc)}]") from None


class Response:
    """One call and its answer: `start` sends it and waits for the headers, `take` hands the body
    over, `release` ends it (back to the pool if read to the end, else the connection is closed).
    `fail` ends it from outside (a timer) whatever it is waiting for."""

    __slots__ = (
        "_client", "_target", "_data", "_connection", "_error", "_done", "sent", "status", "raw_headers",
    )  # fmt: skip

    def __init__(self, client: HttpClient, target: _Target, data: bytes | tuple[bytes, bytes]) -> None:
        self._client = client
        self._target = target
        self._data = data
        self._connection: Connection | None = None
        self._error: BaseException | None = None
        self._done = False
        # the loop's time when the request was written (0.0 before)
        self.sent = 0.0
        # the answer's status and headers (kept here: the connection moves on to other calls)
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []

    async def start(self, connect_timeout: float, loop: asyncio.AbstractEventLoop) -> None:
        """Send the call and wait for the answer's headers (`loop`: the running loop, which the
        caller has: Python 3.11 asks the kernel for the pid at each `get_running_loop`)."""
        client = self._client
        if client._closed:
            raise HttpError("the upstream client is closed")
        now = loop.time()
        connection = client._take(self._target.key, now)
        if connection is None:
            connection = await client._connect(self._target, connect_timeout)
            if self._error is not None or self._done:  # failed or ended while connecting
                connection.abort()
                raise self._error or HttpError("the call was ended")
            now = loop.time()
        self._connection = connection
        self.sent = now
        data, self._data = self._data, b""
        await connection.exchange(data, loop)
        self.status = connection.status
        self.raw_headers = connection.raw_headers

    def take(self, n: int) -> bytes | asyncio.Future[None] | Later:
        """At most `n` bytes of the body already in, b"" at its end, or a future to await before
        taking again, LATER when pushed (`Connection.take`)."""
        connection = self._connection
        assert connection is not None
        return connection.take(n)

    def taker(self) -> Callable[[int], bytes | asyncio.Future[None] | Later]:
        """`take` itself, once started: the connection's, without this frame in between (a
        stream takes twice per chunk: what came, then nothing more)."""
        connection = self._connection
        assert connection is not None
        return connection.take

    def on_arrival(self, sink: Callable[[], object] | None) -> None:
        """`sink` hears of each arrival in place of `take`'s futures (`Connection.on_arrival`)."""
        connection = self._connection
        assert connection is not None
        connection.on_arrival(sink)

    @property
    def drained(self) -> bool:
        """The body is in whole and read (False once released: the connection serves others)."""
        connection = self._connection
        return not self._done and connection is not None and connection.drained

    def fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if self._connection is not None:
            self._connection.fail(error)

    def release(self) -> None:
        """Safe to call more than once."""
        if self._done:
            return
        self._done = True
        connection = self._connection
        if connection is not None:
            connection.finish()
