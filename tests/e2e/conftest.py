"""A real loopback stack for end-to-end tests: every provider simulator, a gateway wired to them,
and the official openai and anthropic SDKs pointed at the gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import openai
import pytest
import redis
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, demo_config
from gateway.metrics import Metrics
from gateway.simulators.base import SimulatorHub
from tests.redis_server import start_redis
from tests.sdk_timeout import SDK_TIMEOUT


class Stack:
    def __init__(self, hub: SimulatorHub, url: str, metrics: Metrics) -> None:
        self.hub = hub
        self.url = url
        self.metrics = metrics

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.url}/v1",
            api_key="client-key-never-forwarded",
            max_retries=0,
            timeout=SDK_TIMEOUT,
        )

    def anthropic(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.url, api_key="client-key-never-forwarded", max_retries=0, timeout=SDK_TIMEOUT
        )


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with SimulatorHub() as hub:
        config = config_from_dict(demo_config(hub), source="<test>")
        metrics = Metrics()
        runner = web.AppRunner(
            create_app(config, {DEMO_KEY_ENV: hub.states["anthropic"].api_key}, metrics),
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
        )
        await runner.setup()
        site = web.TCPSite(runner, config.server.host, config.server.port)
        await site.start()
        try:
            yield Stack(hub, f"http://{config.server.host}:{config.server.port}", metrics)
        finally:
            await runner.cleanup()


@pytest.fixture(scope="module")
def redis_url():
    """A real redis-server for the module's tests."""
    server = start_redis()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request, tmp_path) -> dict:
    """The [store] table of each backend (redis: emptied, so no test sees another's records)."""
    if request.param == "sqlite":
        return {"backend": "sqlite", "path": str(tmp_path / "continuity.db")}
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        with redis.Redis.from_url(url) as client:
            client.flushdb()
        return {"backend": "redis", "url": url}
    return {"backend": "memory"}
