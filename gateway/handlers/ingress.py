"""The aiohttp handler of an ingress route: the exchange, run with that route's codec."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.exchange import run_exchange
from gateway.ingress.base import IngressCodec
from gateway.state import GatewayState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def ingress_handler(codec: IngressCodec) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await run_exchange(request.app[GatewayState.KEY], codec, request)

    return handle
