"""The aiohttp handler of an ingress route: the exchange, run with that route's dialect and codec."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.exchange import run_exchange
from gateway.ingress.base import Dialect, IngressCodec
from gateway.state import GatewayState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def ingress_handler(dialect: Dialect, codec: IngressCodec) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await run_exchange(request.app[GatewayState.KEY], dialect, codec, request)

    return handle
