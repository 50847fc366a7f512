"""`POST /v1/messages/count_tokens`: a Messages request's input tokens, counted by the routed
provider where its family can count (else estimated), without generating anything."""

from __future__ import annotations

import time
import uuid

from aiohttp import web

from gateway.exchange import check_size, parse_within_budget, plan_for
from gateway.http_errors import COUNT_TOKENS_INGRESS
from gateway.ingress.errors import ClientError
from gateway.ingress.messages.codec import CODEC
from gateway.metrics import AttemptOutcome, RequestRecord
from gateway.routing.count import PROVIDER, CountRefused, count_input_tokens
from gateway.state import TENANT, GatewayState
from gateway.transcript.events import ErrorCategory

# response header: whether the figure is the provider's count or the gateway's estimate
SOURCE_HEADER = "X-Gateway-Token-Count"


async def count_tokens(request: web.Request) -> web.Response:
    """Accounted for like every request: metrics and an access-log line under its own `ingress`
    label value."""
    state: GatewayState = request.app[GatewayState.KEY]
    record = RequestRecord(COUNT_TOKENS_INGRESS, request_id=uuid.uuid4().hex)
    started = time.monotonic()
    try:
        response = await _count(state, request, record)
    except BaseException:
        record.outcome, record.status = "cancelled", 0
        raise
    finally:
        record.duration = time.monotonic() - started
        state.observe(record)
    return response


async def _count(state: GatewayState, request: web.Request, record: RequestRecord) -> web.Response:
    try:
        body = await parse_within_budget(await request.read(), state.config.server)
        inbound = CODEC.decode_count(body, request.headers, state.sealer)
        check_size(inbound.request, state.config.server)
        plan = plan_for(state, inbound.request.model)
        record.model = plan.model
        if state.limits:  # a key's model list holds here too; counting is free: no limit applies
            refusal = state.limits.forbidden(state.limits.identify(request.get(TENANT, "")), plan.model)
            if refusal is not None:
                raise refusal.error()
        try:
            tokens, source, provider = await count_input_tokens(state.engine, inbound.request, plan)
        except CountRefused as refused:
            record.provider = refused.provider
            record.attempts = [AttemptOutcome(refused.provider, refused.error.category.value)]
            error = refused.error
            status = 413 if error.category is ErrorCategory.TOO_LARGE else 400
            raise ClientError(
                status, error.message, code=error.code or error.category.value,
                headers={"X-Gateway-Provider": refused.provider},
            ) from None  # fmt: skip
    except ClientError as exc:
        status, payload = CODEC.error_body(exc)
        record.outcome, record.status = "client_error", status
        return web.Response(status=status, body=payload, headers=exc.headers, content_type="application/json")
    if source == PROVIDER:
        record.provider = provider
        record.attempts = [AttemptOutcome(provider, "ok")]
    record.status = 200
    headers = {SOURCE_HEADER: source, "X-Gateway-Provider": provider, "X-Request-Id": record.request_id}
    return web.json_response({"input_tokens": tokens}, headers=headers)
