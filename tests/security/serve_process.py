"""`gateway serve` as a child process (for what only a whole process shows: its descriptor limit,
its exit) in front of a simulator hub in the test process; tests/ops/test_serve.py starts it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson

from gateway.simulators.base import Reply, SimulatorHub
from tests.ops import test_serve
from tests.security.conftest import JSON, PROVIDER_KEY, USER


class GatewayProcess:
    def __init__(self, gateway: test_serve.Gateway, hub: SimulatorHub) -> None:
        self.gateway = gateway
        self.hub = hub
        self.url = gateway.url
        self.host, port = gateway.url.removeprefix("http://").split(":")
        self.port = int(port)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)

    async def serves_normally(self) -> None:
        self.hub.states["anthropic"].push(Reply(text="still here"))
        body = orjson.dumps({"model": "claude", "messages": USER})
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.url + "/v1/chat/completions", data=body, headers=JSON) as resp,
        ):
            assert resp.status == 200, await resp.read()
            assert (await resp.json())["choices"][0]["message"]["content"] == "still here"

    async def stop(self) -> str:
        """SIGTERM; the process must exit 0. Its stderr."""
        self.gateway.process.send_signal(signal.SIGTERM)
        assert await self.gateway.finish() == 0
        return self.gateway.stderr.decode()


@asynccontextmanager
async def gateway_process(
    tmp_path: Path, *, file_limit: int | None = None, **server: object
) -> AsyncIterator[GatewayProcess]:
    """`server`: [server] keys."""
    async with SimulatorHub(api_key=PROVIDER_KEY) as hub:
        async with test_serve.gateway_process(
            tmp_path, hub, grace=1.0, server=server, file_limit=file_limit, key=PROVIDER_KEY
        ) as gateway:
            yield GatewayProcess(gateway, hub)
