"""What request handlers share, stored on the aiohttp app under one typed key."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.metrics import Metrics, RequestRecord
from gateway.routing.engine import Engine


@dataclass(slots=True)
class GatewayState:
    config: GatewayConfig
    metrics: Metrics
    engine: Engine
    auth_tokens: tuple[bytes, ...] = ()

    KEY = web.AppKey("gateway_state", object)  # typed access: request.app[GatewayState.KEY]

    def observe(self, record: RequestRecord) -> None:
        """The one place a finished request is accounted for (metrics, access log)."""
        self.metrics.record(record)
