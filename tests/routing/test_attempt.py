"""`run_attempt` on its own: one upstream call up to the commit point, against a scripted
loopback server speaking OpenAI Chat (the family's real adapter decodes it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.routing.answer import EventStream
from gateway.routing.attempt import run_attempt
from gateway.transcript.events import (
    BlockDelta,
    BlockStart,
    ErrorCategory,
    Finish,
    MessageStart,
    UpstreamError,
)
from gateway.transcript.model import Message, Request, Role, Text
from gateway.transcript.target import Target
from gateway.upstream import Timeouts, client_session

ADAPTER = get_adapter("openai_chat")
Script = Callable[[web.Request], Awaitable[web.StreamResponse]]


def chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def sse(request: web.Request, *frames: bytes, stall: asyncio.Event | None = None) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for frame in frames:
        await response.write(frame)
    if stall is not None:
        await stall.wait()
    return response


@pytest.fixture
async def upstream() -> AsyncIterator[Callable[..., Awaitable[EventStream | UpstreamError]]]:
    script: list[Script] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        return await script[0](request)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    session = client_session()
    target = Target("p", "openai_chat", "gpt-4.1", str(server.make_url("/v1")))

    async def attempt(handler: Script, stream: bool = True, first_token: float | None = None):
        script[:] = [handler]
        request = Request("g", (Message(Role.USER, (Text("hi"),)),), stream=stream)
        prepared = prepare(request, target, ADAPTER.capabilities)
        http = ADAPTER.encode_request(prepared.request, target, "key")
        return await run_attempt(session, ADAPTER, target, prepared, http, stream, Timeouts(), first_token)

    try:
        yield attempt
    finally:
        await session.close()
        await server.close()


async def drain(stream: EventStream) -> list:
    events = []
    while (batch := await stream.next_batch()) is not None:
        events.extend(batch)
    await stream.aclose()
    return events


async def test_a_committed_stream_is_handed_over_with_what_came_before_the_commit_put_back(upstream):
    async def handler(request):
        return await sse(
            request,
            chunk({"role": "assistant", "content": ""}),  # nothing to show yet: not the commit
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}, "stop"),
            b"data: [DONE]\n\n",
        )

    stream = await upstream(handler)
    assert isinstance(stream, EventStream)
    events = await drain(stream)
    assert type(events[0]) is MessageStart  # read before the commit point, then put back
    assert "".join(e.text for e in events if type(e) is BlockDelta) == "Hello"
    assert type(events[-1]) is Finish


async def test_a_refusal_is_the_adapters_classified_error(upstream):
    async def handler(request):
        body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
        return web.json_response(body, status=429, headers={"retry-after": "7"})

    error = await upstream(handler)
    assert isinstance(error, UpstreamError)
    assert error.category is ErrorCategory.RATE_LIMIT and error.retry_after == 7


async def test_a_stream_that_breaks_before_any_content_is_a_failure_another_target_may_take(upstream):
    async def handler(request):
        response = await sse(request, chunk({"role": "assistant", "content": ""}))
        request.transport.close()  # the connection drops mid-stream
        return response

    error = await upstream(handler)
    assert isinstance(error, UpstreamError) and error.category is ErrorCategory.CONNECTION


async def test_an_answer_ending_in_error_before_content_is_a_failure(upstream):
    async def handler(request):
        return await sse(request, chunk({"role": "assistant", "content": ""}, "error"), b"data: [DONE]\n\n")

    error = await upstream(handler)
    assert isinstance(error, UpstreamError) and error.type == "error_finish"


async def test_a_tool_call_start_commits(upstream):
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    stall = asyncio.Event()

    async def handler(request):
        return await sse(request, chunk({"role": "assistant", "tool_calls": [call]}), stall=stall)

    stream = await upstream(handler)  # committed although the stream has not ended
    assert isinstance(stream, EventStream)
    batch = await stream.next_batch()
    assert batch is not None and any(type(e) is BlockStart and e.name == "f" for e in batch)
    stall.set()
    await stream.aclose()


async def test_no_content_within_the_first_token_limit_is_a_timeout(upstream):
    stall = asyncio.Event()

    async def handler(request):
        return await sse(request, chunk({"role": "assistant", "content": ""}), stall=stall)

    error = await upstream(handler, first_token=0.05)
    stall.set()
    assert isinstance(error, UpstreamError)
    assert error.category is ErrorCategory.TIMEOUT and error.type == "first_token_timeout"


async def test_a_whole_answer_is_one_batch_and_an_unreadable_one_a_protocol_error(upstream):
    async def good(request):
        message = {"role": "assistant", "content": "Hi there"}
        body = {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4.1",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        return web.json_response(body)

    stream = await upstream(good, stream=False)
    assert isinstance(stream, EventStream)
    assert "".join(e.text for e in await drain(stream) if type(e) is BlockDelta) == "Hi there"

    async def broken(request):
        return web.Response(body=b"{not json", content_type="application/json")

    error = await upstream(broken, stream=False)
    assert isinstance(error, UpstreamError) and error.category is ErrorCategory.PROTOCOL
