"""A client that goes away cancels its upstream request at once - streamed or not, before or
after the commit point - and the gateway's connections and tasks return to their baseline."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub
from tests.ops.conftest import JSON
from tests.routing.sim_stack import Stack, eventually, gateway_stack, group

USER = [{"role": "user", "content": "Tell me a long story."}]
STORY = "Once upon a time " * 200
FD_DIR = "/proc/self/fd"


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


@pytest.fixture
async def stack(hub) -> AsyncIterator[Stack]:
    async with gateway_stack(hub, {"solo": group("openai-chat")}) as stack:
        yield stack


def open_fds() -> int:
    return len(os.listdir(FD_DIR))


async def baseline(stack: Stack) -> tuple[int, int]:
    """Open file descriptors and tasks once a complete request has come and gone."""
    async with aiohttp.ClientSession() as session:
        body = {"model": "solo", "messages": USER}
        async with session.post(
            f"{stack.url}/v1/chat/completions", data=orjson.dumps(body), headers=JSON
        ) as resp:
            assert resp.status == 200
            await resp.read()
    await asyncio.sleep(0.05)
    return open_fds(), len(asyncio.all_tasks())


async def settled(stack: Stack, fds: int, tasks: int) -> None:
    state = stack.hub.states["openai_chat"]
    await eventually(lambda: state.cancelled_requests == 1, within=5.0)
    await eventually(lambda: state.active_requests == 0 and state.open_streams == 0)
    await eventually(lambda: stack.sample("gateway_inflight_requests") == 0)
    await eventually(lambda: open_fds() <= fds and len(asyncio.all_tasks()) <= tasks)


@pytest.mark.skipif(not os.path.isdir(FD_DIR), reason="needs /proc/self/fd to count descriptors")
async def first_content(resp: aiohttp.ClientResponse) -> str:
    """The content of the answer's first chunks up to the first text (the stream stays open)."""
    assert resp.status == 200 and resp.content_type == "text/event-stream"
    text = ""
    while not text:
        line = await resp.content.readline()
        assert line, "the stream ended before any content"
        if line.startswith(b"data: {"):
            delta = orjson.loads(line[6:])["choices"][0]["delta"]
            text += delta.get("content") or ""
    return text


@pytest.mark.parametrize(
    ("stream", "fault", "wait_for"),
    [
        # streaming, after the commit point: the client has read content and leaves
        (
            True,
            Fault(after_events=6, mid_stream="stall", stall_seconds=60.0, reply=Reply(text=STORY)),
            "content",
        ),
        # streaming, before the commit point: the upstream has not answered yet
        (True, Fault(delay=60.0), "request"),
        # not streaming: the upstream is still generating the whole answer
        (False, Fault(delay=60.0), "request"),
    ],
    ids=["stream-after-commit", "stream-before-commit", "json"],
)
async def test_a_client_disconnect_cancels_the_upstream_request(stack, stream, fault, wait_for):
    state = stack.hub.states["openai_chat"]
    fds, tasks = await baseline(stack)
    state.push(fault)
    session = aiohttp.ClientSession()
    try:
        body = {"model": "solo", "messages": USER, "stream": stream}
        request = session.post(f"{stack.url}/v1/chat/completions", data=orjson.dumps(body), headers=JSON)
        if wait_for == "content":
            resp = await request
            assert STORY.startswith(await first_content(resp)) and state.open_streams == 1
        else:
            pending = asyncio.ensure_future(request)
            await eventually(lambda: len(state.requests) == 2)  # the baseline request and this one
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
    finally:
        await session.close()  # the client goes away
    await settled(stack, fds, tasks)
    assert len(state.requests) == 2, "nothing was retried for a client that left"
    assert (
        stack.sample(
            "gateway_requests_total",
            ingress="chat_completions",
            model="solo",
            provider="openai-chat" if wait_for == "content" else "none",
            outcome="cancelled",
        )
        == 1
    )
