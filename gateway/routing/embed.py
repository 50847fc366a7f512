"""Gemini embeddings (`:embedContent`, `:batchEmbedContents`): not a conversation, so nothing to
repair or translate. The first Gemini target of the group serves them, with Google's own body;
a group without one cannot."""

from __future__ import annotations

from typing import Any

from gateway.config import MissingApiKey, resolve_api_key
from gateway.ingress.errors import ClientError
from gateway.providers.base import EncodeError
from gateway.providers.gemini import FAMILY
from gateway.providers.gemini.request import encode_embed
from gateway.routing.engine import Engine
from gateway.routing.router import Plan
from gateway.upstream import MAX_RESPONSE_BODY, Upstream, UpstreamFailure


async def embed(engine: Engine, plan: Plan, method: str, body: Any) -> tuple[int, bytes, str]:
    """(status, Google's JSON body, the provider entry that served it)."""
    target = next((t for t in plan.targets if t.kind == FAMILY.kind), None)
    if target is None:
        raise ClientError(
            400,
            f"{method}: model group {plan.model!r} has no Gemini target; embeddings are served by Gemini "
            "targets only",
            code="unsupported_method",
        )
    if type(body) is not dict:
        raise ClientError(400, "request body must be a JSON object")
    try:
        api_key = resolve_api_key(engine.config, target.provider, engine.env)
        http = encode_embed(method, body, target, api_key)
    except MissingApiKey as exc:
        raise ClientError(500, str(exc), type="server_error", code="missing_api_key") from None
    except EncodeError as exc:
        raise ClientError(400, f"{method}: {exc}") from None
    try:
        async with Upstream(engine.session, http, engine.timeouts(target, plan), stream=False) as upstream:
            status = upstream.status
            payload = await upstream.read(MAX_RESPONSE_BODY)
    except UpstreamFailure as failure:
        raise ClientError(502, failure.error.message, type="upstream_error", code="upstream") from None
    if status != 200:
        error = FAMILY.adapter.classify_error(status, {}, payload)
        # the client's request refused: its 400; rate limits as they are; the gateway's own key or
        # the provider failing: a 502
        client_status = 429 if status == 429 else 400 if status in (400, 404, 413) else 502
        raise ClientError(client_status, error.message, type="upstream_error", code=error.category.value)
    return status, payload, target.provider
