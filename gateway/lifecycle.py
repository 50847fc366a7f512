"""Requests in flight, and how they end when the gateway stops.

Every request runs inside a cancel scope registered here. A dialect handler that has started a
stream registers it (`register_stream`) with its dialect's error event. On shutdown `drain` waits
up to the grace period for everything to finish; what is still running then is cancelled through
its scope (which also closes its upstream), and each open stream is ended with its dialect's
error event instead of a truncated body; a request whose answer had not started gets a 503 in its
dialect's envelope. Nothing waits past the grace period plus `END_BOUND`.

(aiohttp's own shutdown waits the grace period, then only fails the request's body stream and
waits the grace period again before cancelling the handler: twice the grace, and streams cut
without an ending.)
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from gateway.http_errors import error_response
from gateway.ingress.errors import ClientError
from gateway.transcript.events import ErrorCategory, UpstreamError

log = logging.getLogger("gateway")

ErrorEvent = Callable[[UpstreamError], bytes]

# after the grace period: how long cancelled requests get to unwind (close their upstream) and
# their streams to take their final event; then the connections are closed whatever state they
# are in
END_BOUND = 1.0
SHUTDOWN_MESSAGE = "the gateway is shutting down; retry the request"
SHUTDOWN_ERROR = UpstreamError(ErrorCategory.OVERLOADED, SHUTDOWN_MESSAGE, status=503, code="shutting_down")


# When the last request in flight ends and the youngest generation holds at least this many
# objects, it is collected then (gateway/serve.py's GC_THRESHOLDS[0] is 20,000): what requests
# left alive (the inspector ring's captures, caches) is walked while no one waits, instead of by
# a collection that a later request's allocations trigger in the middle of a burst of streams,
# where it held every stream's next chunk for a few ms. The same objects are walked either way.
IDLE_YOUNG = 10_000


def shutting_down() -> ClientError:
    return ClientError(
        503, SHUTDOWN_MESSAGE, type="server_error", code="shutting_down", headers={"Retry-After": "1"}
    )


@dataclass(slots=True)
class _Open:
    """A request's cancel scope: the shutdown cancels its task and marks it `ended`; the
    cancellation is the shutdown's when the task had no other one pending (as asyncio.timeout
    tells its own expiry from an outside cancel, without a Timeout object and its timer handle
    per request)."""

    task: asyncio.Task[object]
    cancelling: int  # the task's pending cancellations when the request began
    ended: bool = False
    response: web.StreamResponse | None = None
    error_event: ErrorEvent | None = None

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.task.cancel()

    def ended_it(self) -> bool:
        """A CancelledError in the request is the shutdown's (and is consumed here)."""
        return self.ended and self.task.uncancel() <= self.cancelling


class InFlight:
    """The requests being handled, each with its cancel scope and, once it streams, how to end
    its stream."""

    __slots__ = ("_open", "_idle", "_end_by", "_tidying")

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}  # by id(request): aiohttp requests are not hashable
        # set when the last request leaves; made by the first `drain` that waits (until then no
        # request pays for clearing and setting it)
        self._idle: asyncio.Event | None = None
        self._end_by = 0.0  # loop time: when ending the cancelled requests must be done
        self._tidying = False  # a young collection is due once the answers are written

    def __len__(self) -> int:
        return len(self._open)

    @property
    def ending(self) -> bool:
        """The grace period is over: what still runs is being cancelled."""
        return self._end_by > 0.0

    def register_stream(
        self, request: web.BaseRequest, response: web.StreamResponse, error_event: ErrorEvent
    ) -> None:
        """`response` is a started stream; `error_event(error)` renders the dialect's final error
        event (the stream ends right after it). The registration ends with the request."""
        entry = self._open.get(id(request))
        if entry is not None:
            entry.response, entry.error_event = response, error_event

    def enter(self, request: web.BaseRequest) -> _Open:
        """`request` is being handled (from the edge, gateway/app.py): its cancel scope
        is the current task. Every `enter` is paired with a `leave` when the request ends."""
        task = asyncio.current_task()
        assert task is not None
        entry = self._open[id(request)] = _Open(task, task.cancelling())
        if self._idle is not None:
            self._idle.clear()
        return entry

    def leave(self, request: web.BaseRequest) -> None:
        del self._open[id(request)]
        if not self._open:
            if self._idle is not None:
                self._idle.set()
            if not self._tidying and gc.get_count()[0] >= IDLE_YOUNG:
                # in the loop's next pass: the last answer is written by then
                self._tidying = True
                asyncio.get_running_loop().call_soon(self._collect_young)

    def _collect_young(self) -> None:
        """`IDLE_YOUNG`: skipped when a request came in meanwhile, or while the collector is
        paused (a large request's work in the worker thread: gateway/offload.py)."""
        self._tidying = False
        if not self._open and gc.isenabled():
            gc.collect(0)

    async def last_answer(self, request: web.BaseRequest, entry: _Open) -> web.StreamResponse:
        """The answer of a request the shutdown cancelled (`entry.ended_it()`): its stream's error
        event, or a 503 when its answer had not started."""
        if entry.response is not None and entry.error_event is not None:
            await _end_stream(entry.response, entry.error_event, self._end_by)
            return entry.response
        response = error_response(request.path, shutting_down())
        response.force_close()
        return response

    async def drain(self, grace: float) -> None:
        """Wait up to `grace` seconds for every request to finish, then end the rest (see the
        module docstring); returns within `grace + END_BOUND`."""
        loop = asyncio.get_running_loop()
        if await self._wait_idle(grace):
            return
        log.warning("shutdown grace period over: ending %d request(s) still in flight", len(self._open))
        self._end_by = loop.time() + END_BOUND
        for entry in list(self._open.values()):
            entry.end()
        if not await self._wait_idle(END_BOUND):
            log.warning(
                "%d request(s) did not end within %gs of the grace period", len(self._open), END_BOUND
            )

    async def _wait_idle(self, seconds: float) -> bool:
        if self._idle is None:
            self._idle = asyncio.Event()
        if not self._open:
            return True
        self._idle.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True


async def _end_stream(response: web.StreamResponse, error_event: ErrorEvent, end_by: float) -> None:
    """The stream's last words: its dialect's error event, then the end of the body. A client
    that does not take them by `end_by` (loop time) loses its connection instead."""
    try:
        async with asyncio.timeout_at(end_by):
            await response.write(error_event(SHUTDOWN_ERROR))
            await response.write_eof()
    except (TimeoutError, ConnectionError, RuntimeError):  # RuntimeError: it had already ended
        pass
