"""An upstream that breaks its own stream format after the commit point: the client's stream still
ends well-formed (one error event), nothing is recorded, and the gateway keeps serving."""

from __future__ import annotations

import openai
import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.simulators.base import free_port
from tests.sdk_timeout import SDK_TIMEOUT

CHUNKS = [
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" there"}}]}\n\n',
    # arguments for a tool call that was never started
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{}"}}]}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


GOOD = [CHUNKS[0], CHUNKS[1], CHUNKS[3], CHUNKS[4]]
GEMINI_ERROR_FINISH = (
    b'data: {"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL",'
    b'"index":0}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}\r\n\r\n'
)


def _streamer(chunks: list[bytes]):
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        return response

    return handler


async def _broken(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    if body.get("stream"):
        for chunk in CHUNKS:
            await response.write(chunk)
    return response


@pytest.fixture
async def gateway():
    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", _broken)
    upstream.router.add_post("/good/v1/chat/completions", _streamer(GOOD))
    upstream.router.add_post("/gem/v1beta/models/{rest}", _streamer([GEMINI_ERROR_FINISH]))
    up_runner = web.AppRunner(upstream)
    await up_runner.setup()
    up_port, gw_port = free_port(), free_port()
    await web.TCPSite(up_runner, "127.0.0.1", up_port).start()
    config = config_from_dict(
        {
            "server": {"port": gw_port},
            "providers": {
                name: {"kind": kind, "base_url": f"http://127.0.0.1:{up_port}{path}", "api_key_env": "K"}
                for name, kind, path in (
                    ("bad", "openai_chat", "/v1"),
                    ("good", "openai_chat", "/good/v1"),
                    ("gem", "gemini", "/gem"),
                )
            },
            "models": {
                "bad": {"targets": [{"provider": "bad", "model": "m"}]},
                "gem-first": {
                    "targets": [
                        {"provider": "gem", "model": "gemini-3-pro-preview"},
                        {"provider": "good", "model": "m"},
                    ]
                },
            },
        }
    )
    runner = web.AppRunner(create_app(config, {"K": "key"}), handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", gw_port).start()
    try:
        yield openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw_port}/v1", api_key="x", max_retries=0, timeout=SDK_TIMEOUT
        )
    finally:
        await runner.cleanup()
        await up_runner.cleanup()


async def test_a_stream_broken_after_the_commit_point_ends_with_one_error_event(gateway):
    stream = await gateway.chat.completions.create(
        model="bad", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = []
    with pytest.raises(openai.APIError) as info:
        async for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
    assert "".join(text) == "Hi there"
    assert "tool call 3 started without a function name" in str(info.value)
    # the gateway is unharmed: the next request is answered the same way, not with a 500
    again = await gateway.chat.completions.create(
        model="bad", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError):
        async for _ in again:
            pass


async def test_an_answer_that_ends_in_an_error_before_any_content_fails_over(gateway):
    raw = await gateway.chat.completions.with_raw_response.create(
        model="gem-first", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = []
    async for chunk in raw.parse():
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
    assert "".join(text) == "Hi there"
    assert (raw.headers["x-gateway-provider"], raw.headers["x-gateway-attempts"]) == ("good", "2")
