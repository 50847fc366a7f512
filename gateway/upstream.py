"""The only module that talks HTTP to providers (through `upstream_http.py`'s client, its alone).

It sends an encoded request and hands back the raw status, headers and body chunks; it knows
nothing about any provider's format. Failures become UpstreamError values, never exceptions that
could carry a provider key into a log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from multidict import CIMultiDict, CIMultiDictProxy

from gateway import __version__
from gateway.headers import upstream_headers
from gateway.providers.base import HttpRequest
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.upstream_connection import Later
from gateway.upstream_http import FAILURES, HttpClient, Response, read_timeout

MAX_ERROR_BODY = 256 * 1024
MAX_RESPONSE_BODY = 64 * 1024 * 1024
# the most one streamed chunk hands over: what is decoded and relayed in one go, and so what one
# write to a client that stopped reading adds to its buffer
MAX_STREAM_CHUNK = 32 * 1024
# an answer's reader stops reading its socket past twice this held (a stream whose client stopped
# reading keeps that much, then TCP throttles the provider)
UPSTREAM_READ_BUFFER = 16 * 1024
USER_AGENT = f"llm-transcript-gateway/{__version__}"


def client_session() -> HttpClient:
    """The one client provider calls go through (gateway/upstream_http.py). Upstream URLs come only
    from config: no proxies or netrc from the environment, no cookies kept. The headers a call
    carries are checked against the allow-list where they are sent (`Upstream`,
    gateway/headers.py): the client adds only its User-Agent and framing headers, all on the list."""
    return HttpClient(user_agent=USER_AGENT, read_buffer=UPSTREAM_READ_BUFFER)


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


class UpstreamFailure(Exception):
    def __init__(self, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.error = error


def _describe(exc: BaseException) -> str:
    # the client's messages name host:port, never the headers that hold the key
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def connection_error(exc: BaseException) -> UpstreamError:
    if isinstance(exc, TimeoutError):
        return UpstreamError(ErrorCategory.TIMEOUT, f"upstream timed out ({_describe(exc)})")
    return UpstreamError(ErrorCategory.CONNECTION, f"upstream connection failed ({_describe(exc)})")


def _too_large(limit: int) -> UpstreamFailure:
    return UpstreamFailure(UpstreamError(ErrorCategory.PROTOCOL, f"upstream body larger than {limit} bytes"))


class Upstream:
    """One response from a provider. Use as an async context manager; leaving it releases (or, if
    the body was not read to the end, closes) the connection, which cancels the provider's work."""

    __slots__ = (
        "_session", "_request", "_timeouts", "_stream", "_response", "_headers", "_timed",
        "_watched", "_waiting", "_pushed", "_overdue", "_heading", "_last", "_clock", "_take",
        "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        session: HttpClient,
        request: HttpRequest,
        timeouts: Timeouts,
        *,
        stream: bool = True,
    ) -> None:
        self._session = session
        self._request = request
        self._timeouts = timeouts
        self._stream = stream
        self._response: Response | None = None
        self._headers: CIMultiDictProxy[str] | None = None
        self._timed = False  # its `total` deadline is in the client's book (`expire`)
        # the idle watchdog of `take` (see there)
        self._watched = False  # in the client's book of idle watchdogs (`check_idle`)
        self._waiting = False
        # a sink hears of the arrivals (`on_arrival`): between two, the stream waits for the
        # upstream, whatever the last take found (its reader takes once per arrival)
        self._pushed = False
        self._overdue = False
        self._heading = False  # a stream waiting for its headers (the watchdog bounds that too)
        self._last = 0.0
        # set when the watchdog is armed (a stream's `__aenter__`, else the first `take`)
        self._clock: Callable[[], float] | None = None
        # the response's `take` (its connection's), kept at the first `take`
        self._take: Callable[[int], bytes | asyncio.Future[None] | Later] | None = None

    async def __aenter__(self) -> Upstream:
        t = self._timeouts
        loop = asyncio.get_running_loop()
        request = self._request
        try:
            response = self._session.request(request.url, upstream_headers(request.headers), request.body)
        except ValueError as exc:  # a header with a line break (named without its value)...
            raise UpstreamFailure(UpstreamError(ErrorCategory.PROTOCOL, str(exc))) from None
        self._response = response
        # `total` bounds the whole call, whatever it waits for: the connection, the headers, a
        # body read, or a caller blocked on a slow client while holding the connection (one
        # timer for every call of the client: gateway/deadlines.py)
        now = loop.time()
        self._session.deadlines.add(self, now + t.total, loop)
        self._timed = True
        if self._stream:
            # `idle` bounds the wait for the headers (from the request's write) and every gap
            # after them: one lazy watchdog for both, armed once here (`check_idle`), not a
            # header timer and then the watchdog. A whole answer arrives in one piece after the
            # whole generation: no idle gap applies to it (nor to its headers), only `total`
            self._clock = loop.time
            self._last = now
            self._heading = self._waiting = True
            self._watch(now + t.idle, loop)
        try:
            await response.start(min(t.connect, t.total), loop)
        except FAILURES as exc:
            self.close()
            raise UpstreamFailure(connection_error(exc)) from None
        except BaseException:
            self.close()
            raise
        if self._stream:
            # the headers are in: the next gap runs from now (an error answer's body read by
            # `read` waits for nothing the watchdog bounds: as overdue, it fails nothing)
            self._heading = self._waiting = False
            self._last = loop.time()
        return self

    def expire(self) -> None:
        """The `total` deadline passed (the client's book calls it): the call fails, whatever it
        waits for."""
        self._timed = False
        response = self._response
        if response is not None:
            response.fail(TimeoutError(f"no complete answer within {self._timeouts.total:g}s"))

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """What leaving the context does (safe to call more than once): nothing in it waits. An
        answer read to the end frees its connection for the next call; any other is closed
        (abandoned: the provider stops generating)."""
        if self._timed:
            self._timed = False
            self._session.deadlines.remove(self)
        if self._watched:
            self._watched = False
            self._session.idles.remove(self)
        if self._response is not None:
            self._response.release()

    def drained(self) -> bool:
        """Whether the body is in whole and read: `take` would end it without a wait."""
        return self._response is not None and self._response.drained

    @property
    def status(self) -> int:
        assert self._response is not None
        return self._response.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        """Case-insensitive, as aiohttp gave them (built on demand: only error answers read them)."""
        headers = self._headers
        if headers is None:
            assert self._response is not None
            decoded = CIMultiDict(
                (n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
                for n, v in self._response.raw_headers
            )
            headers = self._headers = CIMultiDictProxy(decoded)
        return headers

    async def read(self, limit: int = MAX_RESPONSE_BODY, truncate: bool = False) -> bytes:
        """The whole body, at most `limit` bytes. Past the limit: an error, or with `truncate` the
        first `limit` bytes (an error body is classified by its beginning; the rest is dropped with
        the connection)."""
        response = self._response
        assert response is not None
        chunks = []
        size = 0
        try:
            # one byte past the limit tells a body over it from one that fills it exactly. What
            # is in is taken at once (a whole answer is usually in whole with its headers): a
            # wait only while nothing is
            while True:
                chunk = response.take(limit + 1 - size)
                if type(chunk) is not bytes:
                    await chunk  # type: ignore[misc]  # a future: no sink hears this answer
                    continue
                if not chunk:
                    break
                size += len(chunk)
                chunks.append(chunk)
                if size > limit:
                    if not truncate:
                        raise _too_large(limit)
                    chunks[-1] = chunk[: len(chunk) - (size - limit)]
                    break
        except FAILURES as exc:
            raise UpstreamFailure(connection_error(exc)) from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def take(self) -> bytes | asyncio.Future[None] | Later:
        """The body bytes already in (at most MAX_STREAM_CHUNK: every piece held, in one go);
        b"" at the end; or, with nothing in yet, a future to await before taking again (LATER
        instead while a sink hears of the arrivals: `on_arrival`). Not a
        coroutine: a relay takes, handles every event of what it took, and awaits only the
        connection's own future, one wake-up per arrival with no frame of ours to resume. A
        broken connection raises UpstreamFailure. Not taken, the body stays in the client's
        bounded buffer and then in the socket: TCP throttles the provider.

        The `idle` limit between chunks is a lazy watchdog rather than a timer per chunk: one timer
        per `idle` period checks the time of the last chunk. When it expires while the stream
        waits for the upstream (a future handed out and not yet followed by a take, or a sink
        set: `on_arrival`) it fails the read with the error a stall gives (the same text, metric
        and client event as the wait for the headers)."""
        response = self._response
        assert response is not None
        clock = self._clock
        if clock is None:
            loop = asyncio.get_running_loop()
            clock = self._clock = loop.time
            self._last = loop.time()
            self._watch(self._last + self._timeouts.idle, loop)
        take = self._take
        if take is None:
            take = self._take = response.taker()
        try:
            chunk = take(MAX_STREAM_CHUNK)
        except FAILURES as exc:
            self._waiting = False
            raise UpstreamFailure(connection_error(exc)) from None
        if type(chunk) is bytes:
            self._waiting = False
            if chunk:
                self._last = clock()
            return chunk
        if self._overdue:  # it expired while the caller was busy: checked now that it waits
            self._overdue = False
            loop = asyncio.get_running_loop()
            self._watch(loop.time(), loop)
        self._waiting = True
        return chunk

    def on_arrival(self, sink: Callable[[], object] | None) -> None:
        """Have `sink` called at each arrival (bytes, the end, a failure) instead of awaiting the
        future `take` hands out; None: back to futures (`Connection.on_arrival`: a sink that
        returns a true value is called again while anything is left to take). The idle
        watchdog holds alike: while a sink is set the stream waits for the upstream (its reader
        sets None before it waits for anything else, a slow client)."""
        response = self._response
        assert response is not None
        self._pushed = sink is not None
        response.on_arrival(sink)

    def _watch(self, when: float, loop: asyncio.AbstractEventLoop) -> None:
        """The idle watchdog checks again at `when` (`check_idle`; one timer for the client's
        streams: gateway/deadlines.py)."""
        self._session.idles.add(self, when, loop)
        self._watched = True

    def check_idle(self) -> None:
        """The idle watchdog's check (the client's book calls it when it is due): a stream
        waiting for the upstream past `idle` fails, one that is not is checked again later."""
        self._watched = False
        response = self._response
        if response is None:
            return
        loop = asyncio.get_running_loop()
        if self._heading:
            if not response.sent:  # still connecting (`connect` bounds that): not yet waiting
                self._watch(loop.time() + self._timeouts.idle, loop)
                return
            due = response.sent + self._timeouts.idle
        else:
            due = self._last + self._timeouts.idle
        if loop.time() < due:
            self._watch(due, loop)
        elif self._waiting or self._pushed:
            response.fail(read_timeout())
        else:
            self._overdue = True
