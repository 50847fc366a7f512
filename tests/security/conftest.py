"""The gateway as `gateway serve` runs it - its own runner with the connection limits, on loopback -
in front of every strict provider simulator, for the attacks in this suite. Each test builds the
config it needs, attacks, and then checks that a normal request is still served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from gateway.app import create_app
from gateway.config import GatewayConfig, config_from_dict
from gateway.demo import DEMO_KEY_ENV
from gateway.metrics import Metrics
from gateway.serve import start, stop
from gateway.server import GatewayRunner
from gateway.simulators.base import Reply, SimulatorHub, free_port
from tests.ops.conftest import JSON, base_config, restore_logging  # noqa: F401 - a fixture, shared

PROVIDER_KEY = "sec-provider-key-7Hq2Xv9LmR4tWz8K"
USER = [{"role": "user", "content": "What is six times seven?"}]
HANG_GUARD = 30.0  # seconds; reached only when the defence under test is missing


class Gateway:
    def __init__(
        self, hub: SimulatorHub, config: GatewayConfig, metrics: Metrics, runner: GatewayRunner
    ) -> None:
        self.hub = hub
        self.config = config
        self.metrics = metrics
        self.runner = runner
        self.host = config.server.host
        self.port = config.server.port
        self.url = f"http://{self.host}:{self.port}"
        self.stopped = False

    async def stop(self, grace: float) -> None:
        """What `gateway serve` does on SIGTERM (gateway/serve.py)."""
        self.stopped = True
        await stop(self.runner, grace)

    async def chat(
        self,
        body: dict[str, Any] | bytes,
        headers: dict[str, str] | None = None,
        path: str = "/v1/chat/completions",
    ) -> tuple[int, dict[str, str], bytes]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.url + path, data=data, headers={**JSON, **(headers or {})}) as resp,
        ):
            return resp.status, {str(k): v for k, v in resp.headers.items()}, await resp.read()

    async def request(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, self.url + path, headers=headers) as resp,
        ):
            return resp.status, {str(k): v for k, v in resp.headers.items()}, await resp.read()

    async def serves_normally(self, headers: dict[str, str] | None = None) -> None:
        """A plain request after the attack: answered, by the upstream, in full."""
        self.hub.states["anthropic"].push(Reply(text="still here"))
        status, _, body = await asyncio.wait_for(
            self.chat({"model": "claude", "messages": USER}, headers), HANG_GUARD
        )
        assert status == 200, body
        assert orjson.loads(body)["choices"][0]["message"]["content"] == "still here"

    def requests(self, ingress: str, outcome: str, model: str, provider: str) -> float:
        """gateway_requests_total for these labels."""
        labels = {"ingress": ingress, "model": model, "provider": provider, "outcome": outcome}
        return self.sample("gateway_requests_total", **labels)

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)


@asynccontextmanager
async def serving(
    adjust: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    grace: float = 1.0,
    provider_key: str = PROVIDER_KEY,
) -> AsyncIterator[Gateway]:
    """A gateway over a fresh simulator hub; the hub cancels a handler whose client (the gateway)
    goes away, so `SimulatorState.closed_early` shows an upstream call the gateway let go."""
    async with SimulatorHub(api_key=provider_key, handler_cancellation=True) as hub:
        data = base_config(hub)
        if adjust is not None:
            adjust(data)
        config = config_from_dict(data, source="<security test>")
        metrics = Metrics()
        app = create_app(config, {DEMO_KEY_ENV: provider_key, **(env or {})}, metrics)
        runner = await start(app, config)
        gateway = Gateway(hub, config, metrics, runner)
        try:
            yield gateway
        finally:
            if not gateway.stopped:
                await gateway.stop(grace)


@asynccontextmanager
async def loopback_site(app: web.Application) -> AsyncIterator[int]:
    """Another web server on loopback (a fake provider, an attacker's site): its port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port
    finally:
        await runner.cleanup()


async def eventually(condition: Callable[[], bool], within: float = HANG_GUARD) -> None:
    """Wait for what the gateway does in its own time (`within` is a hang guard, not a measure)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


async def read_until_closed(reader: asyncio.StreamReader, within: float = HANG_GUARD) -> bytes:
    """Everything the gateway sends until it closes the connection."""
    out = bytearray()
    async with asyncio.timeout(within):
        try:
            while chunk := await reader.read(65536):
                out += chunk
        except ConnectionError:
            pass
    return bytes(out)


def split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one raw HTTP/1.x response with a Content-Length."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(rest)))
    return status, headers, rest[:length]
