"""Shared by the routing and resilience tests: configs over the simulator hub, controllable time,
canonical requests, and a gateway stack whose `gateway_target_available` gauge is wired to the
engine's health the way app.py is asked to wire it."""

from __future__ import annotations

import asyncio
import copy
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import openai
from aiohttp import web

from gateway.app import create_app
from gateway.config import GatewayConfig, config_from_dict
from gateway.demo import FAMILIES
from gateway.metrics import Metrics
from gateway.routing.engine import Answer, Engine
from gateway.simulators.base import SimulatorHub, free_port
from gateway.state import GatewayState
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, Event, StreamError
from gateway.transcript.model import Message, Request, Role, Text
from gateway.upstream import client_session
from tests.sdk_timeout import SDK_TIMEOUT

KEY_ENV = "ROUTING_TEST_KEY"
KIND = {name: kind for name, kind, _, _ in FAMILIES}
MODEL = {name: model for name, _, model, _ in FAMILIES}

# small real timeouts so a stalled simulator costs a fraction of a second; every stall the tests
# inject lasts far longer than these
FAST_TIMEOUTS = {
    "connect_seconds": 2.0,
    "first_token_seconds": 0.4,
    "idle_seconds": 3.0,
    "total_seconds": 20.0,
}
COOLDOWN = {"consecutive_failures": 3, "cooldown_seconds": 5.0, "max_cooldown_seconds": 60.0}
RETRY = {"backoff_base_seconds": 0.1, "backoff_max_seconds": 4.0, "deadline_seconds": 30.0}


def target(name: str, **options: Any) -> dict[str, Any]:
    return {"provider": name, "model": MODEL[name], **options}


def group(*names: str, **options: Any) -> dict[str, Any]:
    retry = {**RETRY, **options.pop("retry", {})}
    return {"targets": [target(n) for n in names], "retry": retry, **options}


def config_dict(
    hub: SimulatorHub,
    models: dict[str, Any],
    only: dict[str, dict[str, Any]] | None = None,
    **provider_options: Any,
) -> dict[str, Any]:
    """Every family's provider on the hub with test timeouts and cooldowns; `provider_options`
    (e.g. timeouts={...}) apply to all of them, `only` to the named ones."""
    providers = {}
    for name, kind, _, _ in FAMILIES:
        entry: dict[str, Any] = {
            "kind": kind,
            "base_url": hub.base_url(kind),
            "api_key_env": KEY_ENV,
            "timeouts": dict(FAST_TIMEOUTS),
            "cooldown": dict(COOLDOWN),
        }
        for options in (provider_options, (only or {}).get(name, {})):
            for key, value in copy.deepcopy(options).items():
                entry[key] = {**entry[key], **value} if isinstance(value, dict) else value
        providers[name] = entry
    return {"server": {"host": "127.0.0.1", "port": free_port()}, "providers": providers, "models": models}


def make_config(
    hub: SimulatorHub,
    models: dict[str, Any],
    only: dict[str, dict[str, Any]] | None = None,
    **provider_options: Any,
) -> GatewayConfig:
    return config_from_dict(config_dict(hub, models, only, **provider_options), source="<routing test>")


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait for something another task or the simulator does in its own time (`within` is only a
    hang guard: the condition normally holds after a few event-loop turns)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def env(hub: SimulatorHub) -> dict[str, str]:
    return {KEY_ENV: hub.states["anthropic"].api_key}


class FakeTime:
    """A virtual clock for the engine's backoff, deadline and cooldowns: it moves only when the
    engine sleeps (which returns at once) or the test advances it, so waits are exact and cost
    nothing. HTTP and the upstream timeouts still run in real time underneath."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ask(model: str, text: str = "Hello?", stream: bool = True, **fields: Any) -> Request:
    return Request(model=model, messages=(Message(Role.USER, (Text(text),)),), stream=stream, **fields)


@dataclass
class Collected:
    text: str
    events: list[Event]
    error: StreamError | None


async def collect(answer: Answer) -> Collected:
    events: list[Event] = []
    async for event in answer.events():
        events.append(event)
    text = "".join(
        e.text for e in events if type(e) is BlockDelta and _kind(events, e.index) is BlockKind.TEXT
    )
    errors = [e for e in events if type(e) is StreamError]
    return Collected(text, events, errors[0] if errors else None)


def _kind(events: list[Event], index: int) -> BlockKind | None:
    for e in events:
        if type(e) is BlockStart and e.index == index:
            return e.kind
    return None


@asynccontextmanager
async def engine_for(
    hub: SimulatorHub,
    models: dict[str, Any],
    fake: FakeTime | None = None,
    only: dict[str, dict[str, Any]] | None = None,
    **provider_options: Any,
) -> AsyncIterator[Engine]:
    config = make_config(hub, models, only, **provider_options)
    async with client_session() as session:
        kwargs: dict[str, Any] = {"rng": random.Random(7)}
        if fake is not None:
            kwargs.update(clock=fake.clock, sleep=fake.sleep)
        yield Engine(config, session, env(hub), **kwargs)


def wire_availability(engine: Engine, metrics: Metrics) -> None:
    """What app.py is asked to do once the engine exists (see the routing issue report)."""
    for model, provider, probe in engine.availability():
        metrics.target_available.labels(model, provider).set_function(probe)


class Stack:
    def __init__(self, hub: SimulatorHub, url: str, metrics: Metrics, engine: Engine) -> None:
        self.hub = hub
        self.url = url
        self.metrics = metrics
        self.engine = engine
        self._clients: list[openai.AsyncOpenAI] = []

    def client(self) -> openai.AsyncOpenAI:
        """An SDK client (closed with the stack) that does not retry by itself."""
        client = openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=SDK_TIMEOUT
        )
        self._clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@asynccontextmanager
async def gateway_stack(
    hub: SimulatorHub,
    models: dict[str, Any],
    only: dict[str, dict[str, Any]] | None = None,
    **provider_options: Any,
) -> AsyncIterator[Stack]:
    config = make_config(hub, models, only, **provider_options)
    metrics = Metrics()
    app = create_app(config, env(hub), metrics)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
    await runner.setup()
    state: GatewayState = app[GatewayState.KEY]
    wire_availability(state.engine, metrics)
    try:
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        stack = Stack(hub, f"http://{config.server.host}:{config.server.port}", metrics, state.engine)
        try:
            yield stack
        finally:
            await stack.aclose()
    finally:
        await runner.cleanup()
