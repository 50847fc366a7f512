"""Input-token counts for a request without generating anything (`count_tokens`).

The first target of the request's plan counts: with its provider's own counter where its family
has one (Anthropic `/v1/messages/count_tokens`, Gemini `:countTokens`), over the transcript as
repaired for that target; otherwise, or when that provider cannot count right now, with the
gateway's documented estimate (gateway.transcript.estimate).
"""

from __future__ import annotations

import logging

from gateway.config import MissingApiKey, resolve_api_key
from gateway.offload import Offload
from gateway.providers import get_adapter
from gateway.providers.base import EncodeError, HttpRequest, ProviderAdapter
from gateway.repair import prepare
from gateway.routing.engine import Engine
from gateway.routing.router import Plan
from gateway.transcript.estimate import estimate_input_tokens
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.transcript.model import Request
from gateway.transcript.target import Target
from gateway.upstream import MAX_ERROR_BODY, Upstream, UpstreamFailure

log = logging.getLogger("gateway")

PROVIDER = "provider"  # counted by the provider
ESTIMATE = "estimate"  # estimated by the gateway
# what a provider says about the request itself: the client's mistake, not an estimate's cue
_REFUSALS = frozenset(
    {ErrorCategory.INVALID_REQUEST, ErrorCategory.TOO_LARGE, ErrorCategory.CONTINUITY, ErrorCategory.PAIRING}
)


class CountRefused(Exception):
    """The provider refused to count the request (it would refuse to answer it too)."""

    def __init__(self, provider: str, error: UpstreamError) -> None:
        super().__init__(error.message)
        self.provider = provider
        self.error = error


async def count_input_tokens(
    engine: Engine, request: Request, plan: Plan, offload: Offload | None = None
) -> tuple[int, str, str]:
    """(input tokens, PROVIDER or ESTIMATE, the provider entry that counted or was estimated for);
    raises CountRefused when the provider judged the request invalid (an estimate would hide
    what the real request will meet). `offload`: a large request, estimated, repaired and
    encoded in a worker thread (gateway/offload.py)."""
    target = plan.targets[0]
    adapter = get_adapter(target.kind)
    if offload is not None:
        estimate, http = await offload.run(_estimate_and_encode, engine, request, target, adapter)
    else:
        estimate, http = _estimate_and_encode(engine, request, target, adapter)
    answer = getattr(adapter, "count_answer", None)
    if http is None or answer is None:
        return estimate, ESTIMATE, target.provider
    try:
        async with Upstream(engine.session, http, engine.timeouts(target, plan), stream=False) as upstream:
            status = upstream.status
            body = await upstream.read(MAX_ERROR_BODY, truncate=True)
    except UpstreamFailure as failure:
        log.info("count_tokens for %s estimated: %s", target.provider, failure.error.message)
        return estimate, ESTIMATE, target.provider
    counted = answer(body) if status == 200 else None
    if counted is None:
        error = adapter.classify_error(status, {}, body)
        if status != 200 and error.category in _REFUSALS:
            raise CountRefused(target.provider, error)
        log.info("count_tokens for %s estimated: HTTP %d %s", target.provider, status, error.message)
        return estimate, ESTIMATE, target.provider
    return counted, PROVIDER, target.provider


def _estimate_and_encode(
    engine: Engine, request: Request, target: Target, adapter: ProviderAdapter
) -> tuple[int, HttpRequest | None]:
    """The gateway's estimate, and the provider's count request (None: its family has no count
    endpoint, or the request cannot be sent)."""
    estimate = estimate_input_tokens(request)
    # optional in the adapter protocol: only families with a count endpoint have it
    encode = getattr(adapter, "count", None)
    if encode is None:
        return estimate, None
    try:
        api_key = resolve_api_key(engine.config, target.provider, engine.env)
        prepared = prepare(request, target, adapter.capabilities)
        return estimate, encode(prepared.request, target, api_key)
    except (MissingApiKey, EncodeError) as exc:
        log.info("count_tokens for %s estimated: %s", target.provider, exc)
        return estimate, None
