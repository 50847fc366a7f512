"""A streamed answer whose head is pre-built (gateway/stream_head.py) writes byte for byte what
aiohttp's StreamResponse writes for it through the app's header restriction, its opening, chunks
and ending included, and the relay's own framing (`body_frames`) takes it as it takes aiohttp's."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.http_writer import HttpVersion
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.security import restrict_response_headers
from gateway.state import stream_response
from gateway.stream_head import StreamHead, stream_answer_for, stream_head
from gateway.stream_relay import body_frames
from gateway.whole_answer import json_answer_for
from tests.security.test_whole_answer import GATEWAY_HEADERS, LINE, NAMES, OWN_NAMES, VALUES, _app, _request

SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


async def _written(
    make: Any,
    app: web.Application,
    headers: dict[str, str],
    chunks: list[bytes],
    at_once: bool,
    *,
    force_close: bool = False,
    **kwargs: Any,
) -> tuple[type, bytes | type, bool | None, int, bool]:
    """What the app writes for a stream of `chunks` (the first one the dialect's opening, the
    last its ending) as the relay writes it: the response's type, the bytes (or the error
    raised), its keep-alive and body length as aiohttp reads them after the answer, and whether
    the relay framed the chunks itself."""
    request, transport = await _request(app, **kwargs)
    framed = False
    try:  # aiohttp refuses a line break in a value
        response = make(request, headers, at_once)
        await response.prepare(request)
        if force_close:
            response.force_close()
        if at_once:
            transport.written.append(b"|")  # what went out before the first write
        *body, ending = chunks
        for at, chunk in enumerate(body):
            frame = body_frames(request.writer) if at else None
            if frame is not None:
                framed = True
                frame(chunk)
            else:
                await response.write(chunk)
        await response.write_eof(ending)
        # as aiohttp's finish_response does
        await response.prepare(request)
        await response.write_eof()
    except ValueError as exc:
        return web.StreamResponse, type(exc), None, 0, False
    return type(response), b"".join(transport.written), response.keep_alive, response.body_length, framed


async def _both(
    headers: dict[str, str], chunks: list[bytes], at_once: bool, **kwargs: Any
) -> tuple[Any, Any]:
    # the same second for both: the Date header is aiohttp's clock
    with mock.patch("time.time", return_value=1_700_000_000.5):
        app = _app()
        fast = await _written(
            stream_answer_for(app, json_answer_for(app)), app, headers, chunks, at_once, **kwargs
        )
        plain = await _written(stream_response, _app(), headers, chunks, at_once, **kwargs)
    return fast, plain


CHUNKS = [b"data: opening\n\n", b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


@pytest.mark.parametrize("at_once", [False, True], ids=["head-with-opening", "head-at-once"])
async def test_the_head_is_what_aiohttp_writes(at_once: bool) -> None:
    fast, plain = await _both({**GATEWAY_HEADERS, **SSE}, CHUNKS, at_once)
    assert fast[0] is StreamHead
    assert fast[1:] == plain[1:]
    head = (
        b"HTTP/1.1 200 OK\r\nX-Request-Id: 0123456789abcdef0123456789abcdef\r\n"
        b"X-Gateway-Request-Id: 0123456789abcdef0123456789abcdef\r\nX-Session-Id: sess-1\r\n"
        b"X-Gateway-Provider: openai\r\nX-Gateway-Attempts: 1\r\nContent-Type: text/event-stream\r\n"
        b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n"
        b"Server: llm-transcript-gateway\r\n\r\n"
    )
    opening = b"f\r\ndata: opening\n\n\r\n"
    assert fast[1].startswith(head + b"|" + opening if at_once else head + opening)
    assert fast[1].endswith(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    assert fast[4], "the relay frames the chunks after the first"


@pytest.mark.parametrize(
    "kwargs",
    [{"version": HttpVersion(1, 0)}, {"closing": True}, {"origin": "https://app.example"}],
    ids=["http-1.0", "client-closes", "cors-origin"],
)
async def test_what_the_head_does_not_cover_is_aiohttp_s_response(kwargs: dict[str, Any]) -> None:
    for at_once in (False, True):
        fast, plain = await _both({**GATEWAY_HEADERS, **SSE}, CHUNKS, at_once, **kwargs)
        assert fast[0] is not StreamHead
        assert fast == plain


async def test_another_prepare_hook_or_a_sub_app_takes_aiohttp_s_response() -> None:
    async def other(request: web.BaseRequest, response: web.StreamResponse) -> None:
        response.headers["X-Other"] = "1"

    for hooks in ((restrict_response_headers, other), (other,), ()):
        app = _app(hooks)
        assert stream_answer_for(app, json_answer_for(app)) is stream_response
    app = web.Application()
    app.on_response_prepare.append(restrict_response_headers)
    app.add_subapp("/sub", web.Application())
    assert stream_answer_for(app, json_answer_for(app)) is stream_response
    assert stream_answer_for(_app(), json_answer_for(_app())) is stream_head


async def test_a_writer_it_does_not_know_takes_aiohttp_s_path() -> None:
    # were aiohttp's writer to hold its head otherwise, aiohttp writes it, with the same bytes
    for at_once in (False, True):
        with mock.patch("time.time", return_value=1_700_000_000.5):
            request, transport = await _request(_app())
            del request.writer._headers_buf
            response = stream_head(request, {**GATEWAY_HEADERS, **SSE}, at_once)
            assert isinstance(response, StreamHead)
            await response.prepare(request)
            await response.write_eof(b"data: end\n\n")
            fast = b"".join(transport.written)
            plain = (await _both({**GATEWAY_HEADERS, **SSE}, [b"data: end\n\n"], at_once))[1][1]
        assert fast == plain.replace(b"|", b"")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    headers=st.dictionaries(
        NAMES | st.sampled_from(["Cache-Control", "Transfer-Encoding", "Content-Length"]), VALUES, max_size=6
    ),
    chunks=st.lists(st.binary(max_size=40), min_size=1, max_size=5),
    at_once=st.booleans(),
    closing=st.booleans(),
    force_close=st.booleans(),
    origin=st.sampled_from([None, None, "https://app.example"]),
    version=st.sampled_from([HttpVersion(1, 1), HttpVersion(1, 1), HttpVersion(1, 0)]),
)
def test_any_stream_is_written_as_aiohttp_writes_it(
    headers: dict[str, str],
    chunks: list[bytes],
    at_once: bool,
    closing: bool,
    force_close: bool,
    origin: str | None,
    version: Any,
) -> None:
    async def run() -> tuple[Any, Any]:
        return await _both(
            headers, chunks, at_once, closing=closing, force_close=force_close, origin=origin, version=version
        )

    fast, plain = asyncio.run(run())
    assert fast[1:] == plain[1:]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    headers=st.dictionaries(OWN_NAMES, LINE, max_size=5),
    content_type=st.sampled_from(["text/event-stream", "application/x-ndjson"]),
    chunks=st.lists(st.binary(max_size=3000), min_size=1, max_size=5),
    at_once=st.booleans(),
    force_close=st.booleans(),
)
def test_the_gateway_s_streams_take_the_pre_built_head(
    headers: dict[str, str], content_type: str, chunks: list[bytes], at_once: bool, force_close: bool
) -> None:
    given = {**headers, "Content-Type": content_type, "Cache-Control": "no-cache"}

    async def run() -> tuple[Any, Any]:
        return await _both(given, chunks, at_once, force_close=force_close)

    fast, plain = asyncio.run(run())
    assert fast[0] is StreamHead
    assert fast[1:] == plain[1:]
