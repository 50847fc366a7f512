"""A tool call whose arguments are not a JSON object, after the commit point, on the NDJSON
stream: the lines before it still reach the client (even from the same upstream chunk), the
stream ends with one error line, and the half-valid turn is not recorded."""

from __future__ import annotations

import json

import aiohttp
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.simulators.base import free_port
from gateway.state import GatewayState


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        b"data: "
        + json.dumps({"id": "c1", "object": "chat.completion.chunk", "choices": [choice]}).encode()
        + b"\n\n"
    )


CALL = {
    "index": 0,
    "id": "call_up_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{oops"},
}
# the text and the broken call in one upstream write: one batch of events for the relay
BODY = (
    _chunk({"role": "assistant", "content": "Checking the weather."})
    + _chunk({"tool_calls": [CALL]})
    + _chunk({}, "tool_calls")
    + b"data: [DONE]\n\n"
)


async def _upstream(request: web.Request) -> web.StreamResponse:
    await request.read()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(BODY)
    return response


async def test_a_call_with_arguments_that_are_not_an_object_ends_the_stream_with_an_error_line():
    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", _upstream)
    up_runner = web.AppRunner(upstream)
    await up_runner.setup()
    up_port, gw_port = free_port(), free_port()
    await web.TCPSite(up_runner, "127.0.0.1", up_port).start()
    config = config_from_dict(
        {
            "server": {"port": gw_port},
            "providers": {
                "up": {
                    "kind": "openai_chat",
                    "base_url": f"http://127.0.0.1:{up_port}/v1",
                    "api_key_env": "K",
                }
            },
            "models": {"m": {"targets": [{"provider": "up", "model": "gpt-4.1"}]}},
        }
    )
    app = create_app(config, {"K": "key"})
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    recorded: list[object] = []
    app[GatewayState.KEY].recorder.record = lambda *args, **kwargs: recorded.append(args)
    await web.TCPSite(runner, "127.0.0.1", gw_port).start()
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Weather?"}]}
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{gw_port}/v1/chat/completions"
            async with http.post(url, json=body, headers={"Accept": "application/x-ndjson"}) as resp:
                assert resp.status == 200
                lines = [json.loads(line) for line in (await resp.read()).splitlines()]
    finally:
        await runner.cleanup()
        await up_runner.cleanup()
    assert lines == [
        {"type": "text", "index": 0, "text": "Checking the weather."},
        {"type": "error", "error": {"type": "protocol", "message": "up broke its stream format"}},
    ]
    assert recorded == [], "a turn that ended in an error is not recorded"
