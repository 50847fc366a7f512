"""`Upstream.read`: the whole body within a limit, whether it came in with the headers (taken from
the reader at once) or arrives in pieces after them (read chunk by chunk): the same bytes, the same
error past the limit, the same first `limit` bytes when truncating."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.providers.base import HttpRequest
from gateway.transcript.events import ErrorCategory
from gateway.upstream import Timeouts, Upstream, UpstreamFailure, client_session

BODY = bytes(range(256)) * 40  # 10 KiB


async def at_once(request: web.Request) -> web.StreamResponse:
    return web.Response(body=BODY)


async def in_pieces(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    for at in range(0, len(BODY), 1024):
        await response.write(BODY[at : at + 1024])
        await asyncio.sleep(0.001)  # each piece after the headers, in its own read
    await response.write_eof()
    return response


Read = Callable[..., Awaitable[bytes]]


@pytest.fixture(params=["at_once", "in_pieces"])
async def read(request: pytest.FixtureRequest) -> AsyncIterator[Read]:
    app = web.Application()
    app.router.add_post("/", at_once if request.param == "at_once" else in_pieces)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    session = client_session()

    async def read(**kwargs: object) -> bytes:
        call = HttpRequest(str(server.make_url("/")), {"content-type": "application/json"}, b"{}")
        async with Upstream(session, call, Timeouts(), stream=False) as upstream:
            return await upstream.read(**kwargs)

    try:
        yield read
    finally:
        await session.close()
        await server.close()


async def test_the_whole_body_within_the_limit(read: Read) -> None:
    assert await read() == BODY
    assert await read(limit=len(BODY)) == BODY


async def test_past_the_limit_is_a_protocol_error(read: Read) -> None:
    with pytest.raises(UpstreamFailure) as failure:
        await read(limit=len(BODY) - 1)
    assert failure.value.error.category is ErrorCategory.PROTOCOL
    assert failure.value.error.message == f"upstream body larger than {len(BODY) - 1} bytes"


@pytest.mark.parametrize("limit", [1, 1000, 5000, len(BODY) - 1])
async def test_truncating_keeps_the_first_limit_bytes(read: Read, limit: int) -> None:
    assert await read(limit=limit, truncate=True) == BODY[:limit]
