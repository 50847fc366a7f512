"""Shutdown past the grace period: every stream still open ends with its dialect's error event
(not a cut chunked body), every request still unanswered gets a 503 in its envelope, the upstream
calls are cancelled, and the stop returns (gateway/lifecycle.py bounds it by the grace period
plus END_BOUND)."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from gateway.app import IN_FLIGHT
from gateway.simulators.base import Fault, Reply
from tests.security.conftest import HANG_GUARD, JSON, USER, Gateway, eventually, serving


async def _post(gateway: Gateway, body: dict) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            gateway.url + "/v1/chat/completions", data=orjson.dumps(body), headers=JSON
        ) as resp:
            return resp.status, dict(resp.headers), await resp.read()  # raises if the body is cut


async def test_what_outlives_the_grace_period_ends_in_its_dialects_error():
    async with serving() as gateway:
        stalled_stream = Fault(
            after_events=4, mid_stream="stall", stall_seconds=600, reply=Reply(text="x" * 200, chunk_size=5)
        )
        gateway.hub.states["anthropic"].push(stalled_stream)
        gateway.hub.states["gemini"].push(Fault(delay=600))  # no answer at all yet
        stream = asyncio.create_task(_post(gateway, {"model": "claude", "messages": USER, "stream": True}))
        plain = asyncio.create_task(_post(gateway, {"model": "gemini", "messages": USER}))
        await eventually(
            lambda: (
                gateway.hub.states["anthropic"].open_streams == 1
                and len(gateway.hub.states["gemini"].requests) == 1
            )
        )
        await asyncio.wait_for(gateway.stop(grace=0.2), HANG_GUARD)

        status, _, body = await asyncio.wait_for(stream, HANG_GUARD)
        assert status == 200
        frames = body.decode().strip().split("\n\n")
        assert '"content":"xxxxx"' in frames[1]  # it had committed: content reached the client
        last = orjson.loads(frames[-1].removeprefix("data: "))
        assert last["error"]["code"] == "overloaded" and "shutting down" in last["error"]["message"]

        status, headers, body = await asyncio.wait_for(plain, HANG_GUARD)
        assert status == 503 and headers["Retry-After"] == "1"
        assert orjson.loads(body)["error"]["code"] == "shutting_down"

        # the upstream calls were cancelled, and nothing is left in flight
        assert gateway.hub.states["anthropic"].closed_early == 1
        await eventually(lambda: gateway.hub.states["gemini"].cancelled_requests == 1)
        assert len(gateway.runner.app[IN_FLIGHT]) == 0
