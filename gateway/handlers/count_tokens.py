"""A dialect's token-counting route (`Dialect.count`, e.g. `POST /v1/messages/count_tokens`): the
request's input tokens, counted by the routed provider where its family can count (else
estimated), without generating anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.exchange import check_size, plan_for, tenant_of
from gateway.ingress.base import CountRoute, Dialect
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.routing.count import count_input_tokens
from gateway.state import GatewayState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# response header: whether the figure is the provider's count or the gateway's estimate
SOURCE_HEADER = "X-Gateway-Token-Count"


def count_tokens_handler(dialect: Dialect, count: CountRoute) -> Handler:
    async def count_tokens(request: web.Request) -> web.Response:
        state: GatewayState = request.app[GatewayState.KEY]
        try:
            body = parse_json_body(await request.read(), state.config.server.max_json_depth)
            inbound = count.decode(
                body, request.headers, state.sealer, params=request.match_info, query=request.query
            )
            check_size(inbound.request, state.config.server)
            plan = plan_for(state, inbound.request.model)
            if state.limits:  # a key's model list holds here too; counting is free: no limit applies
                refusal = state.limits.forbidden(
                    state.limits.identify(tenant_of(state, dialect, request)), plan.model
                )
                if refusal is not None:
                    raise refusal.error()
            tokens, source, provider = await count_input_tokens(state.engine, inbound.request, plan)
        except ClientError as exc:
            status, payload = dialect.error(exc)
            return web.Response(
                status=status, body=payload, headers=exc.headers, content_type="application/json"
            )
        headers = {SOURCE_HEADER: source, "X-Gateway-Provider": provider}
        return web.json_response(count.render(tokens), headers=headers)

    return count_tokens
