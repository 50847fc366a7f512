"""The only module that talks HTTP to providers.

It sends an encoded request and hands back the raw status, headers and body chunks; it knows
nothing about any provider's format. Failures become UpstreamError values, never exceptions that
could carry a provider key into a log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp.client_exceptions import SocketTimeoutError

from gateway import __version__
from gateway.headers import upstream_headers
from gateway.providers.base import HttpRequest
from gateway.transcript.events import ErrorCategory, UpstreamError

MAX_ERROR_BODY = 256 * 1024
MAX_RESPONSE_BODY = 64 * 1024 * 1024
# the most one streamed chunk hands over: what is decoded and relayed in one go, and so what one
# write to a client that stopped reading adds to its buffer (aiohttp's readany would hand over
# everything its reader holds, a few hundred KiB)
MAX_STREAM_CHUNK = 32 * 1024
# the client session's read_bufsize: a response's reader stops reading its socket past twice this
# (aiohttp's default, 64 KiB, let a stalled stream hold 128 KiB plus one 256 KiB socket read)
UPSTREAM_READ_BUFFER = 16 * 1024
USER_AGENT = f"llm-transcript-gateway/{__version__}"


def client_session() -> aiohttp.ClientSession:
    """The one client session provider calls go through. Upstream URLs come only from config: no
    proxies or netrc from the environment, no cookies kept. The headers a call carries are checked
    against the allow-list where they are sent (`Upstream`, gateway/headers.py): the session adds
    only its User-Agent and aiohttp's framing headers, all on the list."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True),
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
        # what an answer's reader holds before it stops reading the socket (twice this): a stream
        # whose client stopped reading keeps that much, then TCP throttles the provider
        read_bufsize=UPSTREAM_READ_BUFFER,
    )


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. `connect`: to open the connection. `first_token`: from sending the request to the
    first content of a streamed answer (the routing engine enforces it, since only the decoded
    stream knows what content is). `idle`: the longest gap between two chunks of a streamed
    answer, including the wait for the response headers. `total`: the whole response."""

    connect: float = 10.0
    first_token: float = 60.0
    idle: float = 120.0
    total: float = 600.0

    # aiohttp's timeouts for a whole and a streamed answer, built with the Timeouts (the engine
    # keeps one per provider and group override): nothing to build or look up per request
    _whole: aiohttp.ClientTimeout = field(init=False, repr=False, compare=False)
    _streamed: aiohttp.ClientTimeout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # a non-streamed answer arrives in one piece after the whole generation: no idle gap
        # applies to it, only `total`
        whole = aiohttp.ClientTimeout(total=self.total, sock_connect=self.connect)
        streamed = aiohttp.ClientTimeout(total=self.total, sock_connect=self.connect, sock_read=self.idle)
        object.__setattr__(self, "_whole", whole)
        object.__setattr__(self, "_streamed", streamed)

    def client(self, stream: bool) -> aiohttp.ClientTimeout:
        """aiohttp's timeouts for one response."""
        return self._streamed if stream else self._whole


class UpstreamFailure(Exception):
    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error


def _describe(exc: BaseException) -> str:
    # aiohttp's messages name host:port, never the headers that hold the key
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def connection_error(exc: BaseException) -> UpstreamError:
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return UpstreamError(ErrorCategory.TIMEOUT, f"upstream timed out ({_describe(exc)})")
    return UpstreamError(ErrorCategory.CONNECTION, f"upstream connection failed ({_describe(exc)})")


def _too_large(limit: int) -> UpstreamFailure:
    return UpstreamFailure(UpstreamError(ErrorCategory.PROTOCOL, f"upstream body larger than {limit} bytes"))


class Upstream:
    """One response from a provider. Use as an async context manager; leaving it releases (or, if
    the body was not read to the end, closes) the connection, which cancels the provider's work."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        request: HttpRequest,
        timeouts: Timeouts,
        *,
        stream: bool = True,
    ) -> None:
        self._session = session
        self._request = request
        self._timeouts = timeouts
        self._stream = stream
        self._response: aiohttp.ClientResponse | None = None
        self._deadline: asyncio.TimerHandle | None = None
        # the idle watchdog of `next_chunk` (see there)
        self._idle: asyncio.Handle | None = None
        self._waiting = False
        self._overdue = False
        self._last = 0.0
        # set at the first `next_chunk`: the loop's clock, and the watchdog in place of aiohttp's timer
        self._clock: Callable[[], float] | None = None

    async def __aenter__(self) -> Upstream:
        t = self._timeouts
        stream = self._stream
        timeout = t.client(stream)
        if stream:
            loop = asyncio.get_running_loop()
            ends = loop.time() + t.total
        try:
            self._response = await self._session.post(
                self._request.url,
                data=self._request.body,
                headers=upstream_headers(self._request.headers),
                timeout=timeout,
                allow_redirects=False,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise UpstreamFailure(connection_error(exc)) from None
        # aiohttp's timeouts act only while a read of the response is waiting: a caller blocked on
        # a slow client would hold the connection past `total`. This timer ends it regardless. A
        # whole answer is read at once, within aiohttp's `total`: no caller holds it in between.
        if stream:
            self._deadline = loop.call_at(ends, self._expire)
        return self

    def _expire(self) -> None:
        response = self._response
        if response is not None and not response.closed:
            response.content.set_exception(
                TimeoutError(f"no complete answer within {self._timeouts.total:g}s")
            )
            response.close()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """What leaving the context does (safe to call more than once): nothing in it waits."""
        if self._deadline is not None:
            self._deadline.cancel()
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        response = self._response
        if response is not None:
            if response.content.at_eof():
                response.release()
            else:
                response.close()  # abandon: closes the socket, the provider stops generating

    @property
    def status(self) -> int:
        assert self._response is not None
        return self._response.status

    @property
    def headers(self) -> aiohttp.typedefs.CIMultiDictProxy[str]:
        assert self._response is not None
        return self._response.headers

    async def read(self, limit: int = MAX_RESPONSE_BODY, truncate: bool = False) -> bytes:
        """The whole body, at most `limit` bytes. Past the limit: an error, or with `truncate` the
        first `limit` bytes (an error body is classified by its beginning; the rest is dropped with
        the connection)."""
        response = self._response
        assert response is not None
        content = response.content
        try:
            if content.is_eof() and not content.exception():
                # the whole body came in with the headers (a small answer): take it as it is
                body = content.read_nowait()
                if len(body) > limit:
                    if not truncate:
                        raise _too_large(limit)
                    body = body[:limit]
                return body
            chunks = []
            size = 0
            async for chunk in content.iter_any():
                size += len(chunk)
                if size > limit:
                    if truncate:
                        chunks.append(chunk[: len(chunk) - (size - limit)])
                        break
                    raise _too_large(limit)
                chunks.append(chunk)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise UpstreamFailure(connection_error(exc)) from None
        return b"".join(chunks)

    async def next_chunk(self) -> bytes:
        """The next body chunk as it arrives, at most MAX_STREAM_CHUNK bytes; b"" at the end. A
        broken or stalled connection raises UpstreamFailure. Not pulled, the body stays in
        aiohttp's bounded reader and then in the socket: TCP throttles the provider. A plain
        coroutine rather than an async generator: the relay awaits it once per chunk, and each
        await layer is paid again at every wake-up.

        The `idle` limit between chunks is a lazy watchdog here rather than aiohttp's `sock_read`,
        which cancels and schedules a timer per chunk: one timer per `idle` period checks the time
        of the last chunk. When it expires while the stream waits for the upstream it fails the
        read exactly as aiohttp's does (same exception and text, so the same error, metric and
        client event)."""
        response = self._response
        assert response is not None
        clock = self._clock
        if clock is None:
            loop = asyncio.get_running_loop()
            clock = self._clock = loop.time
            self._watch_idle(loop)
        if self._overdue:  # it expired while the caller was busy: checked once we wait
            self._overdue = False
            self._idle = asyncio.get_running_loop().call_soon(self._check_idle)
        self._waiting = True
        try:
            chunk = await response.content.read(MAX_STREAM_CHUNK)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise UpstreamFailure(connection_error(exc)) from None
        finally:
            self._waiting = False
        if chunk:
            self._last = clock()
        return chunk

    def _watch_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the idle limit from aiohttp's per-chunk timer to the watchdog (the wait for the
        headers, and an error body read whole, keep aiohttp's)."""
        response = self._response
        assert response is not None
        connection = response.connection
        protocol = connection.protocol if connection is not None else None
        if protocol is None or not protocol.read_timeout:
            return
        protocol.read_timeout = None  # this response's only: aiohttp sets it per request
        self._last = loop.time()
        self._idle = loop.call_at(self._last + self._timeouts.idle, self._check_idle)

    def _check_idle(self) -> None:
        response = self._response
        if response is None or response.closed:
            self._idle = None
            return
        loop = asyncio.get_running_loop()
        due = self._last + self._timeouts.idle
        if loop.time() < due:
            self._idle = loop.call_at(due, self._check_idle)
        elif self._waiting:
            self._idle = None
            # what aiohttp's ResponseHandler._on_read_timeout does
            error = SocketTimeoutError("Timeout on reading data from socket")
            connection = response.connection
            if connection is not None and connection.protocol is not None:
                connection.protocol.set_exception(error)
            response.content.set_exception(error)
        else:
            self._idle = None
            self._overdue = True
