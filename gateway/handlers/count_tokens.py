"""A dialect's token-counting route (`Dialect.count`, e.g. `POST /v1/messages/count_tokens`): the
request's input tokens, counted by the routed provider where its family can count (else
estimated), without generating anything. Accounted for like every request: metrics and an
access-log line under the route's own `ingress` label value (`CountRoute.ingress`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial

from aiohttp import web

from gateway.exchange import plan_for
from gateway.ingress.admission import check_size, parse_counted, values_within_budget
from gateway.ingress.base import CountRoute, Dialect
from gateway.ingress.budget import offloads
from gateway.ingress.errors import ClientError
from gateway.metrics import AttemptOutcome, RequestRecord
from gateway.offload import Offload
from gateway.routing.count import PROVIDER, CountRefused, count_input_tokens
from gateway.state import TENANT, GatewayState
from gateway.transcript.events import ErrorCategory

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# response header: whether the figure is the provider's count or the gateway's estimate
SOURCE_HEADER = "X-Gateway-Token-Count"


def count_tokens_handler(dialect: Dialect, count: CountRoute) -> Handler:
    async def count_tokens(request: web.Request) -> web.Response:
        state: GatewayState = request.app[GatewayState.KEY]
        record = RequestRecord(count.ingress, request_id=uuid.uuid4().hex)
        started = time.monotonic()
        try:
            response = await _count(state, dialect, count, request, record)
        except BaseException:
            record.outcome, record.status = "cancelled", 0
            raise
        finally:
            record.duration = time.monotonic() - started
            state.observe(record)
        return response

    return count_tokens


async def _count(
    state: GatewayState, dialect: Dialect, count: CountRoute, request: web.Request, record: RequestRecord
) -> web.Response:
    offload: Offload | None = None
    try:
        raw = await request.read()
        values = await values_within_budget(raw, state.config.server)
        offload = Offload() if offloads(values, len(raw)) else None  # decided once (gateway/offload.py)
        body = await parse_counted(raw, state.config.server, values, offload=offload)
        decode = partial(
            count.decode, body, request.headers, state.sealer, params=request.match_info, query=request.query
        )
        inbound = await offload.run(decode) if offload is not None else decode()
        check_size(inbound.request, state.config.server)
        plan = plan_for(state, inbound.request.model)
        record.model = plan.model
        if state.limits:  # a key's model list holds here too; counting is free: no limit applies
            refusal = state.limits.forbidden(state.limits.identify(request.get(TENANT, "")), plan.model)
            if refusal is not None:
                raise refusal.error()
        try:
            tokens, source, provider = await count_input_tokens(state.engine, inbound.request, plan, offload)
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
        status, payload = dialect.error(exc)
        record.outcome, record.status = "client_error", status
        return web.Response(status=status, body=payload, headers=exc.headers, content_type="application/json")
    finally:
        if offload is not None:
            offload.end()
    if source == PROVIDER:
        record.provider = provider
        record.attempts = [AttemptOutcome(provider, "ok")]
    record.status = 200
    headers = {SOURCE_HEADER: source, "X-Gateway-Provider": provider, "X-Request-Id": record.request_id}
    return web.json_response(count.render(tokens), headers=headers)
