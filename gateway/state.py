"""What request handlers share, stored on the aiohttp app under one typed key."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.metrics import Metrics
from gateway.routing.engine import Engine


@dataclass(slots=True)
class GatewayState:
    config: GatewayConfig
    metrics: Metrics
    engine: Engine
    auth_tokens: tuple[bytes, ...] = ()

    KEY = web.AppKey("gateway_state", object)  # typed access: request.app[GatewayState.KEY]
