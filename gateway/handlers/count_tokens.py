"""`POST /v1/messages/count_tokens`: a Messages request's input tokens, counted by the routed
provider where its family can count (else estimated), without generating anything."""

from __future__ import annotations

from aiohttp import web

from gateway.exchange import check_size, plan_for, tenant_of
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.ingress.messages.codec import CODEC
from gateway.routing.count import count_input_tokens
from gateway.state import GatewayState

# response header: whether the figure is the provider's count or the gateway's estimate
SOURCE_HEADER = "X-Gateway-Token-Count"


async def count_tokens(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    try:
        body = parse_json_body(await request.read(), state.config.server.max_json_depth)
        inbound = CODEC.decode_count(body, request.headers, state.sealer)
        check_size(inbound.request, state.config.server)
        plan = plan_for(state, inbound.request.model)
        if state.limits:  # a key's model list holds here too; counting is free: no limit applies
            refusal = state.limits.forbidden(
                state.limits.identify(tenant_of(state, CODEC, request)), plan.model
            )
            if refusal is not None:
                raise refusal.error()
        tokens, source, provider = await count_input_tokens(state.engine, inbound.request, plan)
    except ClientError as exc:
        status, payload = CODEC.error_body(exc)
        return web.Response(status=status, body=payload, headers=exc.headers, content_type="application/json")
    headers = {SOURCE_HEADER: source, "X-Gateway-Provider": provider}
    return web.json_response({"input_tokens": tokens}, headers=headers)
