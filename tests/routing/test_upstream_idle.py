"""The idle limit between two chunks of a streamed answer: a watchdog in `Upstream.take` in place
of aiohttp's per-chunk `sock_read` timer, failing a stalled stream with the very error aiohttp's
timer gives (so the same message, metric and client event follow), whether the relay awaits the
upstream's futures or is pushed by its arrivals."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from gateway.providers.base import HttpRequest
from gateway.transcript.events import UpstreamError
from gateway.upstream import Timeouts, Upstream, UpstreamFailure, client_session, connection_error
from tests.routing.upstream_reads import MODES, next_chunk

IDLE = 0.2


async def _served(plan: list[float]):
    """A server whose streamed body is one chunk after each of `plan`'s pauses, then a stall."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for pause in plan:
            await asyncio.sleep(pause)
            await response.write(b"data: {}\n\n")
        await asyncio.sleep(IDLE * 10)  # the stall (the test's client gives up long before)
        return response

    app = web.Application()
    app.router.add_post("/", handler)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - the ephemeral port taken
    return runner, f"http://127.0.0.1:{port}/"


async def _read(url: str, mode: str, busy: float = 0.0) -> tuple[int, UpstreamError | None]:
    timeouts = Timeouts(connect=5, idle=IDLE, total=30)
    async with client_session() as session:
        request = HttpRequest(url=url, headers={}, body=b"{}")
        async with Upstream(session, request, timeouts) as upstream:
            seen = 0
            try:
                while await next_chunk(upstream, pushed=mode == "pushed"):
                    seen += 1
                    if busy:
                        await asyncio.sleep(busy)  # a slow client: the relay is not reading
            except UpstreamFailure as failure:
                return seen, failure.error
    return seen, None


async def _aiohttp_own_error(url: str) -> str:
    """What aiohttp's own `sock_read` timer fails the same stall with."""
    timeout = aiohttp.ClientTimeout(total=30, sock_read=IDLE)
    async with aiohttp.ClientSession() as session, session.post(url, data=b"{}", timeout=timeout) as r:
        try:
            while await r.content.readany():
                pass
        except (TimeoutError, aiohttp.ClientError) as exc:
            return connection_error(exc).message
    raise AssertionError("aiohttp did not time the stall out")


@pytest.mark.parametrize("mode", MODES)
async def test_a_stall_after_chunks_fails_as_aiohttps_timer_does(mode):
    runner, url = await _served([0.0, 0.05, 0.05])
    try:
        seen, error = await _read(url, mode)
        expected = await _aiohttp_own_error(url)
    finally:
        await runner.cleanup()
    assert seen == 3
    assert error is not None and error.message == expected
    assert expected == "upstream timed out (SocketTimeoutError: Timeout on reading data from socket)"


@pytest.mark.parametrize("mode", MODES)
async def test_chunks_closer_than_the_limit_never_time_out(mode):
    # 1 s of chunks 0.1 s apart against a 0.2 s limit: each chunk restarts the wait
    runner, url = await _served([0.1] * 10)
    try:
        seen, error = await _read(url, mode)
    finally:
        await runner.cleanup()
    assert seen == 10 and error is not None and error.category.value == "timeout"


@pytest.mark.parametrize("mode", MODES)
async def test_a_busy_reader_is_not_timed_out_for_its_own_delay_but_still_for_the_stall(mode):
    # the upstream sends everything at once; the reader takes longer than the limit per chunk
    # (the watchdog expires while it is busy), then the upstream stalls
    runner, url = await _served([0.0, 0.0])
    try:
        seen, error = await _read(url, mode, busy=IDLE * 2)
    finally:
        await runner.cleanup()
    assert seen == 2
    assert error is not None
    assert error.message == "upstream timed out (SocketTimeoutError: Timeout on reading data from socket)"
