"""The guard's body read (gateway/security.py `_read`) against aiohttp's `request.read()`, which it
replaces to join the pieces once: the same bytes for every way a body arrives (in one piece or
many, all in before the read or piece by piece while it waits), kept on the request for the
handler's own read, and refused past the limit as aiohttp refuses it (as a 413 ClientError)."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.errors import ClientError
from gateway.security import BodyLimits, read_body_within

PIECES = st.lists(st.binary(max_size=300), max_size=12)


def _request(pieces: list[bytes], limit: int, fed: bool) -> tuple[object, streams.StreamReader]:
    loop = asyncio.get_running_loop()
    payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2**16, loop=loop)
    if fed:
        for piece in pieces:
            payload.feed_data(piece)
        payload.feed_eof()
    request = make_mocked_request("POST", "/", payload=payload, client_max_size=limit)
    return request, payload


async def _arrive(payload: streams.StreamReader, pieces: list[bytes]) -> None:
    for piece in pieces:
        await asyncio.sleep(0)
        payload.feed_data(piece)
    await asyncio.sleep(0)
    payload.feed_eof()


async def _aiohttps(pieces: list[bytes], limit: int, fed: bool) -> bytes | None:
    request, payload = _request(pieces, limit, fed)
    arriving = None if fed else asyncio.ensure_future(_arrive(payload, pieces))
    try:
        return await request.read()
    except Exception:  # aiohttp's 413
        return None
    finally:
        if arriving is not None:
            await arriving


async def _guards(pieces: list[bytes], limit: int, fed: bool) -> bytes | None:
    request, payload = _request(pieces, limit, fed)
    arriving = None if fed else asyncio.ensure_future(_arrive(payload, pieces))
    try:
        body = await read_body_within(request, BodyLimits(limit))
    except ClientError as exc:
        assert exc.status == 413 and exc.code == "body_too_large"
        return None
    finally:
        if arriving is not None:
            await arriving
    assert await request.read() is body  # kept: the handler's read does not read again
    return body


@settings(max_examples=100, deadline=None)
@given(pieces=PIECES, limit=st.integers(1, 4000), fed=st.booleans())
def test_the_guards_read_is_aiohttps(pieces, limit, fed):
    async def both() -> None:
        assert await _guards(pieces, limit, fed) == await _aiohttps(pieces, limit, fed)

    asyncio.run(both())


@pytest.mark.parametrize("fed", [True, False])
async def test_a_body_all_in_before_the_read_is_kept_for_the_handlers_read(fed):
    pieces = [b'{"model": "m", ', b'"messages": []}']
    request, payload = _request(pieces, 1 << 20, fed)
    if not fed:
        await _arrive(payload, pieces)  # all in, in two pieces: read whole by one `readany`
    body = await read_body_within(request, BodyLimits(1 << 20))
    assert body == b"".join(pieces) and await request.read() is body
