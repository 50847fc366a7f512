"""A gateway for an arbitrary config over a running simulator hub (the `stack` fixture serves the
demo config only)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, demo_config
from gateway.metrics import Metrics
from gateway.simulators.base import SimulatorHub


@dataclass
class Gateway:
    url: str
    metrics: Metrics

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def config_with(hub: SimulatorHub, models: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    """The demo config (one group per provider family) plus `models` and other sections."""
    config = demo_config(hub)
    config["models"].update(models or {})
    config.update(sections)
    return config


@contextlib.asynccontextmanager
async def serve(
    hub: SimulatorHub, config: dict[str, Any], env: dict[str, str] | None = None
) -> AsyncIterator[Gateway]:
    parsed = config_from_dict(config, source="<test>")
    metrics = Metrics()
    env = {DEMO_KEY_ENV: hub.states["anthropic"].api_key, **(env or {})}
    runner = web.AppRunner(
        create_app(parsed, env, metrics), handle_signals=False, access_log=None, handler_cancellation=True
    )
    await runner.setup()
    site = web.TCPSite(runner, parsed.server.host, parsed.server.port)
    await site.start()
    try:
        yield Gateway(f"http://{parsed.server.host}:{parsed.server.port}", metrics)
    finally:
        await runner.cleanup()
