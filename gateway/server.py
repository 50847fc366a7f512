"""The HTTP server under the app: aiohttp's, with the limits a gateway facing untrusted clients
needs (DESIGN.md's edges; README "Security defaults" lists each limit and what a client sees).

- Request head: a connection must deliver a complete request head within `header_timeout`
  of opening or of its previous response, else it is closed. This is aiohttp's keep-alive
  timeout, which also runs while a head is half received (it is only reset by a response), so one
  knob bounds slowloris heads and idle keep-alive connections alike.
- Client writes: aiohttp waits without limit for a client that stops reading. Here a connection
  whose writes stay blocked (the transport paused writing: the kernel buffer and aiohttp's are
  full) for `write_timeout` is aborted, which cancels its handler and with it the upstream call.
- Connection cap: past `max_connections` open connections a new one is still accepted (refusing
  at accept would leave it in the listen backlog, retried by the kernel), but its request is
  answered 503 in its dialect's envelope and the connection closed; one that sends no request
  head within `REFUSAL_WAIT` is closed silently, and past twice the cap a new connection is closed
  at once. The cap is lowered to fit the process's open-file limit (each client connection may
  hold an upstream connection too), so `accept()` does not run out of descriptors.
- Requests aiohttp cannot parse (duplicate Content-Length, oversized head, unsupported
  Content-Encoding) are answered in the error envelope through `http_errors.error_response`,
  counted, and logged at debug: they are client noise, not errors of the gateway.
- `accept()` failures (EMFILE...) are logged at most once per `ACCEPT_LOG_INTERVAL`, with the
  number suppressed: asyncio logs one traceback per failed call, thousands per second.
"""

from __future__ import annotations

import asyncio
import logging
import re
import resource
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, ContentEncodingError, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from gateway.exchange import REQUEST_ID_HEADER
from gateway.http_errors import error_response
from gateway.ingress.errors import ClientError
from gateway.security import SERVER_HEADER
from gateway.state import GatewayState

log = logging.getLogger("gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REFUSAL_WAIT = 2.0  # seconds an over-capacity connection has to send the request it is refused
RESERVED_FILES = 64  # descriptors kept for the listening sockets, the store, logs, the runtime
# asyncio accepts up to this many connections in one go before any of them is seen (and closed
# if over the cap): the listen backlog TCPSite asks for
ACCEPT_BURST = 128
ACCEPT_LOG_INTERVAL = 10.0
_REQUEST_LINE = re.compile(rb"[A-Z]{3,7} (/[^ ?\r\n]{0,2048})")
_ACCEPT_FAILURE = "socket.accept() out of system resource"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 1024
    header_timeout: float = 30.0
    write_timeout: float = 60.0


def open_file_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (as Go's runtime does at start): a soft
    limit of 1024 is a distribution default, not a decision. Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft
    return hard


def connection_cap(configured: int, file_limit: int) -> int:
    """`configured`, lowered so that the open-file limit holds every client connection with an
    upstream connection each (or, past the cap, a connection being refused), plus one burst of
    accepts."""
    return max(1, min(configured, (file_limit - RESERVED_FILES - ACCEPT_BURST) // 2))


class GatewayRequestHandler(RequestHandler):
    """aiohttp's HTTP/1.1 protocol with the write stall timeout, the connection cap and
    enveloped parse errors (see the module docstring)."""

    __slots__ = ("_server", "_stall_timer", "_refusal_timer", "_counted", "over_capacity", "_head_path")

    def __init__(self, manager: GatewayServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._server = manager
        self._stall_timer: asyncio.TimerHandle | None = None
        self._refusal_timer: asyncio.TimerHandle | None = None
        self._counted = False
        self.over_capacity = False
        self._head_path = "/"  # of the latest request line seen, for a head that does not parse

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        server = self._server
        server.open_connections += 1
        self._counted = True
        if server.open_connections > server.cap:
            if server.open_connections > 2 * server.cap:
                # the descriptors kept for refusals are gone too: not even a 503
                self.force_close()
                return
            self.over_capacity = True
            self._refusal_timer = self._loop.call_later(REFUSAL_WAIT, self.force_close)

    def data_received(self, data: bytes) -> None:
        # a head refused while parsing (431: a header too long) is answered in the envelope of its
        # path's dialect: aiohttp hands over "/" for it, so the request line is read here (only
        # when a chunk starts with one: the path chooses an envelope, nothing else)
        match = _REQUEST_LINE.match(data)
        if match is not None:
            self._head_path = match.group(1).decode("latin-1")
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._counted:
            self._counted = False
            self._server.open_connections -= 1
        for timer in (self._stall_timer, self._refusal_timer):
            if timer is not None:
                timer.cancel()
        self._stall_timer = self._refusal_timer = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self._loop.call_later(self._server.limits.write_timeout, self._write_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _write_stalled(self) -> None:
        self._stall_timer = None
        transport = self.transport
        if transport is not None:
            log.info(
                "closing a connection from %s: it read nothing of its answer for %gs",
                transport.get_extra_info("peername"),
                self._server.limits.write_timeout,
            )
            transport.abort()  # wakes the blocked write with ConnectionResetError

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse (or, never expected, an error that escaped the app's
        edge): the error envelope instead of aiohttp's plain text."""
        started = time.monotonic()
        if isinstance(exc, HttpProcessingError):
            self.logger.debug("unparsable request from %s: %s", request.remote, exc)
            error = parse_error(exc)
        else:
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
            error = ClientError(status, "internal gateway error", type="server_error")
        if request.writer.output_size > 0:  # as aiohttp: an answer was already under way
            raise ConnectionError("response already started, cannot send an error response")
        # the head did not parse: aiohttp hands over "/", the request line read as it arrived says more
        path = self._head_path if request.path == "/" else request.path
        response = error_response(path, error)
        response.headers["Server"] = SERVER_HEADER
        request_id = response.headers[REQUEST_ID_HEADER] = uuid.uuid4().hex
        response.force_close()
        state: GatewayState | None = self._server.app.get(GatewayState.KEY)
        if state is not None:
            if type(response.body) is bytes:
                response.body = state.redactor.data(response.body)
            state.observe_refusal(path, error, started, request_id)
        return response


def parse_error(exc: HttpProcessingError) -> ClientError:
    """The client's view of a request aiohttp refused while parsing it. Fixed wording: aiohttp's
    messages quote the offending bytes (up to 8 KB of the client's headers)."""
    if isinstance(exc, ContentEncodingError):
        return ClientError(
            415,
            "unsupported Content-Encoding: send the body uncompressed, or with gzip or deflate",
            code="unsupported_content_encoding",
        )
    if isinstance(exc, LineTooLong):
        return ClientError(431, "request line or a header field is too long", code="header_too_large")
    if isinstance(exc, BadHttpMethod):
        return ClientError(400, "malformed HTTP request line", code="malformed_request")
    reason = exc.message.strip().split("\n", 1)[0].rstrip(":")[:80] if exc.message else "malformed request"
    return ClientError(400, f"malformed HTTP request: {reason}", code="malformed_request")


class GatewayServer(web.Server):
    """aiohttp's server, making `GatewayRequestHandler` connections and counting them."""

    def __init__(self, plain: web.Server, limits: ConnectionLimits, cap: int, app: web.Application) -> None:
        # the same handler, request factory and protocol options aiohttp's AppRunner set up
        super().__init__(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=plain._loop,
            **plain._kwargs,
        )
        self.limits = limits
        self.cap = cap
        self.app = app
        self.open_connections = 0

    def __call__(self) -> GatewayRequestHandler:
        return GatewayRequestHandler(self, loop=self._loop, **self._kwargs)


def refuse_over_capacity(request: web.BaseRequest) -> None:
    """The refusal of a request on a connection past the cap (see `GatewayRequestHandler`),
    raised before its handler by the edge (gateway/app.py)."""
    if getattr(request.protocol, "over_capacity", False):
        raise ClientError(
            503,
            "the gateway has too many open connections; retry shortly",
            type="server_error",
            code="over_capacity",
            headers={"Retry-After": "1"},
        )


class AcceptErrorLog:
    """A loop exception handler that lets one `accept()` failure through per interval and
    counts the rest; every other exception goes to the handler that was installed before."""

    def __init__(self, interval: float = ACCEPT_LOG_INTERVAL) -> None:
        self.interval = interval
        self.suppressed = 0
        self._last = -interval
        self._previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._previous = loop.get_exception_handler()
        loop.set_exception_handler(self)

    def uninstall(self) -> None:
        if self._loop is not None and self._loop.get_exception_handler() is self:
            self._loop.set_exception_handler(self._previous)
        self._loop = None

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILURE:
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = loop.time()
        if now - self._last < self.interval:
            self.suppressed += 1
            return
        self._last = now
        more = f" ({self.suppressed} more since the last report)" if self.suppressed else ""
        self.suppressed = 0
        log.error(
            "accept() failed: %s%s; new connections wait in the backlog (lower [server] max_connections"
            " or raise the open-file limit)",
            context.get("exception"),
            more,
        )


class GatewayRunner(web.AppRunner):
    """The AppRunner `gateway serve` and the security tests use: aiohttp's, with the limits
    above. `shutdown_timeout` is aiohttp's last resort after `InFlight.drain` has ended every
    request (see gateway/lifecycle.py)."""

    def __init__(self, app: web.Application, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(app, keepalive_timeout=limits.header_timeout, **kwargs)
        self.limits = limits
        self.cap = connection_cap(limits.max_connections, open_file_limit())
        self._accept_log = AcceptErrorLog()

    async def setup(self) -> None:
        if self.cap < self.limits.max_connections:
            log.warning(
                "serving at most %d connections, not %d: the open-file limit is %d",
                self.cap,
                self.limits.max_connections,
                open_file_limit(),
            )
        self._accept_log.install(asyncio.get_running_loop())
        await super().setup()

    async def cleanup(self) -> None:
        try:
            await super().cleanup()
        finally:
            self._accept_log.uninstall()

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # runs the app's startup
        return GatewayServer(plain, self.limits, self.cap, self.app)
