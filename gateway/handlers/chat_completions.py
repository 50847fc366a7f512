"""`POST /v1/chat/completions`: decode with the chat ingress codec, route, answer as JSON or SSE."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from dataclasses import replace

from aiohttp import web

from gateway.continuity.restore import answer_position, lookup_keys, restore
from gateway.handlers.common import client_error_for, error_response
from gateway.ingress.chat_decode import DecodeStats, decode_request
from gateway.ingress.chat_encode import ChatStreamEncoder, completion_json
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.metrics import AttemptOutcome, RequestRecord
from gateway.repair.report import Repair
from gateway.routing.engine import AllTargetsFailed, Answer
from gateway.routing.router import UNKNOWN_MODEL, UnknownModel
from gateway.session import derive_session_key, valid_session_id
from gateway.state import GatewayState
from gateway.transcript.assembler import Assembler, AssemblyError
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    ErrorCategory,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Request

INGRESS = "chat_completions"
log = logging.getLogger("gateway")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state: GatewayState = request.app[GatewayState.KEY]
    started = time.monotonic()
    record = RequestRecord(INGRESS, request_id=uuid.uuid4().hex)
    state.metrics.inflight.inc()
    try:
        return await _handle(request, state, record, started)
    except ClientError as exc:
        if record.outcome == "ok":  # an upstream failure already said what it was
            record.outcome = "client_error" if exc.status < 500 else "upstream_error"
        record.status = exc.status
        return error_response(exc)
    except asyncio.CancelledError:
        record.outcome = "cancelled"
        raise
    except Exception:
        record.outcome = "internal_error"
        record.status = 500
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
    canonical = decode_request(body, state.sealer, stats)
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
    session = session or derive_session_key(canonical, stats.preamble)
    record.session = session
    canonical, restored = await restore_continuity(state, canonical, session)

    try:
        answer = await state.engine.open(canonical, plan)
    except AllTargetsFailed as failed:
        record.attempts = [AttemptOutcome(a.provider, a.outcome) for a in failed.attempts]
        record.outcome = "upstream_error"
        raise client_error_for(failed) from None
    record.provider = answer.target.provider
    record.upstream_model = answer.target.model
    record.attempts = [AttemptOutcome(a.provider, a.outcome) for a in answer.attempts]
    repairs = [*restored, *answer.repairs]
    record.repairs = [(answer.target.provider, r) for r in repairs]

    headers = {
        "X-Request-Id": record.request_id,
        "X-Session-Id": session,
        "X-Gateway-Provider": answer.target.provider,
        "X-Gateway-Attempts": str(len(answer.attempts)),
    }
    if repairs:
        counts = Counter(r.kind for r in repairs)
        headers["X-Gateway-Repairs"] = ",".join(f"{kind}={n}" for kind, n in sorted(counts.items()))
    response_id = "chatcmpl-" + record.request_id
    if canonical.stream:
        return await _stream(
            request, state, answer, record, started, session, headers, response_id, canonical
        )
    assembler = Assembler()
    try:
        async for event in answer.events():
            if record.ttft is None and type(event) is BlockDelta and event.text:
                record.ttft = time.monotonic() - started
            assembler.add(event)
        turn = assembler.finish()
    except (AssemblyError, TypeError, ValueError) as exc:
        record.outcome = "upstream_error"
        raise ClientError(
            502,
            f"{answer.target.provider} broke its own answer format: {exc}",
            type="upstream_error",
            code="protocol",
        ) from None
    record.usage = turn.usage
    if assembler.error is None:
        state.recorder.record(turn.blocks, session, answer_position(canonical))
    record.status = 200
    return web.Response(
        body=completion_json(turn, response_id, canonical.model, state.sealer),
        headers=headers,
        content_type="application/json",
    )


async def restore_continuity(
    state: GatewayState, canonical: Request, session: str
) -> tuple[Request, list[Repair]]:
    """Put recorded turns (with their continuity tokens) back in place of the client's copies."""
    keys = lookup_keys(canonical, session)
    if not keys:
        return canonical, []
    values = await state.store.get_many(keys)
    return restore(canonical, dict(zip(keys, values, strict=True)), session)


async def _relay(
    response: web.StreamResponse,
    answer: Answer,
    encoder: ChatStreamEncoder,
    assembler: Assembler,
    record: RequestRecord,
    started: float,
) -> UpstreamError | None:
    """Write the answer's events as they arrive (one write per upstream chunk); the stream's
    error, if it ends with one."""
    async for batch in answer.batches():
        out = bytearray()
        for event in batch:
            t = type(event)
            if t is StreamError:
                if out:
                    await response.write(bytes(out))
                return event.error
            if record.ttft is None and (
                (t is BlockDelta and event.text) or (t is BlockStart and event.kind is BlockKind.TOOL_CALL)
            ):
                record.ttft = time.monotonic() - started
            elif t is UsageUpdate:
                record.usage = event.usage
            assembler.add(event)
            chunk = encoder.event(event)
            if chunk is not None:
                out += chunk
        if out:
            await response.write(bytes(out))
    return None


async def _stream(
    request: web.Request,
    state: GatewayState,
    answer: Answer,
    record: RequestRecord,
    started: float,
    session: str,
    headers: dict[str, str],
    response_id: str,
    canonical: Request,
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    encoder = ChatStreamEncoder(response_id, canonical.model, canonical.include_usage, state.sealer)
    assembler = Assembler()  # the turn as it streams, to record once it completed
    try:
        await response.prepare(request)
        state.in_flight.register_stream(request, response, encoder.error)  # ended this way at shutdown
        record.status = 200
        await response.write(encoder.start())
        try:
            error = await _relay(response, answer, encoder, assembler, record, started)
            turn = None if error is not None else assembler.finish()
        except (AssemblyError, TypeError, ValueError, KeyError) as exc:
            # the upstream broke its own format after the commit point: end the stream well-formed
            log.warning("%s broke its stream format: %s", answer.target.provider, exc)
            error, turn = (
                UpstreamError(ErrorCategory.PROTOCOL, f"{answer.target.provider} broke its stream format"),
                None,
            )
        if error is not None:
            # a half-finished turn is never recorded: its reasoning block may be cut short
            record.outcome = "stream_error"
            # the provider's message may quote what it was sent: never echo a secret
            await response.write(encoder.error(replace(error, message=state.redactor.text(error.message))))
            return response
        await response.write(encoder.finish())
        await response.write_eof()
        state.recorder.record(turn.blocks, session, answer_position(canonical))
        return response
    finally:
        await answer.aclose()
