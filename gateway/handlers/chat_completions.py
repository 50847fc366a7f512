"""`POST /v1/chat/completions`: decode with the chat ingress codec, route, answer as JSON or SSE."""

from __future__ import annotations

import time
import uuid
from collections import Counter

from aiohttp import web

from gateway.handlers.common import client_error_for, error_response
from gateway.ingress.chat_decode import DecodeStats, decode_request
from gateway.ingress.chat_encode import ChatStreamEncoder, completion_json
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.metrics import AttemptOutcome, RequestRecord
from gateway.routing.engine import AllTargetsFailed, Answer
from gateway.routing.router import UNKNOWN_MODEL, UnknownModel
from gateway.session import derive_session_key, valid_session_id
from gateway.state import GatewayState
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, StreamError, UsageUpdate

INGRESS = "chat_completions"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state: GatewayState = request.app[GatewayState.KEY]
    started = time.monotonic()
    record = RequestRecord(INGRESS, request_id=uuid.uuid4().hex)
    state.metrics.inflight.inc()
    try:
        return await _handle(request, state, record, started)
    except ClientError as exc:
        record.outcome = "client_error" if exc.status < 500 else "upstream_error"
        return error_response(exc)
    except BaseException:
        record.outcome = "cancelled"
        raise
    finally:
        record.duration = time.monotonic() - started
        state.metrics.inflight.dec()
        state.observe(record)


async def _handle(
    request: web.Request, state: GatewayState, record: RequestRecord, started: float
) -> web.StreamResponse:
    raw = await request.read()
    body = parse_json_body(raw, state.config.server.max_json_depth)
    stats = DecodeStats()
    canonical = decode_request(body, stats)
    record.ignored_tokens = stats.ignored_tokens
    try:
        plan = state.engine.router.plan(canonical.model)
    except UnknownModel:
        record.model = UNKNOWN_MODEL
        raise ClientError(
            404,
            f"model {canonical.model!r} is not a configured model group or <provider>/<model>",
            param="model",
            code="model_not_found",
        ) from None
    record.model = plan.model

    session = request.headers.get("X-Session-Id", "")
    if session and not valid_session_id(session):
        raise ClientError(
            400, "X-Session-Id must be 1-128 characters of [A-Za-z0-9._:-]", param="X-Session-Id"
        )
    session = session or derive_session_key(canonical)
    record.session = session

    try:
        answer = await state.engine.open(canonical, plan)
    except AllTargetsFailed as failed:
        record.attempts = [AttemptOutcome(a.provider, a.outcome) for a in failed.attempts]
        record.outcome = "upstream_error"
        raise client_error_for(failed) from None
    record.provider = answer.target.provider
    record.upstream_model = answer.target.model
    record.attempts = [AttemptOutcome(a.provider, a.outcome) for a in answer.attempts]
    record.repairs = [(answer.target.provider, r) for r in answer.repairs]

    headers = {
        "X-Session-Id": session,
        "X-Gateway-Provider": answer.target.provider,
        "X-Gateway-Attempts": str(len(answer.attempts)),
    }
    if answer.repairs:
        counts = Counter(r.kind for r in answer.repairs)
        headers["X-Gateway-Repairs"] = ",".join(f"{kind}={n}" for kind, n in sorted(counts.items()))
    response_id = "chatcmpl-" + record.request_id
    if canonical.stream:
        return await _stream(
            request, answer, record, started, headers, response_id, canonical.model, canonical.include_usage
        )
    assembler = Assembler()
    async for event in answer.events():
        if record.ttft is None and type(event) is BlockDelta and event.text:
            record.ttft = time.monotonic() - started
        assembler.add(event)
    turn = assembler.finish()
    record.usage = turn.usage
    return web.Response(
        body=completion_json(turn, response_id, canonical.model),
        headers=headers,
        content_type="application/json",
    )


async def _stream(
    request: web.Request,
    answer: Answer,
    record: RequestRecord,
    started: float,
    headers: dict[str, str],
    response_id: str,
    model: str,
    include_usage: bool,
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    encoder = ChatStreamEncoder(response_id, model, include_usage)
    try:
        await response.prepare(request)
        await response.write(encoder.start())
        async for batch in answer.batches():
            out = bytearray()
            for event in batch:
                t = type(event)
                if t is StreamError:
                    record.outcome = "stream_error"
                    await response.write(bytes(out) + encoder.error(event.error))
                    return response
                if record.ttft is None and (
                    (t is BlockDelta and event.text)
                    or (t is BlockStart and event.kind is BlockKind.TOOL_CALL)
                ):
                    record.ttft = time.monotonic() - started
                elif t is UsageUpdate:
                    record.usage = event.usage
                chunk = encoder.event(event)
                if chunk is not None:
                    out += chunk
            if out:
                await response.write(bytes(out))
        await response.write(encoder.finish())
        await response.write_eof()
        return response
    finally:
        await answer.aclose()
