"""A gateway on loopback in front of every strict provider simulator, built per test with the
config the test needs (auth tokens, extra model groups, tight timeouts), plus a plain aiohttp
client so tests see raw statuses, headers and bodies."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.access_log import ACCESS_LOGGER
from gateway.app import create_app
from gateway.config import GatewayConfig, config_from_dict
from gateway.demo import DEMO_KEY_ENV, FAMILIES
from gateway.metrics import Metrics
from gateway.simulators.base import SimulatorHub, free_port
from gateway.state import GatewayState

PROVIDER_KEY = "sim-provider-key-0123456789"
USER = [{"role": "user", "content": "What is six times seven?"}]

# what every API route takes (gateway/browser.py): aiohttp marks bytes as octet-stream otherwise
JSON = {"Content-Type": "application/json"}


def base_config(hub: SimulatorHub) -> dict[str, Any]:
    """Every family as a provider and a one-target group of the same name, plus two failover
    groups across families."""
    providers = {
        name: {"kind": kind, "base_url": hub.base_url(kind), "api_key_env": DEMO_KEY_ENV}
        for name, kind, _, _ in FAMILIES
    }
    target = {name: {"provider": name, "model": model, **opts} for name, _, model, opts in FAMILIES}
    models: dict[str, Any] = {name: {"targets": [target[name]]} for name, _, _, _ in FAMILIES}
    models["smart"] = {"strategy": "failover", "targets": [target["claude"], target["gemini"]]}
    models["chatty"] = {"strategy": "failover", "targets": [target["openai-chat"], target["mistral"]]}
    return {"server": {"host": "127.0.0.1", "port": free_port()}, "providers": providers, "models": models}


class Stack:
    def __init__(
        self,
        hub: SimulatorHub,
        config: GatewayConfig,
        env: dict[str, str],
        metrics: Metrics,
        http: aiohttp.ClientSession,
        app: web.Application | None = None,
    ) -> None:
        self.hub = hub
        self.app = app
        self.config = config
        self.env = env
        self.url = f"http://{config.server.host}:{config.server.port}"
        self.metrics = metrics
        self.http = http

    async def chat(
        self, body: dict[str, Any], headers: dict[str, str] | None = None, path: str = "/v1/chat/completions"
    ) -> tuple[int, dict[str, str], bytes]:
        data = orjson.dumps(body)
        async with self.http.post(self.url + path, data=data, headers={**JSON, **(headers or {})}) as resp:
            return resp.status, _headers(resp), await resp.read()

    async def get(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        async with self.http.get(self.url + path, headers=headers) as resp:
            return resp.status, _headers(resp), await resp.read()

    @property
    def state(self) -> GatewayState:
        """The running gateway's state (store, recorder, engine)."""
        assert self.app is not None
        return self.app[GatewayState.KEY]


def _headers(resp: aiohttp.ClientResponse) -> dict[str, str]:
    return {str(name): value for name, value in resp.headers.items()}


@asynccontextmanager
async def running_stack(
    adjust: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    provider_key: str = PROVIDER_KEY,
) -> AsyncIterator[Stack]:
    async with SimulatorHub(api_key=provider_key) as hub:
        data = base_config(hub)
        if adjust is not None:
            adjust(data)
        config = config_from_dict(data, source="<ops test>")
        metrics = Metrics()
        env = {DEMO_KEY_ENV: provider_key, **(env or {})}
        app = create_app(config, env, metrics)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        try:
            async with aiohttp.ClientSession(headers=JSON) as http:
                yield Stack(hub, config, env, metrics, http, app)
        finally:
            await runner.cleanup()


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack() as s:
        yield s


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [orjson.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS_LOGGER]


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state: put it back after the test."""
    root = logging.getLogger()
    access = logging.getLogger(ACCESS_LOGGER)
    saved = (list(root.handlers), root.level, list(access.handlers), access.level, access.propagate)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        access.handlers[:] = saved[2]
        access.setLevel(saved[3])
        access.propagate = saved[4]
