"""What another target would receive for a captured client request: the same restore, repair and
encode an attempt runs (`restore_recorded`, `prepare`, `Engine.encode`), with no provider call and
no store write. The target is the one the routing would try first now for that model."""

from __future__ import annotations

from typing import Any

from gateway.exchange import plan_for, restore_recorded
from gateway.ingress.errors import ClientError
from gateway.inspector.capture import Capture
from gateway.inspector.views import sent_view, transcript_diff
from gateway.repair import prepare
from gateway.state import GatewayState
from gateway.transcript.events import UpstreamError
from gateway.transcript.model import replace


async def preview(state: GatewayState, capture: Capture, model: str) -> dict[str, Any]:
    received = capture.received
    if received is None:
        raise ClientError(
            409,
            f"request {capture.id} was refused before its transcript was decoded: nothing to preview",
            code="not_previewable",
        )
    plan = plan_for(state, model)
    request = replace(received, model=model)
    routed, restored, _ = await restore_recorded(state, request, capture.session, capture.tenant)
    engine = state.engine
    target = engine.first_target(routed, plan, capture.session)
    adapter = engine.adapter(target.kind)
    prepared = prepare(routed, target, adapter.capabilities)
    http = engine.encode(adapter, target, prepared)
    out: dict[str, Any] = {
        "id": capture.id,
        "model": plan.model,
        "target": {"provider": target.provider, "model": target.model, "kind": target.kind},
        "repairs": [{"kind": r.kind, "detail": r.detail} for r in (*restored, *prepared.repairs)],
        "transcript": {
            "provider_name": target.provider,
            **transcript_diff(
                received.messages, prepared.request.messages, prepared.provider_ids, routed.messages
            ),
        },
    }
    if isinstance(http, UpstreamError):
        out.update(url=None, upstream_request=None, sha256=None, error=http.message)
    else:
        # the body an attempt would send: exactly these bytes (their digest says so)
        out.update(url=http.url, **sent_view(http.body), error=None)
    return out
